//===- ScopeNoAliasAccesses.cpp - noalias arguments as alias scopes -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A kernel's `noalias` pointer arguments tell LLVM nothing once its
// parallel loop is outlined into the OpenMP body function, which receives
// the pointers as plain arguments. Alias-scope metadata travels with each
// load and store instead. As LLVM's inliner does for a noalias argument,
// every access through noalias argument `p` gets p's scope and is marked
// as not aliasing the other noalias arguments' scopes; an access through
// another argument does not alias any of them. Accesses whose pointer is
// not traced back to an argument are left without metadata (may alias).
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMInterfaces.h"

namespace weft {
#define GEN_PASS_DEF_SCOPENOALIASACCESSESPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The function argument `pointer` is computed from by address arithmetic,
/// or null.
BlockArgument baseArgument(Value pointer, Block *entry) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(pointer))
      return arg.getOwner() == entry ? arg : BlockArgument();
    Operation *op = pointer.getDefiningOp();
    if (auto gep = dyn_cast<LLVM::GEPOp>(op))
      pointer = gep.getBase();
    else if (isa<LLVM::AddrSpaceCastOp, LLVM::BitcastOp>(op))
      pointer = op->getOperand(0);
    else
      return {};
  }
}

struct ScopeNoAliasAccessesPass
    : weft::impl::ScopeNoAliasAccessesPassBase<ScopeNoAliasAccessesPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    for (auto fn : getOperation().getOps<LLVM::LLVMFuncOp>()) {
      if (fn.isExternal())
        continue;
      Block *entry = &fn.getBody().front();
      DenseMap<BlockArgument, LLVM::AliasScopeAttr> scopes;
      SmallVector<Attribute> allScopes;
      LLVM::AliasScopeDomainAttr domain;
      for (BlockArgument arg : entry->getArguments()) {
        if (!isa<LLVM::LLVMPointerType>(arg.getType()) ||
            !fn.getArgAttr(arg.getArgNumber(),
                           LLVM::LLVMDialect::getNoAliasAttrName()))
          continue;
        // Only functions with scopes get a domain: each is a distinct
        // attribute the context keeps.
        if (!domain)
          domain = LLVM::AliasScopeDomainAttr::get(
              ctx, StringAttr::get(ctx, fn.getName()));
        auto scope = LLVM::AliasScopeAttr::get(
            domain,
            StringAttr::get(ctx, "arg" + std::to_string(arg.getArgNumber())));
        scopes[arg] = scope;
        allScopes.push_back(scope);
      }
      if (scopes.empty())
        continue;

      fn.walk([&](LLVM::AliasAnalysisOpInterface access) {
        if (access.getAliasScopesOrNull() || access.getNoAliasScopesOrNull())
          return;
        SmallVector<Attribute> own;
        for (Value pointer : access.getAccessedOperands()) {
          BlockArgument arg = baseArgument(pointer, entry);
          if (!arg)
            return;
          if (auto it = scopes.find(arg);
              it != scopes.end() && !llvm::is_contained(own, it->second))
            own.push_back(it->second);
        }
        SmallVector<Attribute> others;
        for (Attribute scope : allScopes)
          if (!llvm::is_contained(own, scope))
            others.push_back(scope);
        if (!own.empty())
          access.setAliasScopes(ArrayAttr::get(ctx, own));
        if (!others.empty())
          access.setNoAliasScopes(ArrayAttr::get(ctx, others));
        ++numScoped;
      });
    }
  }
};

} // namespace
