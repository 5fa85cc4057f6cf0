//===- ScheduleReport.cpp - A pipeline's stages and schedule, for people --===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "ScheduleReport.h"
#include "weft/Planner/CostModel.h"

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Transforms/Pipeline/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cstdio>

using namespace mlir;
using namespace weft;
using namespace weft::pipeline;

namespace {

/// Numbers in fixed formats, so the report is the same bytes every run.
std::string format(const char *fmt, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, x);
  return buf;
}

std::string padLeft(const std::string &s, size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

} // namespace

FailureOr<std::vector<StageSummary>> weft::readStageSummary(ModuleOp module) {
  auto array = module->getAttrOfType<ArrayAttr>(kPipelineStagesAttrName);
  if (!array || array.empty())
    return module.emitError()
           << "the module has no " << kPipelineStagesAttrName
           << " summary: its stages were not cut (--weft-assign-stages "
              "runs on the model's @forward)";
  std::vector<StageSummary> stages;
  for (auto [s, entry] : llvm::enumerate(array)) {
    auto dict = dyn_cast<DictionaryAttr>(entry);
    StageSummary stage;
    auto get = [&](StringRef key, int64_t &value) {
      auto attr = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr();
      if (attr)
        value = attr.getInt();
      return static_cast<bool>(attr);
    };
    if (!get("ops", stage.ops) || !get("flops", stage.flops) ||
        !get("params", stage.params) || !get("bytes_sent", stage.bytesSent))
      return module.emitError()
             << kPipelineStagesAttrName << " entry " << s
             << " is not a dictionary of integers ops, flops, params and "
                "bytes_sent; cut the stages again with --weft-assign-stages";
    stages.push_back(stage);
  }
  // The first parameter each stage reads, from the stage tags on @forward:
  // what a person compares with --stage-cuts.
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward");
      forward && !forward.isExternal()) {
    for (Operation &op : forward.front().without_terminator()) {
      auto tag = op.getAttrOfType<IntegerAttr>(kStageAttrName);
      if (!tag || tag.getInt() < 0 || tag.getInt() >= int64_t(stages.size()))
        continue;
      std::string &first = stages[size_t(tag.getInt())].firstParam;
      for (Value operand : op.getOperands()) {
        auto arg = dyn_cast<BlockArgument>(operand);
        if (!first.empty() || !arg || arg.getOwner() != &forward.front())
          continue;
        if (StringAttr name =
                getArgName(forward, arg.getArgNumber(), contract::Role::Param))
          first = name.str();
      }
    }
  }
  return stages;
}

ScheduleMachine weft::scheduleMachine(const planner::ClusterSpec *cluster,
                                      int ranks) {
  ScheduleMachine m;
  if (!cluster) {
    m.description = "assuming " + format("%g", m.flopsPerSecond / 1e9) +
                    " GFLOP/s per rank and " +
                    format("%g", m.bytesPerSecond / 1e9) +
                    " GB/s per link (not measured)";
    return m;
  }
  double efficiency = planner::efficiencyFor(*cluster, "fp32");
  m.flopsPerSecond = cluster->device.peakTFLOPs.at("fp32") * 1e12 * efficiency;
  bool crossesNodes = ranks > cluster->devicesPerNode;
  const planner::ClusterSpec::Link &link =
      crossesNodes ? cluster->interNode : cluster->intraNode;
  m.bytesPerSecond = link.bandwidthGBps * 1e9;
  m.latencySeconds = link.latencyUs * 1e-6;
  m.description = "from cluster '" + cluster->name + "': " +
                  format("%g", m.flopsPerSecond / 1e12) +
                  " TFLOP/s fp32 per rank (peak x efficiency " +
                  format("%g", efficiency) + "), " +
                  (crossesNodes ? "inter" : "intra") + "-node link " +
                  format("%g", link.bandwidthGBps) + " GB/s and " +
                  format("%g", link.latencyUs) + " us";
  return m;
}

Costs weft::estimateStageCosts(ArrayRef<StageSummary> stages,
                               const ScheduleMachine &machine) {
  constexpr double kMicrosecond = 1e-6;
  Costs costs;
  int64_t mostBytes = 0;
  for (const StageSummary &stage : stages) {
    double forward = double(stage.flops) / machine.flopsPerSecond / kMicrosecond;
    costs.forward.push_back(forward);
    costs.inputGrad.push_back(forward);
    costs.weightGrad.push_back(forward);
    mostBytes = std::max(mostBytes, stage.bytesSent);
  }
  costs.transferLatency =
      (machine.latencySeconds + double(mostBytes) / machine.bytesPerSecond) /
      kMicrosecond;
  return costs;
}

