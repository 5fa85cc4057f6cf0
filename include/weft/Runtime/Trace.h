//===- Trace.h - A timeline of a rank's communication -------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// With WEFT_TRACE=DIR set, each rank records when its steps ran and when
// each collective, send and recv was issued, ran on its communication
// thread and was waited for, and writes them at the end of the run to
// DIR/rank<N>.json in the Chrome trace format (chrome://tracing,
// ui.perfetto.dev): one process per rank, one lane per thread. Gaps on the
// step lane are computation. Without WEFT_TRACE nothing is recorded.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_TRACE_H
#define WEFT_RUNTIME_TRACE_H

#include "weft/Formats/HostArray.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace weft {
namespace rt {
namespace trace {

using Clock = std::chrono::steady_clock;

/// Whether WEFT_TRACE names a directory to write to.
bool enabled();

/// The lane of the calling code: 0 is the step's own thread; each
/// communication thread takes the next one when it starts.
int newLane();

/// One span [begin, end) on `lane`, named `name` (copied), with the bytes
/// it moved (none when negative).
void record(const std::string &name, Clock::time_point begin,
            Clock::time_point end, int lane, int64_t bytes = -1);

/// Writes the spans recorded so far to $WEFT_TRACE/rank<rank>.json; a
/// no-op without WEFT_TRACE.
Status write(int rank);

} // namespace trace
} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_TRACE_H
