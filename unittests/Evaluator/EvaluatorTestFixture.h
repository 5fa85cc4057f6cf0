//===- EvaluatorTestFixture.h - Setup shared by evaluator tests -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Tests build small functions from MLIR text and compare their values with
// numbers worked out by hand; this fixture parses, runs and captures
// diagnostics so each test reads as IR, inputs and expected values.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_UNITTESTS_EVALUATOR_EVALUATORTESTFIXTURE_H
#define WEFT_UNITTESTS_EVALUATOR_EVALUATORTESTFIXTURE_H

#include "weft/Evaluator/Evaluator.h"

#include "weft/Dialect/Weft/IR/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

namespace weft {
namespace eval {
namespace test {

using namespace mlir;

class EvaluatorTest : public ::testing::Test {
protected:
  EvaluatorTest() {
    DialectRegistry registry;
    registry.insert<WeftDialect, func::FuncDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    context.allowUnregisteredDialects();
  }

  /// Parses `ir` as a module and evaluates its function `fn` on `args`.
  /// Diagnostics go to `diagnostics` instead of stderr.
  FailureOr<SmallVector<Tensor>> run(StringRef ir, ArrayRef<Tensor> args,
                                     StringRef fn = "f") {
    diagnostics.clear();
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return success();
    });
    module = parseSourceString<ModuleOp>(ir, ParserConfig(&context));
    if (!module) {
      ADD_FAILURE() << "cannot parse:\n" << ir.str() << "\n" << diagnostics;
      return failure();
    }
    auto f = module->lookupSymbol<func::FuncOp>(fn);
    if (!f) {
      ADD_FAILURE() << "no function @" << fn.str();
      return failure();
    }
    return evaluateFunction(f, args);
  }

  /// Runs a function expected to succeed with one result.
  Tensor runOne(StringRef ir, ArrayRef<Tensor> args) {
    FailureOr<SmallVector<Tensor>> results = run(ir, args);
    if (failed(results) || results->size() != 1) {
      ADD_FAILURE() << "evaluation failed: " << diagnostics;
      return Tensor();
    }
    return std::move(results->front());
  }

  Tensor make(Type elementType, ArrayRef<int64_t> shape,
              ArrayRef<double> values) {
    Tensor t = Tensor::zeros(RankedTensorType::get(shape, elementType));
    EXPECT_EQ(static_cast<int64_t>(values.size()), t.numElements());
    for (auto [i, v] : llvm::enumerate(values)) {
      if (t.isFloat())
        t.fp[i] = v;
      else
        t.ints[i] = static_cast<int64_t>(v);
    }
    return t;
  }
  Tensor f32(ArrayRef<int64_t> shape, ArrayRef<double> values) {
    return make(Float32Type::get(&context), shape, values);
  }
  Tensor f64(ArrayRef<int64_t> shape, ArrayRef<double> values) {
    return make(Float64Type::get(&context), shape, values);
  }
  Tensor i64(ArrayRef<int64_t> shape, ArrayRef<double> values) {
    return make(IntegerType::get(&context, 64), shape, values);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::string diagnostics;
};

inline void expectValues(const Tensor &t, ArrayRef<int64_t> shape,
                         ArrayRef<double> expected, double tolerance = 0) {
  ASSERT_EQ(ArrayRef<int64_t>(t.shape), shape);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), t.numElements());
  for (size_t i = 0; i < expected.size(); ++i) {
    double actual = t.isFloat() ? t.fp[i] : static_cast<double>(t.ints[i]);
    if (tolerance == 0)
      EXPECT_EQ(actual, expected[i]) << "element " << i;
    else
      EXPECT_NEAR(actual, expected[i], tolerance) << "element " << i;
  }
}

} // namespace test
} // namespace eval
} // namespace weft

#endif // WEFT_UNITTESTS_EVALUATOR_EVALUATORTESTFIXTURE_H
