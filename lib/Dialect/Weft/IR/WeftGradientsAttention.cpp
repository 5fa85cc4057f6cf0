//===- WeftGradientsAttention.cpp - Gradient rule of weft.attention -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

using namespace mlir;
using namespace weft;
using namespace weft::grad;

/// d query, d key and d value come from one weft.attention_grad, which
/// recomputes the probabilities from the saved log-sum-exp instead of
/// reading stored [T, S] scores (see its description for the math).
LogicalResult AttentionOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (resultGrads.size() > 1 && resultGrads[1])
    return emitOpError("the log-sum-exp of weft.attention is an internal "
                       "result for its gradient and carries no adjoint of "
                       "its own");
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  auto grads = AttentionGradOp::create(
      b, getLoc(), resultGrads[0], getQuery(), getKey(), getValue(),
      getResult(), getLogsumexp(), getScaleAttr(), getCausalAttr());
  operandGrads.push_back(grads.getQueryGrad());
  operandGrads.push_back(grads.getKeyGrad());
  operandGrads.push_back(grads.getValueGrad());
  return success();
}
