//===- Sharding.cpp - Meshes, shardings and collective ops ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/Sharding.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Runtime/Kernels.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace weft;

//===----------------------------------------------------------------------===//
// #weft.mesh<dp = 2, tp = 2>
//===----------------------------------------------------------------------===//

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    names.push_back(StringAttr::get(parser.getContext(), name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater,
                                     parseAxis))
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), ArrayRef<StringAttr>(names),
                    ArrayRef<int64_t>(sizes));
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleaveComma(llvm::zip_equal(getNames(), getSizes()), printer,
                        [&](auto axis) {
                          printer.printKeywordOrString(
                              std::get<0>(axis).getValue());
                          printer << " = " << std::get<1>(axis);
                        });
  printer << ">";
}

LogicalResult
MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                 ArrayRef<StringAttr> names, ArrayRef<int64_t> sizes) {
  if (names.empty() || names.size() != sizes.size())
    return emitError() << "a mesh needs at least one named axis with a size";
  llvm::SmallSet<StringRef, 4> seen;
  for (auto [name, size] : llvm::zip_equal(names, sizes)) {
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' appears twice";
    if (size < 1)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' has size " << size << "; sizes are >= 1";
  }
  return success();
}

int64_t MeshAttr::getAxisSize(StringRef name) const {
  for (auto [axis, size] : llvm::zip_equal(getNames(), getSizes()))
    if (axis.getValue() == name)
      return size;
  return 0;
}

int64_t MeshAttr::getNumDevices() const {
  int64_t n = 1;
  for (int64_t size : getSizes())
    n *= size;
  return n;
}

//===----------------------------------------------------------------------===//
// #weft.sharding<[{dp}, {}], partial = [tp]>
//===----------------------------------------------------------------------===//

namespace {
ParseResult parseAxisList(AsmParser &parser, AsmParser::Delimiter delimiter,
                          SmallVectorImpl<Attribute> &axes) {
  return parser.parseCommaSeparatedList(delimiter, [&]() -> ParseResult {
    std::string name;
    if (parser.parseKeywordOrString(&name))
      return failure();
    axes.push_back(StringAttr::get(parser.getContext(), name));
    return success();
  });
}

void printAxisList(AsmPrinter &printer, ArrayAttr axes, StringRef open,
                   StringRef close) {
  printer << open;
  llvm::interleaveComma(axes, printer, [&](Attribute axis) {
    printer.printKeywordOrString(cast<StringAttr>(axis).getValue());
  });
  printer << close;
}
} // namespace

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  MLIRContext *context = parser.getContext();
  SmallVector<Attribute> dims, partial;
  if (parser.parseLess())
    return {};
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            SmallVector<Attribute> axes;
            if (parseAxisList(parser, AsmParser::Delimiter::Braces, axes))
              return failure();
            dims.push_back(ArrayAttr::get(context, axes));
            return success();
          }))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("partial") || parser.parseEqual() ||
        parseAxisList(parser, AsmParser::Delimiter::Square, partial))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    context, ArrayAttr::get(context, dims),
                    ArrayAttr::get(context, partial));
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getDims(), printer, [&](Attribute dim) {
    printAxisList(printer, cast<ArrayAttr>(dim), "{", "}");
  });
  printer << "]";
  if (!getPartial().empty())
    printAxisList(printer, getPartial(), ", partial = [", "]");
  printer << ">";
}

LogicalResult
ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     ArrayAttr dims, ArrayAttr partial) {
  llvm::SmallSet<StringRef, 4> seen;
  auto check = [&](Attribute a) -> LogicalResult {
    auto axis = dyn_cast<StringAttr>(a);
    if (!axis)
      return emitError() << "sharding axes are strings";
    if (!seen.insert(axis.getValue()).second)
      return emitError() << "mesh axis '" << axis.getValue()
                         << "' is used twice in one sharding";
    return success();
  };
  for (Attribute dim : dims) {
    auto axes = dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return emitError() << "a sharding's dims are lists of axes";
    for (Attribute a : axes)
      if (failed(check(a)))
        return failure();
  }
  for (Attribute a : partial)
    if (failed(check(a)))
      return failure();
  return success();
}