Status weft::renderScheduleReport(ArrayRef<StageSummary> stages,
                                  const ScheduleRequest &request,
                                  std::string &out) {
  ScheduleMachine machine = scheduleMachine(request.cluster, request.ranks);
  Costs costs = estimateStageCosts(stages, machine);
  Schedule schedule;
  if (Status s =
          buildSchedule(request.kind, request.ranks, request.microBatches,
                        request.virtualStages, costs, schedule);
      !s.ok())
    return s;
  if (Status s = verifySchedule(schedule); !s.ok())
    return Status::error("the built schedule does not verify: " + s.message);
  SimResult sim;
  if (Status s = simulate(schedule, costs, sim); !s.ok())
    return s;
  if (request.svg) {
    out = renderSvg(schedule, sim);
    return Status::success();
  }

  auto count = [](int64_t n, const char *one, const char *many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  out.clear();
  out += "pipeline: " + count(int64_t(stages.size()), "stage", "stages") +
         " on " + count(request.ranks, "rank", "ranks") +
         " (--mesh pp=" + std::to_string(request.ranks);
  if (request.virtualStages > 1)
    out += ", --virtual-stages " + std::to_string(request.virtualStages);
  out += "), " + count(request.microBatches, "micro-batch", "micro-batches") +
         " per step, schedule " + getScheduleKindName(request.kind) + "\n\n";

  // The stage table.
  struct Column {
    const char *header;
    std::vector<std::string> cells;
    bool left = false;
  };
  std::vector<Column> columns = {{"stage", {}},       {"rank", {}},
                                 {"ops", {}},         {"GFLOP fwd", {}},
                                 {"forward us", {}},  {"parameters", {}},
                                 {"MiB sent on", {}}, {"starts at", {}, true}};
  for (auto [s, stage] : llvm::enumerate(stages)) {
    columns[0].cells.push_back(std::to_string(s));
    columns[1].cells.push_back(std::to_string(schedule.rankOf(int(s))));
    columns[2].cells.push_back(std::to_string(stage.ops));
    columns[3].cells.push_back(format("%.4f", double(stage.flops) / 1e9));
    columns[4].cells.push_back(format("%.2f", costs.forward[s]));
    columns[5].cells.push_back(std::to_string(stage.params));
    columns[6].cells.push_back(
        format("%.4f", double(stage.bytesSent) / 1048576.0));
    columns[7].cells.push_back(stage.firstParam.empty() ? "-"
                                                        : stage.firstParam);
  }
  std::vector<size_t> widths;
  for (const Column &column : columns) {
    size_t width = std::string(column.header).size();
    for (const std::string &cell : column.cells)
      width = std::max(width, cell.size());
    widths.push_back(width);
  }
  auto row = [&](auto cellOf) {
    std::string line;
    for (size_t c = 0; c < columns.size(); ++c) {
      std::string cell = cellOf(c);
      if (c)
        line += "  ";
      line += columns[c].left ? cell + std::string(widths[c] - cell.size(), ' ')
                              : padLeft(cell, widths[c]);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  };
  row([&](size_t c) { return std::string(columns[c].header); });
  for (size_t s = 0; s < stages.size(); ++s)
    row([&](size_t c) { return columns[c].cells[s]; });

  // The cost model, stated with its assumptions.
  int64_t mostBytes = 0;
  for (const StageSummary &stage : stages)
    mostBytes = std::max(mostBytes, stage.bytesSent);
  std::string flopRate =
      format("%g", machine.flopsPerSecond / 1e9) + " GFLOP/s";
  std::string byteRate = format("%g", machine.bytesPerSecond / 1e9) + " GB/s";
  out += "\ncosts per micro-batch, in microseconds (us), " +
         machine.description +
         ":\n"
         "  forward   the stage's FLOPs at " +
         flopRate +
         "\n"
         "  backward  2 x forward, split evenly: input gradient (I) = weight "
         "gradient (W) = forward\n"
         "  transfer  " +
         format("%.2f", costs.transferLatency) +
         " us for every message: " +
         (machine.latencySeconds > 0
              ? format("%g", machine.latencySeconds * 1e6) + " us latency + "
              : std::string()) +
         "the most a stage sends on (" +
         format("%.4f", double(mostBytes) / 1048576.0) + " MiB) at " +
         byteRate + "\n\n";

  out += renderTimeline(schedule, sim);

  out +=
      "\nbubble (idle / makespan): " + format("%.1f", sim.bubble * 100) + "% (";
  for (int r = 0; r < request.ranks; ++r)
    out += (r ? ", rank " : "rank ") + std::to_string(r) + " " +
           format("%.1f", sim.rankBubble[size_t(r)] * 100) + "%";
  out += ")\n";
  out += request.virtualStages > 1
             ? "peak (chunk, micro-batch) pairs in flight, each chunk 1/" +
                   std::to_string(request.virtualStages) +
                   " of a rank's layers: "
             : std::string("peak micro-batches in flight: ");
  for (int r = 0; r < request.ranks; ++r)
    out += (r ? ", rank " : "rank ") + std::to_string(r) + " " +
           std::to_string(sim.peakActivations[size_t(r)]);
  out += "\n";
  return Status::success();
}
