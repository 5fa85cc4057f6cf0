//===- weft-opt.cpp - Run Weft passes on MLIR files -----------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Conversion/Passes.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  // Only what Weft parses or produces: a register-everything tool is slow to
  // link and accepts IR that no Weft pass understands.
  registry.insert<weft::WeftDialect, mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  weft::registerWeftTransformsPasses();
  weft::registerWeftConversionPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Weft optimizer driver\n", registry));
}
