// A bf16 weft.attention and its adjoint against NumPy: the operands are
// bf16, the results rounded to bf16 from sums in double (NumPy's double
// results rounded to bf16 match them exactly on these inputs), the
// log-sum-exp f32 (a bf16 one would be ~1e-3 off).
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.default_rng(3); \
// RUN:   [np.save('%t/' + n + '.npy', r.standard_normal(s).astype(np.float32)) \
// RUN:    for n, s in [('q', (2, 5, 4)), ('k', (2, 6, 4)), ('v', (2, 6, 3)), ('g', (2, 5, 3))]]"
// RUN: weft-eval %s --input q=%t/q.npy --input k=%t/k.npy --input v=%t/v.npy --input g=%t/g.npy -o %t/out
// RUN: %python -c "import numpy as np; \
// RUN:   bf = lambda x: ((np.asarray(x, np.float32).view(np.uint32).astype(np.uint64) + 0x7FFF \
// RUN:     + ((np.asarray(x, np.float32).view(np.uint32) >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32); \
// RUN:   q, k, v, g = [bf(np.load('%t/' + n + '.npy')).astype(np.float64) for n in 'qkvg']; \
// RUN:   s = 0.5 * q @ k.transpose(0, 2, 1); s[:, np.triu(np.ones((5, 6), bool), 1)] = -np.inf; \
// RUN:   m = s.max(-1, keepdims=True); lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True)); \
// RUN:   p = np.exp(s - lse); dp = g @ v.transpose(0, 2, 1); \
// RUN:   ds = p * (dp - (p * dp).sum(-1, keepdims=True)); \
// RUN:   np.save('%t/want.0.npy', bf(p @ v)); np.save('%t/want.1.npy', lse[..., 0].astype(np.float32)); \
// RUN:   np.save('%t/want.2.npy', bf(0.5 * ds @ k)); \
// RUN:   np.save('%t/want.3.npy', bf(0.5 * ds.transpose(0, 2, 1) @ q)); \
// RUN:   np.save('%t/want.4.npy', bf(p.transpose(0, 2, 1) @ g))"
// RUN: %compare %t/out.0.npy %t/want.0.npy --rtol 1e-6
// RUN: %compare %t/out.1.npy %t/want.1.npy --rtol 1e-6
// RUN: %compare %t/out.2.npy %t/want.2.npy --rtol 1e-6
// RUN: %compare %t/out.3.npy %t/want.3.npy --rtol 1e-6
// RUN: %compare %t/out.4.npy %t/want.4.npy --rtol 1e-6

func.func @forward(%q32: tensor<2x5x4xf32> {weft.input = "q"},
                   %k32: tensor<2x6x4xf32> {weft.input = "k"},
                   %v32: tensor<2x6x3xf32> {weft.input = "v"},
                   %g32: tensor<2x5x3xf32> {weft.input = "g"})
    -> (tensor<2x5x3xf32>, tensor<2x5xf32>, tensor<2x5x4xf32>,
        tensor<2x6x4xf32>, tensor<2x6x3xf32>) {
  %q = weft.cast %q32 : tensor<2x5x4xf32> -> tensor<2x5x4xbf16>
  %k = weft.cast %k32 : tensor<2x6x4xf32> -> tensor<2x6x4xbf16>
  %v = weft.cast %v32 : tensor<2x6x3xf32> -> tensor<2x6x3xbf16>
  %g = weft.cast %g32 : tensor<2x5x3xf32> -> tensor<2x5x3xbf16>
  %o, %lse = weft.attention %q, %k, %v {scale = 0.5 : f64, causal}
      : (tensor<2x5x4xbf16>, tensor<2x6x4xbf16>, tensor<2x6x3xbf16>)
      -> (tensor<2x5x3xbf16>, tensor<2x5xf32>)
  %dq, %dk, %dv = weft.attention_grad %g, %q, %k, %v, %o, %lse {scale = 0.5 : f64, causal}
      : (tensor<2x5x3xbf16>, tensor<2x5x4xbf16>, tensor<2x6x4xbf16>,
         tensor<2x6x3xbf16>, tensor<2x5x3xbf16>, tensor<2x5xf32>)
      -> (tensor<2x5x4xbf16>, tensor<2x6x4xbf16>, tensor<2x6x3xbf16>)
  %o32 = weft.cast %o : tensor<2x5x3xbf16> -> tensor<2x5x3xf32>
  %dq32 = weft.cast %dq : tensor<2x5x4xbf16> -> tensor<2x5x4xf32>
  %dk32 = weft.cast %dk : tensor<2x6x4xbf16> -> tensor<2x6x4xf32>
  %dv32 = weft.cast %dv : tensor<2x6x3xbf16> -> tensor<2x6x3xf32>
  return %o32, %lse, %dq32, %dk32, %dv32
      : tensor<2x5x3xf32>, tensor<2x5xf32>, tensor<2x5x4xf32>,
        tensor<2x6x4xf32>, tensor<2x6x3xf32>
}