TensorSharding TensorSharding::fromAttr(ShardingAttr attr) {
  TensorSharding s;
  for (Attribute dim : attr.getDims()) {
    AxisList axes;
    for (Attribute a : cast<ArrayAttr>(dim))
      axes.push_back(cast<StringAttr>(a));
    s.dims.push_back(std::move(axes));
  }
  for (Attribute a : attr.getPartial())
    s.partial.push_back(cast<StringAttr>(a));
  return s;
}

ShardingAttr TensorSharding::toAttr(MLIRContext *context) const {
  auto list = [&](ArrayRef<StringAttr> axes) {
    return ArrayAttr::get(context,
                          SmallVector<Attribute>(axes.begin(), axes.end()));
  };
  SmallVector<Attribute> dimAttrs;
  for (const AxisList &axes : dims)
    dimAttrs.push_back(list(axes));
  return ShardingAttr::get(context, ArrayAttr::get(context, dimAttrs),
                           list(partial));
}

bool TensorSharding::isReplicated() const {
  return partial.empty() &&
         llvm::all_of(dims, [](const AxisList &a) { return a.empty(); });
}

bool TensorSharding::usesAxis(StringAttr axis) const {
  if (llvm::is_contained(partial, axis))
    return true;
  return llvm::any_of(
      dims, [&](const AxisList &a) { return llvm::is_contained(a, axis); });
}

unsigned TensorSharding::numSplits() const {
  unsigned n = 0;
  for (const AxisList &axes : dims)
    n += axes.size();
  return n;
}

int64_t weft::axesSize(MeshAttr mesh, ArrayRef<StringAttr> axes) {
  int64_t n = 1;
  for (StringAttr axis : axes)
    n *= mesh.getAxisSize(axis.getValue());
  return n;
}

FailureOr<SmallVector<int64_t>>
weft::localShape(MeshAttr mesh, ArrayRef<int64_t> shape,
                 const TensorSharding &sharding, std::string *why) {
  SmallVector<int64_t> local(shape);
  if (sharding.rank() != shape.size()) {
    if (why)
      *why = "the sharding has " + std::to_string(sharding.rank()) +
             " dims for a tensor of rank " + std::to_string(shape.size());
    return failure();
  }
  for (auto [d, axes] : llvm::enumerate(sharding.dims)) {
    int64_t n = axesSize(mesh, axes);
    if (n < 1 || local[d] % n != 0) {
      if (why)
        *why = "dimension " + std::to_string(d) + " (" +
               std::to_string(local[d]) + ") does not divide by " +
               std::to_string(n) + " ranks";
      return failure();
    }
    local[d] /= n;
  }
  return local;
}

ShardingRule ShardingRule::whole(Operation *op) {
  ShardingRule rule;
  auto dimsOf = [&](Type type) {
    ValueFactors dims;
    if (auto shaped = dyn_cast<RankedTensorType>(type))
      dims.resize(shaped.getRank());
    return dims;
  };
  for (Type t : op->getOperandTypes())
    rule.operands.push_back(dimsOf(t));
  for (Type t : op->getResultTypes())
    rule.results.push_back(dimsOf(t));
  return rule;
}

//===----------------------------------------------------------------------===//
// Collective ops
//===----------------------------------------------------------------------===//

namespace {
/// Checks that `big` is `small` with dimension `dim` multiplied by a whole
/// number, the ranks of the group (the mesh is not known here).
LogicalResult verifyBlocks(Operation *op, ArrayAttr axes, int64_t dim,
                           Type bigType, Type smallType) {
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  auto big = cast<RankedTensorType>(bigType);
  auto small = cast<RankedTensorType>(smallType);
  if (big.getRank() != small.getRank() || dim < 0 || dim >= big.getRank())
    return op->emitOpError("dim ")
           << dim << " is not a dimension of both " << big << " and "
           << small;
  for (int64_t d = 0; d < big.getRank(); ++d) {
    int64_t b = big.getDimSize(d), s = small.getDimSize(d);
    bool ok = d == dim ? (s > 0 && b % s == 0) : b == s;
    if (!ok)
      return op->emitOpError("the whole ")
             << big << " is not " << small << " in blocks along dim " << dim;
  }
  return success();
}
} // namespace

