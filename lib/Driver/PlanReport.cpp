//===- PlanReport.cpp - weftc's layout plans ------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "PlanReport.h"
#include "weft/Planner/ModelStats.h"
#include "weft/Planner/PlanFormat.h"
#include "weft/Planner/Profile.h"
#include "weft/Runtime/Kernels.h"
#include "weft/Transforms/Pipeline/Schedule.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <thread>

using namespace weft;
using rt::Status;

namespace {

std::string cacheDir() {
  if (const char *dir = std::getenv("WEFT_CACHE_DIR"); dir && *dir)
    return dir;
  llvm::SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    path = xdg;
  else if (const char *home = std::getenv("HOME"); home && *home)
    llvm::sys::path::append(path, home, ".cache");
  else
    return "";
  llvm::sys::path::append(path, "weft");
  return std::string(path);
}

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;"
                                                            : std::string(1, c);
  return out;
}

/// The mesh over the cluster's devices (ranks numbered pp, dp, tp major to
/// minor, node by node, as the runtime lays them), then the pipeline's
/// timeline under the plan's schedule with unit costs.
std::string planSvg(const planner::SearchResult &result) {
  const planner::Plan &plan = result.best;
  const planner::LayoutChoice &l = plan.layout;
  int perNode = std::max(result.context.devicesPerNode, 1);
  int devices = l.dp * l.tp * l.pp;
  int nodes = (devices + perNode - 1) / perNode;
  const int cell = 44, gap = 6, top = 40;
  int shownNodes = std::min(nodes, 64);
  int width = std::max(720, 90 + perNode * (cell + 2) + 20);
  int meshHeight = top + shownNodes * (cell + gap) + 20;
  static const char *colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                 "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"};
  std::string svg;
  std::string mesh;
  llvm::raw_string_ostream os(mesh);
  os << "<text x=\"8\" y=\"22\" font-size=\"14\">" << "mesh dp=" << l.dp
     << " tp=" << l.tp << " pp=" << l.pp << " on " << nodes << " node(s) of "
     << perNode << "; colour = pipeline stage, label = dp.tp</text>\n";
  for (int n = 0; n < shownNodes; ++n) {
    int y = top + n * (cell + gap);
    os << "<text x=\"8\" y=\"" << y + cell / 2 + 4
       << "\" font-size=\"11\">node " << n << "</text>\n";
    for (int d = 0; d < perNode; ++d) {
      int rank = n * perNode + d;
      if (rank >= devices)
        break;
      int tp = rank % l.tp, dp = (rank / l.tp) % l.dp,
          pp = rank / (l.tp * l.dp);
      int x = 90 + d * (cell + 2);
      os << "<rect class=\"device\" x=\"" << x << "\" y=\"" << y
         << "\" width=\"" << cell << "\" height=\"" << cell << "\" fill=\""
         << colors[pp % 8] << "\"><title>rank " << rank << ": pp " << pp
         << ", dp " << dp << ", tp " << tp << "</title></rect>\n"
         << "<text x=\"" << x + 4 << "\" y=\"" << y + cell / 2 + 4
         << "\" font-size=\"10\" fill=\"white\">" << dp << "." << tp
         << "</text>\n";
    }
  }
  if (nodes > shownNodes)
    os << "<text x=\"8\" y=\"" << meshHeight - 6 << "\" font-size=\"11\">... "
       << nodes - shownNodes << " more node(s) laid out the same way</text>\n";
  std::string timeline;
  int timelineHeight = 0;
  pipeline::Schedule schedule;
  pipeline::SimResult sim;
  if (l.pp > 1 &&
      pipeline::buildSchedule(l.schedule, l.pp, l.microBatches,
                              l.virtualStages, schedule)
          .ok() &&
      pipeline::simulate(schedule,
                         pipeline::Costs::uniform(l.pp * l.virtualStages, 1, 1,
                                                  1),
                         sim)
          .ok()) {
    timeline = pipeline::renderSvg(schedule, sim);
    size_t h = timeline.find("height=\"");
    if (h != std::string::npos)
      timelineHeight = std::atoi(timeline.c_str() + h + 8);
  }
  svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
        std::to_string(width) + "\" height=\"" +
        std::to_string(meshHeight + timelineHeight + 30) + "\">\n" +
        "<title>weft plan on " + escape(result.context.cluster) +
        "</title>\n" + mesh;
  if (!timeline.empty()) {
    svg += "<text x=\"8\" y=\"" + std::to_string(meshHeight + 16) +
           "\" font-size=\"14\">pipeline timeline (unit costs: F = I = W = "
           "1)</text>\n";
    // The timeline is an SVG of its own, placed below the mesh.
    timeline.insert(4, " y=\"" + std::to_string(meshHeight + 24) + "\"");
    svg += timeline;
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace

Status weft::loadPlanCluster(
    const std::string &what, int devices,
    const std::function<void(const std::string &)> &progress,
    planner::ClusterSpec &spec) {
  if (what != "local")
    return planner::loadClusterSpec(what, spec);
  int ranks = devices > 0 ? devices
                          : int(std::max(1u, std::thread::hardware_concurrency()));
  std::string dir = cacheDir();
  // Named for the GEMM library measured: installing oneDNN (or losing it)
  // changes what executables run, so it measures again. "v2": the specs
  // cached before it gave each device 0.1 GB (the host's memory was not
  // read), so they are measured again rather than trusted.
  std::string library = weft_rt_gemm_library();
  std::transform(library.begin(), library.end(), library.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  std::string path = dir.empty()
                         ? ""
                         : dir + "/local-cluster-v2-" + std::to_string(ranks) +
                               "-" + library + ".yaml";
  if (!path.empty() && llvm::sys::fs::exists(path)) {
    if (progress)
      progress("--cluster local: this machine as measured before, " + path +
               " (delete it to measure again)");
    return planner::loadClusterSpec(path, spec);
  }
  if (progress)
    progress("--cluster local: measuring this machine for " +
             std::to_string(ranks) + " rank(s) (weft-profile-cluster; once)");
  planner::ProfileOptions options;
  options.devices = ranks;
  options.progress = progress;
  planner::ProfileResult measured;
  if (Status s = planner::measureLocalMachine(options, measured); !s.ok())
    return s;
  spec = planner::specFromProfile(measured, options, "local");
  if (!path.empty()) {
    std::error_code ec = llvm::sys::fs::create_directories(dir);
    llvm::raw_fd_ostream out(path, ec);
    if (!ec) {
      out << planner::formatClusterSpec(spec, {});
      if (progress)
        progress("--cluster local: kept in " + path);
    }
  }
  return Status::success();
}

Status weft::searchModelPlan(mlir::ModuleOp module,
                             const planner::ClusterSpec &spec,
                             const planner::SearchOptions &options,
                             planner::SearchResult &result) {
  planner::ModelStats stats;
  if (Status s = planner::computeModelStats(module, stats); !s.ok())
    return s;
  planner::markPartsWeftcKeepsWhole(
      module, planner::partsCheckTp(spec, options), stats);
  return planner::searchPlan(stats, spec, options, result);
}

std::string weft::formatPlan(const planner::SearchResult &result,
                             PlanFormat format) {
  return format == PlanFormat::Table  ? planner::formatPlanTable(result)
         : format == PlanFormat::Json ? planner::formatPlanJSON(result)
                                      : planSvg(result);
}

Status weft::readPlanFile(const std::string &path, int alternative,
                          planner::Plan &plan) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return Status::error("--plan " + path + ": " + buffer.getError().message());
  planner::SearchResult result;
  if (Status s = planner::parsePlanJSON((*buffer)->getBuffer().str(), path,
                                        result);
      !s.ok())
    return s;
  if (alternative == 0) {
    plan = result.best;
    return Status::success();
  }
  if (alternative < 0 || size_t(alternative) > result.alternatives.size())
    return Status::error("--plan-alternative " + std::to_string(alternative) +
                         ": " + path + " lists " +
                         std::to_string(result.alternatives.size()) +
                         " alternatives (1 to " +
                         std::to_string(result.alternatives.size()) + ")");
  plan = result.alternatives[size_t(alternative) - 1];
  if (!plan.feasible)
    return Status::error("--plan-alternative " + std::to_string(alternative) +
                         ": that plan does not fit (" + plan.why +
                         "); choose a feasible one");
  return Status::success();
}
