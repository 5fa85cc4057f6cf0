//===- WeftAttentionOps.td - Fused attention ---------------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Scaled dot-product attention as one op, so that the [T, S] scores of a
// (batch, head) never exist as a tensor: --weft-fuse-attention builds it
// from the imported chain matmul -> scale -> causal_mask -> softmax ->
// matmul, and it lowers to a runtime kernel (lib/Runtime/Attention.cpp)
// that computes the scores block by block. Included by WeftOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_ATTENTION_OPS_TD
#define WEFT_ATTENTION_OPS_TD

def Weft_AttentionOp : Weft_Op<"attention", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["query", "key", "value", "result"]>,
    Weft_Differentiable, DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_ShardingRuleOpInterface>]> {
  let summary = "Scaled dot-product attention without materialized scores";
  let description = [{
    For every leading (batch, head) index and query row `i`:

    ```
    s[i, j]   = scale * sum_c query[i, c] * key[j, c]   (j > i masked when causal)
    logsumexp[i] = log sum_j exp(s[i, j])
    result[i, :] = sum_j exp(s[i, j] - logsumexp[i]) * value[j, :]
    ```

    the same numbers as `weft.softmax(weft.causal_mask(weft.mul(
    weft.matmul(query, key^T), scale)))` times `value`, computed with an
    online softmax over blocks of keys. `logsumexp` is what
    `weft.attention_grad` needs to recompute the probabilities; it carries
    no gradient of its own. Its element type is f32 when the query's is
    narrower (bf16, f16), else the query's: a bf16 log-sum-exp would put
    its rounding error into the exponent of every recomputed probability.

    ```mlir
    %o, %lse = weft.attention %q, %k, %v {scale = 0.25 : f64, causal}
        : (tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>)
        -> (tensor<4x2x16x16xf32>, tensor<4x2x16xf32>)
    ```
    Constraints: `query` is `[..., T, D]`, `key` `[..., S, D]`, `value`
    `[..., S, Dv]` with rank >= 2 and the same leading axes; `query`,
    `key`, `value` and `result` have one element type, `logsumexp` the
    one above; `scale` is positive.
  }];
  let arguments = (ins Weft_FloatTensor:$query, Weft_FloatTensor:$key,
      Weft_FloatTensor:$value, ConfinedAttr<F64Attr, [Weft_PositiveFloat]>:$scale,
      UnitAttr:$causal);
  let results = (outs Weft_FloatTensor:$result, Weft_FloatTensor:$logsumexp);
  let assemblyFormat = "$query `,` $key `,` $value attr-dict `:` "
                       "functional-type(operands, results)";
}

def Weft_AttentionGradOp : Weft_Op<"attention_grad", [Pure,
    InferTypeOpAdaptor,
    AllElementTypesMatch<["result_grad", "query", "key", "value", "result"]>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_ShardingRuleOpInterface>]> {
  let summary = "Adjoint of weft.attention";
  let description = [{
    From the adjoint `dO` of the forward `result`, with the probabilities
    `p[i, j] = exp(s[i, j] - logsumexp[i])` recomputed block by block:

    ```
    dp[i, j]    = sum_c dO[i, c] * value[j, c]
    ds[i, j]    = p[i, j] * (dp[i, j] - sum_c dO[i, c] * result[i, c])
    query_grad  = scale * ds @ key;   key_grad = scale * ds^T @ query
    value_grad  = p^T @ dO
    ```

    The operands after `result_grad` are the forward op's operands and
    results; the attributes are its own.

    ```mlir
    %dq, %dk, %dv = weft.attention_grad %do, %q, %k, %v, %o, %lse
        {scale = 0.25 : f64, causal}
        : (tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>,
           tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16xf32>)
        -> (tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>)
    ```
    Constraints: `query`, `key` and `value` as for `weft.attention`;
    `result` and `result_grad` are the forward result's shape and element
    type, `logsumexp` its shape without the last axis and the element type
    `weft.attention` gives it (f32 for a bf16 or f16 query).
  }];
  let arguments = (ins Weft_FloatTensor:$result_grad, Weft_FloatTensor:$query,
      Weft_FloatTensor:$key, Weft_FloatTensor:$value, Weft_FloatTensor:$result,
      Weft_FloatTensor:$logsumexp,
      ConfinedAttr<F64Attr, [Weft_PositiveFloat]>:$scale, UnitAttr:$causal);
  let results = (outs Weft_FloatTensor:$query_grad, Weft_FloatTensor:$key_grad,
      Weft_FloatTensor:$value_grad);
  let assemblyFormat = "operands attr-dict `:` "
                       "functional-type(operands, results)";
}

#endif // WEFT_ATTENTION_OPS_TD