LogicalResult AllReduceOp::verify() {
  if (getAxes().empty())
    return emitOpError("needs at least one mesh axis");
  return success();
}

LogicalResult AllGatherOp::verify() {
  return verifyBlocks(*this, getAxes(), getDim(), getResult().getType(),
                      getInput().getType());
}

LogicalResult ReduceScatterOp::verify() {
  return verifyBlocks(*this, getAxes(), getDim(), getInput().getType(),
                      getResult().getType());
}

LogicalResult AllToAllOp::verify() {
  if (getAxes().empty())
    return emitOpError("needs at least one mesh axis");
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  int64_t split = getSplitDim(), concat = getConcatDim();
  int64_t rank = in.getRank();
  if (out.getRank() != rank || split < 0 || split >= rank || concat < 0 ||
      concat >= rank || split == concat)
    return emitOpError("split_dim ")
           << split << " and concat_dim " << concat
           << " are not two different dimensions of both " << in << " and "
           << out;
  // n ranks: the split dimension shrinks by n, the concatenated one grows
  // by n.
  int64_t inSplit = in.getDimSize(split), outSplit = out.getDimSize(split);
  int64_t n = outSplit > 0 && inSplit % outSplit == 0 ? inSplit / outSplit : 0;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t i = in.getDimSize(d), o = out.getDimSize(d);
    bool ok = d == split ? n > 0 : d == concat ? o == i * n : o == i;
    if (!ok)
      return emitOpError("cannot turn ")
             << in << " into " << out << " by splitting dim " << split
             << " and concatenating dim " << concat
             << " over the same number of ranks";
  }
  return success();
}

namespace {
/// `peer` names a rank of the group of `axes`: checked against the
/// module's mesh where it has one (before --weft-apply-mesh sets it, the
/// sizes are not known). The tag must fit the runtime's.
LogicalResult verifyTransfer(Operation *op, ArrayAttr axes, int64_t peer,
                             int64_t tag) {
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  if (tag < 0 || tag > WEFT_RT_MAX_TAG)
    return op->emitOpError("tag ")
           << tag << " is outside [0, 2^48): the runtime's message slots "
           << "hold 48 bits of tag";
  auto module = op->getParentOfType<ModuleOp>();
  auto mesh = module
                  ? module->getAttrOfType<MeshAttr>(WeftDialect::kMeshAttrName)
                  : MeshAttr();
  if (!mesh) {
    if (peer < 0)
      return op->emitOpError("peer ") << peer << " is negative";
    return success();
  }
  int64_t size = 1;
  for (Attribute axis : axes) {
    StringRef name = cast<StringAttr>(axis).getValue();
    int64_t axisSize = mesh.getAxisSize(name);
    if (axisSize == 0)
      return op->emitOpError("names axis \"")
             << name << "\", which the mesh " << mesh << " does not have";
    size *= axisSize;
  }
  if (peer < 0 || peer >= size) {
    InFlightDiagnostic diag = op->emitOpError("peer ") << peer;
    if (axes.size() == 1)
      diag << " is not a coordinate on axis " << axes[0];
    else
      diag << " is not a rank of the group of axes " << axes;
    return diag << " of the mesh " << mesh << " (0 to " << size - 1 << ")";
  }
  return success();
}
} // namespace

LogicalResult SendOp::verify() {
  return verifyTransfer(*this, getAxes(), getPeer(), getTag());
}

LogicalResult RecvOp::verify() {
  return verifyTransfer(*this, getAxes(), getPeer(), getTag());
}

LogicalResult ShardSliceOp::verify() {
  return verifyBlocks(*this, getAxes(), getDim(), getInput().getType(),
                      getResult().getType());
}

OpFoldResult ShardSliceOp::fold(FoldAdaptor adaptor) {
  // Every rank's block of a splat is the same splat.
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

LogicalResult AxisIndexOp::verify() {
  if (getAxes().empty())
    return emitOpError("needs at least one mesh axis");
  return success();
}

LogicalResult ShardAsOp::verify() {
  auto type = cast<RankedTensorType>(getInput().getType());
  if (int64_t(getSharding().getDims().size()) != type.getRank())
    return emitOpError("sharding has ")
           << getSharding().getDims().size() << " dims for " << type;
  return success();
}
