//===- ApproximateMathTest.cpp - Error bounds of --weft-approximate-math --===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Compiles one loop per function (out[i] = f(in[i])) the way weftc compiles
// a kernel: --weft-approximate-math, the lowering to LLVM, LLVM O2 for the
// CPU (generic x86-64 without FMA, and this machine), and runs it on a dense
// sweep of f32 inputs: every 1021st bit pattern (both signs, every
// exponent, denormals, infinities, NaNs), a fine grid over the range where
// the function is not constant, and the special values. Results are
// compared with the double-precision std:: function. The bounds asserted
// here are the ones docs/codegen.md states.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"
#include "weft/Target/CPU.h"
#include "weft/Target/Registration.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

using namespace mlir;

namespace {

/// A function under test: its math op, the double reference, the inputs
/// where it is not constant (the grid), and the bound on the error of its
/// normal results in units in the last place of the f32 result.
struct MathFunction {
  const char *name;
  double (*reference)(double);
  float gridLo, gridHi;
  double ulpBound;
};

// Bounds: the largest error measured on either CPU (see the table the test
// prints), rounded up. docs/codegen.md states the same numbers.
const MathFunction kFunctions[] = {
    {"exp", [](double x) { return std::exp(x); }, -104.f, 89.f, 6},
    {"expm1", [](double x) { return std::expm1(x); }, -18.f, 89.f, 6},
    {"tanh", [](double x) { return std::tanh(x); }, -10.f, 10.f, 6},
    {"erf", [](double x) { return std::erf(x); }, -4.5f, 4.5f, 6},
    {"log", [](double x) { return std::log(x); }, 0.f, 16.f, 2},
    {"log1p", [](double x) { return std::log1p(x); }, -1.f, 16.f, 3},
};

/// A loop applying `op` to each element; `_bf16` variants round the input
/// to bf16 and compute the op on bf16.
std::string kernelSource() {
  std::string source;
  for (const MathFunction &fn : kFunctions) {
    for (bool bf16 : {false, true}) {
      std::string name = std::string(fn.name) + (bf16 ? "_bf16" : "");
      std::string body =
          bf16 ? "%b = arith.truncf %x : f32 to bf16\n"
                 "    %r = math." +
                     std::string(fn.name) +
                     " %b : bf16\n"
                     "    %y = arith.extf %r : bf16 to f32\n"
               : "%y = math." + std::string(fn.name) + " %x : f32\n";
      source += "func.func @" + name +
                "(%in: memref<?xf32>, %out: memref<?xf32>)\n"
                "    attributes {llvm.emit_c_interface} {\n"
                "  %c0 = arith.constant 0 : index\n"
                "  %c1 = arith.constant 1 : index\n"
                "  %n = memref.dim %in, %c0 : memref<?xf32>\n"
                "  scf.for %i = %c0 to %n step %c1 {\n"
                "    %x = memref.load %in[%i] : memref<?xf32>\n"
                "    " +
                body +
                "    memref.store %y, %out[%i] : memref<?xf32>\n"
                "  }\n"
                "  return\n"
                "}\n";
    }
  }
  return source;
}

/// The lowering of lib/Driver/Pipelines.cpp's addLoopsToLLVMPasses for
/// loops that are already scf.for.
void buildLowering(PassManager &pm) {
  pm.addNestedPass<func::FuncOp>(weft::createApproximateMathPass());
  pm.addPass(createSCFToControlFlowPass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

/// What the optimized LLVM function of one kernel looks like.
struct KernelShape {
  bool vectorized = false;
  std::vector<std::string> calls; // libm calls and libm-bound intrinsics
};

KernelShape inspect(llvm::Function &fn) {
  // Intrinsics that become libm calls on x86-64 without SSE4.1/FMA.
  static const llvm::StringSet<> libmIntrinsics = {
      "exp", "exp2",  "log",  "log2",  "log10", "pow",  "tanh",
      "fma", "floor", "ceil", "trunc", "round", "rint", "nearbyint"};
  KernelShape shape;
  for (llvm::Instruction &inst : llvm::instructions(fn)) {
    if (auto *vec = llvm::dyn_cast<llvm::FixedVectorType>(inst.getType()))
      shape.vectorized |= vec->getElementType()->isFloatTy();
    auto *call = llvm::dyn_cast<llvm::CallInst>(&inst);
    if (!call || !call->getCalledFunction())
      continue;
    llvm::Function *callee = call->getCalledFunction();
    llvm::StringRef name = callee->getName();
    if (!callee->isIntrinsic()) {
      shape.calls.push_back(name.str());
      continue;
    }
    llvm::StringRef base = name.drop_front(5).split('.').first; // "llvm."
    if (libmIntrinsics.contains(base))
      shape.calls.push_back(name.str());
  }
  return shape;
}

/// A one-dimensional memref descriptor, as `llvm.emit_c_interface` takes it.
struct MemRef1D {
  float *allocated, *aligned;
  int64_t offset, size, stride;
};

/// The kernels compiled for one CPU and run through the JIT.
class CompiledKernels {
public:
  explicit CompiledKernels(const std::string &cpu) {
    DialectRegistry registry;
    weft::registerCodegenDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = parseSourceString<ModuleOp>(kernelSource(), &context);
    if (!module)
      return;
    PassManager pm(&context);
    buildLowering(pm);
    if (failed(pm.run(*module)))
      return;
    Location loc = UnknownLoc::get(&context);
    weft::CpuTargetOptions options;
    options.cpu = cpu;
    std::unique_ptr<llvm::TargetMachine> optMachine =
        weft::createCpuTargetMachine(options, loc);
    std::unique_ptr<llvm::TargetMachine> jitMachine =
        weft::createCpuTargetMachine(options, loc);
    if (!optMachine || !jitMachine)
      return;
    auto transformer = [&](llvm::Module *m) {
      weft::optimizeLLVMModule(*m, *optMachine, /*optLevel=*/2);
      for (llvm::Function &fn : *m)
        if (!fn.isDeclaration())
          shapes[fn.getName().str()] = inspect(fn);
      return llvm::Error::success();
    };
    ExecutionEngineOptions engineOptions;
    engineOptions.transformer = transformer;
    auto created =
        ExecutionEngine::create(*module, engineOptions, std::move(jitMachine));
    if (!created) {
      llvm::consumeError(created.takeError());
      return;
    }
    engine = std::move(*created);
  }

  bool ok() const { return engine != nullptr; }

  const KernelShape &shape(const std::string &name) { return shapes[name]; }

  std::vector<float> run(const std::string &name,
                         const std::vector<float> &input) {
    std::vector<float> output(input.size());
    auto fn = engine->lookup("_mlir_ciface_" + name);
    if (!fn) {
      llvm::consumeError(fn.takeError());
      ADD_FAILURE() << "no function " << name;
      return output;
    }
    auto *call = reinterpret_cast<void (*)(MemRef1D *, MemRef1D *)>(*fn);
    auto *in = const_cast<float *>(input.data());
    MemRef1D inRef{in, in, 0, (int64_t)input.size(), 1};
    MemRef1D outRef{output.data(), output.data(), 0, (int64_t)output.size(), 1};
    call(&inRef, &outRef);
    return output;
  }

private:
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> engine;
  std::map<std::string, KernelShape> shapes;
};

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// The sweep: every 1021st bit pattern, a grid of 2^20 + 1 points over
/// [lo, hi], and the special values.
std::vector<float> sweep(float lo, float hi) {
  std::vector<float> xs;
  for (uint64_t bits = 0; bits <= UINT32_MAX; bits += 1021)
    xs.push_back(fromBits((uint32_t)bits));
  const int grid = 1 << 20;
  for (int i = 0; i <= grid; ++i)
    xs.push_back(lo + (hi - lo) * (float)((double)i / grid));
  const float inf = std::numeric_limits<float>::infinity();
  const float denormMin = std::numeric_limits<float>::denorm_min();
  for (float x :
       {0.f, 1.f, 0.5f, 2.f, 1e-3f, 1e-20f, FLT_MIN, denormMin, 1e-40f, 3e-39f,
        FLT_MAX, inf, std::numeric_limits<float>::quiet_NaN()}) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  return xs;
}

/// Round `x` to bf16 (nearest even), as arith.truncf does.
float roundToBf16(float x) {
  if (std::isnan(x))
    return x;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x7fff + ((bits >> 16) & 1);
  return fromBits(bits & 0xffff0000u);
}

/// The error of `got` against the exact `want` in units in the last place
/// of a float of want's magnitude (an f32 ulp for f32 results, 2^16 of
/// them for bf16 ones: `mantissaBits` 24 or 8). Infinite when the NaN-ness
/// or infinity differs.
double ulpError(float got, double want, int mantissaBits) {
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) && std::isnan(got) ? 0 : INFINITY;
  if ((double)got == want)
    return 0;
  if (mantissaBits == 24 ? got == (float)want : got == roundToBf16(want))
    return 0;
  if (std::isinf(got) || std::isinf(want))
    return INFINITY;
  int exponent;
  std::frexp(want, &exponent);
  double ulp = std::ldexp(1.0, std::max(exponent, -125) - mantissaBits);
  return std::fabs(got - want) / ulp;
}

struct ErrorStats {
  double maxUlp = 0;
  float worstInput = 0;
  /// Results below the smallest normal float: the largest absolute error.
  double maxTinyError = 0;
};

ErrorStats measure(const std::vector<float> &xs, const std::vector<float> &got,
                   const MathFunction &fn, bool bf16) {
  ErrorStats stats;
  for (size_t i = 0; i < xs.size(); ++i) {
    float x = bf16 ? roundToBf16(xs[i]) : xs[i];
    double want = fn.reference(x);
    if (std::fabs(want) < FLT_MIN) {
      double error = std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - want);
      stats.maxTinyError = std::max(stats.maxTinyError, error);
      continue;
    }
    double error = ulpError(got[i], want, bf16 ? 8 : 24);
    if (error > stats.maxUlp || std::isnan(error)) {
      stats.maxUlp = error;
      stats.worstInput = xs[i];
    }
  }
  return stats;
}

class ApproximateMathTest : public ::testing::TestWithParam<const char *> {};

TEST_P(ApproximateMathTest, ErrorBoundsAndVectorizedLoops) {
  CompiledKernels kernels(GetParam());
  ASSERT_TRUE(kernels.ok())
      << "cannot compile the kernels for --cpu=" << GetParam();
  for (const MathFunction &fn : kFunctions) {
    std::vector<float> xs = sweep(fn.gridLo, fn.gridHi);
    for (bool bf16 : {false, true}) {
      std::string name = std::string(fn.name) + (bf16 ? "_bf16" : "");
      SCOPED_TRACE(name);
      const KernelShape &shape = kernels.shape(name);
      EXPECT_TRUE(shape.vectorized) << name << "'s loop is not vectorized";
      for (const std::string &callee : shape.calls)
        ADD_FAILURE() << name << " still calls " << callee;

      std::vector<float> got = kernels.run(name, xs);
      ErrorStats stats = measure(xs, got, fn, bf16);
      std::printf("  --cpu=%-8s %-12s max %.3f ulp (at %.9g), results "
                  "below FLT_MIN off by at most %.3g\n",
                  GetParam(), name.c_str(), stats.maxUlp,
                  (double)stats.worstInput, stats.maxTinyError);
      // bf16: the f32 result rounded once more, half a bf16 ulp.
      double bound = bf16 ? 0.5 + fn.ulpBound / 65536 : fn.ulpBound;
      EXPECT_LE(stats.maxUlp, bound) << "worst input " << stats.worstInput;
      // exp flushes results below 2^-126 to zero.
      EXPECT_LE(stats.maxTinyError, FLT_MIN);
    }
  }
}

/// The values the ops define exactly: overflow, underflow, saturation,
/// poles, domain errors and NaN.
TEST_P(ApproximateMathTest, SpecialValues) {
  CompiledKernels kernels(GetParam());
  ASSERT_TRUE(kernels.ok());
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char *fn;
    float x, want;
  };
  const Case cases[] = {
      {"exp", 0.f, 1.f},     {"exp", -0.f, 1.f},      {"exp", 89.f, inf},
      {"exp", 1000.f, inf},  {"exp", inf, inf},       {"exp", -104.f, 0.f},
      {"exp", -inf, 0.f},    {"expm1", 0.f, 0.f},     {"expm1", inf, inf},
      {"expm1", -inf, -1.f}, {"expm1", -100.f, -1.f}, {"expm1", 100.f, inf},
      {"tanh", 0.f, 0.f},    {"tanh", 20.f, 1.f},     {"tanh", -20.f, -1.f},
      {"tanh", inf, 1.f},    {"tanh", -inf, -1.f},    {"erf", 0.f, 0.f},
      {"erf", 5.f, 1.f},     {"erf", -5.f, -1.f},     {"erf", inf, 1.f},
      {"erf", -inf, -1.f},   {"log", 0.f, -inf},      {"log", -0.f, -inf},
      {"log", 1.f, 0.f},     {"log", inf, inf},       {"log", -1.f, nan},
      {"log", -inf, nan},    {"log", -1e-40f, nan},   {"log1p", 0.f, 0.f},
      {"log1p", -1.f, -inf}, {"log1p", -2.f, nan},    {"log1p", inf, inf},
      {"log1p", -inf, nan},
  };
  for (const Case &c : cases) {
    float got = kernels.run(c.fn, {c.x})[0];
    if (std::isnan(c.want))
      EXPECT_TRUE(std::isnan(got)) << c.fn << "(" << c.x << ") = " << got;
    else
      EXPECT_EQ(got, c.want) << c.fn << "(" << c.x << ")";
  }
  // NaN propagates; the odd functions keep the sign of zero except erf
  // (erf(-0) = +0).
  for (const MathFunction &fn : kFunctions) {
    EXPECT_TRUE(std::isnan(kernels.run(fn.name, {nan})[0])) << fn.name;
    std::string name = fn.name;
    if (name == "expm1" || name == "tanh" || name == "log1p") {
      float negZero = kernels.run(fn.name, {-0.f})[0];
      EXPECT_TRUE(negZero == 0 && std::signbit(negZero)) << fn.name;
    }
  }
  // log of denormals: the smallest one is 2^-149.
  EXPECT_NEAR(kernels.run("log", {std::numeric_limits<float>::denorm_min()})[0],
              -149 * M_LN2, 1e-4);
}

// generic: x86-64 without FMA or SSE4.1, weftc's default. native: this
// machine (FMA and wider vectors where it has them).
INSTANTIATE_TEST_SUITE_P(Cpus, ApproximateMathTest,
                         ::testing::Values("generic", "native"));

} // namespace
