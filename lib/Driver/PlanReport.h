//===- PlanReport.h - weftc's layout plans ----------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weftc --emit=plan|plan-json|plan-svg: the planner's search (lib/Planner)
// run on the imported model and a cluster, printed as a table, a plan file
// or a picture; and weftc --plan FILE: the layout a plan file chose, as the
// flags that compile it. Private to the driver.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_DRIVER_PLANREPORT_H
#define WEFT_LIB_DRIVER_PLANREPORT_H

#include "weft/Planner/Search.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>

namespace weft {

/// A cluster spec file, or `local`: this machine as weft-profile-cluster
/// measures it (for `devices` ranks, 0: its cores), measured once and kept
/// in $WEFT_CACHE_DIR (default $XDG_CACHE_HOME/weft or ~/.cache/weft) as
/// local-cluster-<devices>.yaml. `progress` gets a line per measurement.
rt::Status loadPlanCluster(const std::string &what, int devices,
                           const std::function<void(const std::string &)> &progress,
                           planner::ClusterSpec &spec);

enum class PlanFormat { Table, Json, Svg };

/// Searches the layout of `module`'s training step (its @forward) on
/// `spec` with `options` (pins and devices set).
rt::Status searchModelPlan(mlir::ModuleOp module,
                           const planner::ClusterSpec &spec,
                           const planner::SearchOptions &options,
                           planner::SearchResult &result);

/// The plan as a table, a plan file or a picture.
std::string formatPlan(const planner::SearchResult &result, PlanFormat format);

/// The layout of a plan file: its chosen plan, or with `alternative` k >= 1
/// its k-th alternative (which must be feasible).
rt::Status readPlanFile(const std::string &path, int alternative,
                        planner::Plan &plan);

} // namespace weft

#endif // WEFT_LIB_DRIVER_PLANREPORT_H
