//===- AttentionTest.cpp - weft.attention against what it replaces -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Three oracles, each independent of what it checks:
// - the evaluator's weft.attention and weft.attention_grad against the
//   chain --weft-fuse-attention replaces (matmul, mul, causal_mask,
//   softmax, matmul) and that chain's gradient as --weft-autodiff builds
//   it, in f64 on random inputs;
// - the runtime kernel (lib/Runtime/Attention.cpp) against the evaluator in
//   f32 and bf16, on sizes that are not multiples of its blocks or vector
//   widths, causal and not, more queries than keys and fewer.
// The finite-difference check of the rule is in GradCheckTest.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Attention.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Evaluator/Evaluator.h"
#include "weft/Runtime/Bf16.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace weft;
using namespace weft::eval;

namespace {

/// One case: H heads (as 1 x H leading axes), T queries, S keys, widths D
/// and Dv.
struct Shape {
  int64_t h, t, s, d, dv;
  bool causal;
};

class AttentionTest : public ::testing::Test {
protected:
  AttentionTest() {
    DialectRegistry registry;
    registry.insert<WeftDialect, func::FuncDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(const std::string &ir) {
    OwningOpRef<ModuleOp> m =
        parseSourceString<ModuleOp>(ir, ParserConfig(&context));
    EXPECT_TRUE(m) << ir;
    return m;
  }

public:
  Tensor randomTensor(RankedTensorType type, double lo, double hi) {
    return random(type, lo, hi);
  }

protected:
  Tensor random(RankedTensorType type, double lo, double hi) {
    Tensor t = Tensor::zeros(type);
    std::uniform_real_distribution<double> u(lo, hi);
    for (double &v : t.fp)
      v = t.elementType.isF32()    ? double(float(u(rng)))
          : t.elementType.isBF16() ? double(weft::rt::bf16ToFloat(
                                         weft::rt::floatToBf16(float(u(rng)))))
                                   : u(rng);
    return t;
  }

public:
  static std::string tensor(ArrayRef<int64_t> shape, StringRef element) {
    std::string s = "tensor<";
    for (int64_t x : shape)
      s += std::to_string(x) + "x";
    return s + element.str() + ">";
  }

protected:
  MLIRContext context;
  std::mt19937_64 rng{7};
};

double maxAbsDiff(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.shape, b.shape);
  double worst = 0;
  for (size_t i = 0; i < a.fp.size(); ++i)
    worst = std::max(worst, std::fabs(a.fp[i] - b.fp[i]));
  return worst;
}

/// @loss(q, k, v, w) = sum(attention(q, k, v) * w) through the unfused
/// chain, and @fused(q, k, v, w) -> (out, lse, dq, dk, dv) through the ops.
std::string chainModule(const Shape &n, double scale) {
  auto q = AttentionTest::tensor({1, n.h, n.t, n.d}, "f64");
  auto k = AttentionTest::tensor({1, n.h, n.s, n.d}, "f64");
  auto kt = AttentionTest::tensor({1, n.h, n.d, n.s}, "f64");
  auto v = AttentionTest::tensor({1, n.h, n.s, n.dv}, "f64");
  auto sc = AttentionTest::tensor({1, n.h, n.t, n.s}, "f64");
  auto o = AttentionTest::tensor({1, n.h, n.t, n.dv}, "f64");
  auto l = AttentionTest::tensor({1, n.h, n.t}, "f64");
  std::string mask =
      n.causal ? "  %m = weft.causal_mask %c : " + sc + "\n" : "";
  std::string masked = n.causal ? "%m" : "%c";
  std::string causal = n.causal ? ", causal" : "";
  return llvm::formatv(R"mlir(
func.func @loss(%q: {0} {{weft.param = "q"}, %k: {1} {{weft.param = "k"},
                %v: {2} {{weft.param = "v"}, %w: {4} {{weft.input = "w"})
    -> tensor<f64> {{
  %kt = weft.transpose %k {{permutation = array<i64: 0, 1, 3, 2>} : ({1}) -> {7}
  %s = weft.matmul %q, %kt : ({0}, {7}) -> {3}
  %scale = weft.constant dense<{6}> : tensor<f64>
  %c = weft.mul %s, %scale : ({3}, tensor<f64>) -> {3}
{8}  %p = weft.softmax {9} {{axis = 3 : i64} : {3}
  %o = weft.matmul %p, %v : ({3}, {2}) -> {4}
  %ow = weft.mul %o, %w : ({4}, {4}) -> {4}
  %r = weft.reduce_sum %ow {{axes = array<i64: 0, 1, 2, 3>} : ({4}) -> tensor<f64>
  return %r : tensor<f64>
}
func.func @fused(%q: {0}, %k: {1}, %v: {2}, %w: {4})
    -> ({4}, {5}, {0}, {1}, {2}) {{
  %o, %lse = weft.attention %q, %k, %v {{scale = {6} : f64{10}}
      : ({0}, {1}, {2}) -> ({4}, {5})
  %dq, %dk, %dv = weft.attention_grad %w, %q, %k, %v, %o, %lse {{scale = {6} : f64{10}}
      : ({4}, {0}, {1}, {2}, {4}, {5}) -> ({0}, {1}, {2})
  return %o, %lse, %dq, %dk, %dv : {4}, {5}, {0}, {1}, {2}
}
func.func @chain(%q: {0}, %k: {1}, %v: {2}) -> {4} {{
  %kt = weft.transpose %k {{permutation = array<i64: 0, 1, 3, 2>} : ({1}) -> {7}
  %s = weft.matmul %q, %kt : ({0}, {7}) -> {3}
  %scale = weft.constant dense<{6}> : tensor<f64>
  %c = weft.mul %s, %scale : ({3}, tensor<f64>) -> {3}
{8}  %p = weft.softmax {9} {{axis = 3 : i64} : {3}
  %o = weft.matmul %p, %v : ({3}, {2}) -> {4}
  return %o : {4}
}
)mlir",
                       q, k, v, sc, o, l, llvm::formatv("{0:e}", scale).str(),
                       kt, mask, masked, causal);
}

TEST_F(AttentionTest, EvaluatorMatchesTheUnfusedChainAndItsGradient) {
  for (Shape n : {Shape{2, 5, 5, 3, 4, true}, Shape{2, 4, 6, 3, 2, false},
                  Shape{1, 7, 3, 2, 3, true}}) {
    SCOPED_TRACE(llvm::formatv("T {0} S {1} causal {2}", n.t, n.s, n.causal)
                     .str());
    OwningOpRef<ModuleOp> module = parse(chainModule(n, 0.37));
    ASSERT_TRUE(module);
    auto fused = module->lookupSymbol<func::FuncOp>("fused");
    SmallVector<Tensor> args;
    for (Type t : fused.getArgumentTypes())
      args.push_back(random(cast<RankedTensorType>(t), -2, 2));
    FailureOr<SmallVector<Tensor>> got = evaluateFunction(fused, args);
    FailureOr<SmallVector<Tensor>> chain = evaluateFunction(
        module->lookupSymbol<func::FuncOp>("chain"),
        ArrayRef<Tensor>(args).take_front(3));
    ASSERT_TRUE(succeeded(got) && succeeded(chain));
    EXPECT_LE(maxAbsDiff((*got)[0], (*chain)[0]), 1e-12);

    PassManager pm(&context);
    pm.addPass(createAutodiffPass());
    ASSERT_TRUE(succeeded(pm.run(*module)));
    FailureOr<SmallVector<Tensor>> grads = evaluateFunction(
        module->lookupSymbol<func::FuncOp>("loss_grad"), args);
    ASSERT_TRUE(succeeded(grads));
    ASSERT_EQ(grads->size(), 4u);
    for (int i = 0; i < 3; ++i)
      EXPECT_LE(maxAbsDiff((*got)[2 + i], (*grads)[1 + i]), 1e-12)
          << "gradient of operand " << i;
  }
}

/// The kernel's results against the evaluator's: the evaluator computes
/// whole rows in double, the kernel blocks of rows in float (bf16: on
/// widened copies, each result rounded once). `tolerance` is relative to
/// the largest magnitude of each result.
void checkKernel(AttentionTest &test, MLIRContext &context, Shape n, bool bf16,
                 double tolerance);

TEST_F(AttentionTest, RuntimeKernelMatchesTheEvaluator) {
  // f32 accumulation over up to 130 terms.
  for (Shape n : {Shape{3, 37, 37, 13, 7, true}, Shape{2, 45, 70, 13, 7, false},
                  Shape{2, 100, 40, 5, 9, true}, Shape{1, 33, 97, 17, 19, true},
                  Shape{2, 130, 130, 64, 64, true}, Shape{1, 1, 1, 1, 1, true}})
    checkKernel(*this, context, n, /*bf16=*/false, 2e-5);
}

TEST_F(AttentionTest, Bf16RuntimeKernelMatchesTheEvaluator) {
  // Both round each result to bf16 once (2^-9 relative), from sums in
  // float and in double: one bf16 step apart at most.
  for (Shape n : {Shape{3, 37, 37, 13, 7, true}, Shape{2, 45, 70, 13, 7, false},
                  Shape{2, 130, 130, 64, 64, true}})
    checkKernel(*this, context, n, /*bf16=*/true, 1e-2);
}

void checkKernel(AttentionTest &test, MLIRContext &context, Shape n, bool bf16,
                 double tolerance) {
  SCOPED_TRACE(llvm::formatv("{6} H {0} T {1} S {2} D {3} Dv {4} causal {5}",
                             n.h, n.t, n.s, n.d, n.dv, n.causal,
                             bf16 ? "bf16" : "f32")
                   .str());
  StringRef e = bf16 ? "bf16" : "f32";
  auto q = AttentionTest::tensor({n.h, n.t, n.d}, e);
  auto k = AttentionTest::tensor({n.h, n.s, n.d}, e);
  auto v = AttentionTest::tensor({n.h, n.s, n.dv}, e);
  auto o = AttentionTest::tensor({n.h, n.t, n.dv}, e);
  auto l = AttentionTest::tensor({n.h, n.t}, "f32");
  double scale = 1.0 / std::sqrt(double(n.d));
  std::string attrs = llvm::formatv("{{scale = {0:e} : f64{1}}", scale,
                                    n.causal ? ", causal" : "");
  std::string ir = llvm::formatv(R"mlir(
func.func @f(%q: {0}, %k: {1}, %v: {2}, %g: {3}) -> ({3}, {4}, {0}, {1}, {2}) {{
  %o, %lse = weft.attention %q, %k, %v {5} : ({0}, {1}, {2}) -> ({3}, {4})
  %dq, %dk, %dv = weft.attention_grad %g, %q, %k, %v, %o, %lse {5}
      : ({3}, {0}, {1}, {2}, {3}, {4}) -> ({0}, {1}, {2})
  return %o, %lse, %dq, %dk, %dv : {3}, {4}, {0}, {1}, {2}
}
)mlir",
                                 q, k, v, o, l, attrs);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(ir, ParserConfig(&context));
  ASSERT_TRUE(module) << ir;
  auto f = module->lookupSymbol<func::FuncOp>("f");
  SmallVector<Tensor> args;
  for (Type t : f.getArgumentTypes())
    args.push_back(test.randomTensor(cast<RankedTensorType>(t), -3, 3));
  FailureOr<SmallVector<Tensor>> want = evaluateFunction(f, args);
  ASSERT_TRUE(succeeded(want));

  size_t nq = n.h * n.t * n.d, nk = n.h * n.s * n.d, nv = n.h * n.s * n.dv,
         no = n.h * n.t * n.dv;
  std::vector<float> out(no), lse(n.h * n.t), dq(nq), dk(nk), dv(nv);
  // The kernels of one storage type E on the arguments stored as E, their
  // results read back as f32.
  auto run = [&](auto store, auto load, auto forward, auto backward) {
    using E = decltype(store(0.0f));
    auto stored = [&](const Tensor &t) {
      std::vector<E> x(t.fp.size());
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = store(float(t.fp[i]));
      return x;
    };
    auto loadInto = [&](const std::vector<E> &x, std::vector<float> &to) {
      for (size_t i = 0; i < x.size(); ++i)
        to[i] = load(x[i]);
    };
    std::vector<E> sq = stored(args[0]), sk = stored(args[1]),
                   sv = stored(args[2]), sg = stored(args[3]), so(no), sdq(nq),
                   sdk(nk), sdv(nv);
    forward(n.h, n.t, n.s, n.d, n.dv, float(scale), n.causal, sq.data(),
            sk.data(), sv.data(), so.data(), lse.data());
    backward(n.h, n.t, n.s, n.d, n.dv, float(scale), n.causal, sg.data(),
             sq.data(), sk.data(), sv.data(), so.data(), lse.data(), sdq.data(),
             sdk.data(), sdv.data());
    loadInto(so, out);
    loadInto(sdq, dq);
    loadInto(sdk, dk);
    loadInto(sdv, dv);
  };
  if (bf16)
    run(weft::rt::floatToBf16, weft::rt::bf16ToFloat, weft_rt_attention_bf16,
        weft_rt_attention_grad_bf16);
  else
    run([](float x) { return x; }, [](float x) { return x; },
        weft_rt_attention_f32, weft_rt_attention_grad_f32);
  auto compare = [&](const std::vector<float> &got, const Tensor &ref,
                     const char *what) {
    double scaleOf = 1e-30, worst = 0;
    for (double x : ref.fp)
      scaleOf = std::max(scaleOf, std::fabs(x));
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - ref.fp[i]));
    EXPECT_LE(worst / scaleOf, tolerance)
        << what << ": max |error| " << worst << " of max |value| " << scaleOf;
  };
  compare(out, (*want)[0], "result");
  compare(lse, (*want)[1], "logsumexp");
  compare(dq, (*want)[2], "query_grad");
  compare(dk, (*want)[3], "key_grad");
  compare(dv, (*want)[4], "value_grad");
}

} // namespace
