//===- WeftInterfaces.td - What every weft op must answer --*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Shape inference uses upstream InferTypeOpInterface; gradients, sharding
// rules and costs are Weft's own.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_INTERFACES_TD
#define WEFT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Weft_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    Reverse-mode rule of a differentiable op: given the adjoints of its
    results, build the adjoints of its operands (a vector-Jacobian product)
    at the builder's insertion point. Forward values the rule needs are the
    op's own operands and results, so they stay explicit in the IR and a
    later pass may recompute instead of storing them.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds operand adjoints. `resultGrads` has one entry per result; an
        entry is null where the result does not reach the loss.
        `operandGrads` receives one entry per operand, null for operands
        that carry no gradient (integers, masks, shapes).
      }],
      "::llvm::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

// No gradient flows through an op with this trait: its results are
// piecewise constant in its float operands (comparisons) or depend on none
// (constants, indices). A parameter whose every path to the loss crosses
// such an op gets no gradient; the training passes report it and leave it
// untrained. Every weft op either implements GradientOpInterface or carries
// this trait (GradCheckTest checks it, listing the few exceptions); an op
// with neither, reached on a path from a parameter to the loss, is an error
// in --weft-autodiff, never a silently frozen parameter.
def Weft_NotDifferentiable : NativeOpTrait<"NotDifferentiable"> {
  let cppNamespace = "::weft::OpTrait";
}

def Weft_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    One-device cost of an op for the planner: floating-point operations and
    the bytes it must move to and from memory if nothing is fused.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations of one execution.",
      "double", "getFlops", (ins)>,
    InterfaceMethod<"Bytes read and written when run unfused.",
      "double", "getBytesAccessed", (ins), [{}], [{
        double bytes = 0;
        auto count = [&](::mlir::Type t) {
          if (auto rt = ::llvm::dyn_cast<::mlir::RankedTensorType>(t))
            bytes += double(rt.getNumElements()) *
                     double(rt.getElementTypeBitWidth() + 7) / 8;
        };
        for (::mlir::Type t : $_op->getOperandTypes())
          count(t);
        for (::mlir::Type t : $_op->getResultTypes())
          count(t);
        return bytes;
      }]>
  ];
}

def Weft_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    How an op may be split over a mesh, as factors shared between its
    operands' and results' dimensions (Shardy's einsum-like rules): the
    factors of a matmul `[B, M, K] x [K, N] -> [B, M, N]` are b, m, k (a
    sum) and n. Propagation assigns mesh axes to factors; the partitioner
    derives from them every operand's required layout and every result's
    layout, `partial` over the axes of split sum factors. A dimension with
    no factor (a broadcast one, a softmax axis) is never split. The rules
    live in lib/Dialect/Weft/IR/WeftShardingRules.cpp.
  }];
  let methods = [
    InterfaceMethod<"The op's factors and where they appear.",
      "::weft::ShardingRule", "getShardingRule", (ins)>
  ];
}

#endif // WEFT_INTERFACES_TD
