//===- Render.cpp - Drawing a simulated pipeline schedule -----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Both charts are functions of the schedule and its simulated times only,
// with numbers printed by snprintf in fixed formats, so the same input
// gives the same bytes (tests compare them).
//
//===----------------------------------------------------------------------===//

#include "weft/Transforms/Pipeline/Schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace weft;
using namespace weft::pipeline;

namespace {

/// Columns of the text chart at most; longer runs use a coarser unit.
constexpr int kMaxColumns = 1000;

std::string format(const char *fmt, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, x);
  return buf;
}

std::string title(const Schedule &s, const SimResult &sim) {
  return std::string(getScheduleKindName(s.kind)) +
         " p=" + std::to_string(s.ranks) +
         " m=" + std::to_string(s.microBatches) +
         " v=" + std::to_string(s.virtualStages) + ": makespan " +
         format("%g", sim.makespan) + ", bubble " +
         format("%.1f", sim.bubble * 100) + "%";
}

/// "F3", or "F3:1" for chunk 1 of an interleaved schedule.
std::string label(const Schedule &s, const Action &a) {
  std::string text = getActionKindName(a.kind) + std::to_string(a.microBatch);
  if (s.virtualStages > 1)
    text += ":" + std::to_string(a.chunk);
  return text;
}

/// The shortest computation that takes any time; 0 if none does.
double shortest(const Schedule &s, const SimResult &sim) {
  double unit = 0;
  for (int r = 0; r < s.ranks; ++r) {
    for (size_t i = 0; i < s.perRank[r].size(); ++i) {
      double length = sim.spans[r][i].end - sim.spans[r][i].start;
      if (s.perRank[r][i].isCompute() && length > 0)
        unit = unit == 0 ? length : std::min(unit, length);
    }
  }
  return unit;
}

bool consistent(const Schedule &s, const SimResult &sim) {
  if ((int)s.perRank.size() != s.ranks || (int)sim.spans.size() != s.ranks)
    return false;
  for (int r = 0; r < s.ranks; ++r)
    if (sim.spans[r].size() != s.perRank[r].size())
      return false;
  return true;
}

struct Style {
  Action::Kind kind;
  const char *fill, *text, *legend;
};
/// Indexed by Action::Kind.
constexpr Style kStyles[] = {
    {Action::Forward, "#4e79a7", "#ffffff", "F forward"},
    {Action::Backward, "#e15759", "#ffffff",
     "B backward (input + weight gradient)"},
    {Action::InputGrad, "#f28e2b", "#000000", "I input gradient"},
    {Action::WeightGrad, "#59a14f", "#ffffff", "W weight gradient"},
};
constexpr const char *kIdleFill = "#e6e6e6";

} // namespace

std::string weft::pipeline::renderTimeline(const Schedule &s,
                                           const SimResult &sim) {
  std::string out = title(s, sim) + "\n";
  double unit = shortest(s, sim);
  if (!consistent(s, sim) || unit <= 0)
    return out;
  unit = std::max(unit, sim.makespan / kMaxColumns);
  int columns = (int)std::ceil(sim.makespan / unit - 1e-9);
  size_t width = 1;
  for (const std::vector<Action> &program : s.perRank)
    for (const Action &a : program)
      if (a.isCompute())
        width = std::max(width, label(s, a).size());

  for (int r = 0; r < s.ranks; ++r) {
    std::string row = "rank " + std::to_string(r) + " |";
    size_t i = 0;
    const std::vector<Action> &program = s.perRank[r];
    for (int c = 0; c < columns; ++c) {
      // The computation running at the middle of the column, if any.
      double middle = (c + 0.5) * unit;
      while (i < program.size() &&
             (!program[i].isCompute() || sim.spans[r][i].end <= middle))
        ++i;
      // A computation longer than a column names itself once and then
      // continues as "-", so that two columns never read as two actions.
      std::string cell = ".";
      if (i < program.size() && sim.spans[r][i].start <= middle)
        cell =
            sim.spans[r][i].start > middle - unit ? label(s, program[i]) : "-";
      row += " " + cell + std::string(width - cell.size(), ' ');
    }
    row.erase(row.find_last_not_of(' ') + 1);
    out += row + "\n";
  }
  return out;
}

std::string weft::pipeline::renderSvg(const Schedule &s, const SimResult &sim) {
  const double left = 70, top = 40, rowHeight = 22, rowGap = 6;
  double unit = shortest(s, sim);
  bool drawable = consistent(s, sim) && unit > 0;
  // The shortest computation gets 28 pixels, the chart at most 1600.
  double scale = drawable ? std::min(28 / unit, 1600 / sim.makespan) : 1;
  double plotWidth = drawable ? sim.makespan * scale : 0;
  double legendY = top + s.ranks * (rowHeight + rowGap) + 14;
  double width = std::max(left + plotWidth + 20, 560.0);
  double height = legendY + 30;
  auto px = [](double x) { return format("%.2f", x); };

  std::string out;
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) +
         "\" height=\"" + px(height) + "\" font-family=\"sans-serif\">\n";
  out +=
      "<text x=\"8\" y=\"22\" font-size=\"14\">" + title(s, sim) + "</text>\n";
  bool used[Action::WeightGrad + 1] = {};
  for (int r = 0; drawable && r < s.ranks; ++r) {
    double y = top + r * (rowHeight + rowGap);
    out += "<text x=\"8\" y=\"" + px(y + 15) + "\" font-size=\"12\">rank " +
           std::to_string(r) + "</text>\n";
    out += "<rect class=\"idle\" x=\"" + px(left) + "\" y=\"" + px(y) +
           "\" width=\"" + px(plotWidth) + "\" height=\"" + px(rowHeight) +
           "\" fill=\"" + kIdleFill + "\"/>\n";
    for (size_t i = 0; i < s.perRank[r].size(); ++i) {
      const Action &a = s.perRank[r][i];
      const SimResult::Span &span = sim.spans[r][i];
      if (!a.isCompute() || span.end <= span.start)
        continue;
      used[a.kind] = true;
      double x = left + span.start * scale, w = (span.end - span.start) * scale;
      std::string text = std::to_string(a.microBatch);
      if (s.virtualStages > 1)
        text += ":" + std::to_string(a.chunk);
      out += "<rect class=\"act " + std::string(getActionKindName(a.kind)) +
             "\" x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(w) +
             "\" height=\"" + px(rowHeight) + "\" fill=\"" +
             kStyles[a.kind].fill + "\" stroke=\"#ffffff\"><title>" +
             describe(s, a) + ", " + format("%g", span.start) + " to " +
             format("%g", span.end) + "</title></rect>\n";
      out += "<text x=\"" + px(x + w / 2) + "\" y=\"" + px(y + 15) +
             "\" font-size=\"11\" text-anchor=\"middle\" fill=\"" +
             kStyles[a.kind].text + "\">" + text + "</text>\n";
    }
  }
  // The legend lists the kinds drawn, then idle.
  double x = left;
  auto entry = [&](const char *fill, const char *name) {
    out += "<rect class=\"legend\" x=\"" + px(x) + "\" y=\"" + px(legendY) +
           "\" width=\"14\" height=\"14\" fill=\"" + fill + "\"/>\n";
    out += "<text x=\"" + px(x + 18) + "\" y=\"" + px(legendY + 12) +
           "\" font-size=\"12\">" + name + "</text>\n";
    x += 26 + 7 * std::string(name).size();
  };
  for (const Style &style : kStyles)
    if (used[style.kind])
      entry(style.fill, style.legend);
  entry(kIdleFill, "idle");
  out += "</svg>\n";
  return out;
}
