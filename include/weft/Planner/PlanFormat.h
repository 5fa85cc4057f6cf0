//===- PlanFormat.h - Plans as a table, as JSON, and diffs ------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A plan is read by people (the table: layout, memory breakdown, predicted
// time split, then the runner-up meshes and why each lost) and by programs
// (JSON, `weft-plan search --emit=plan-json`): parsePlanJSON reads that
// file back, validated, so that a later compile or `weft-plan diff` uses
// exactly the plan written. docs/planner.md ("Plan files") lists the
// fields.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_PLANFORMAT_H
#define WEFT_PLANNER_PLANFORMAT_H

#include "weft/Planner/Search.h"

#include <string>

namespace weft {
namespace planner {

/// The version written into every plan file; parsePlanJSON refuses others.
inline constexpr int kPlanFormatVersion = 1;

/// The human-readable plan, ending in a newline.
std::string formatPlanTable(const SearchResult &result);

/// The plan file: the context, the plan's fields and `alternatives`,
/// pretty-printed with keys in a fixed order.
std::string formatPlanJSON(const SearchResult &result);

/// Reads a plan file. Errors name `source` and the field's path
/// ("plan.json: alternatives[1].mesh.tp: expected a positive integer").
Status parsePlanJSON(const std::string &text, const std::string &source,
                     SearchResult &out);

/// What differs from `a` to `b` (layout fields), and what it costs: step
/// time and its parts, memory per device and its parts, throughput.
std::string formatPlanDiff(const SearchResult &a, const std::string &nameA,
                           const SearchResult &b, const std::string &nameB);

} // namespace planner
} // namespace weft

#endif // WEFT_PLANNER_PLANFORMAT_H
