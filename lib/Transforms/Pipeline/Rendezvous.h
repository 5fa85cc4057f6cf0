//===- Rendezvous.h - Running a schedule with blocking messages -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// One executor serves both the verifier (does every rank finish?) and the
// simulator (when does each action run?), so the schedule the verifier
// accepts is the one whose times are reported. Costs are checked in one
// place for the simulator and the builder.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_TRANSFORMS_PIPELINE_RENDEZVOUS_H
#define WEFT_LIB_TRANSFORMS_PIPELINE_RENDEZVOUS_H

#include "weft/Transforms/Pipeline/Schedule.h"

namespace weft {
namespace pipeline {

/// Runs every rank's program in order: a computation as soon as the rank
/// reaches it, a send together with its receive once both ranks have
/// reached them, both then held for `costs.transferLatency`. Fills `spans`
/// like SimResult::spans. A deadlock is an error naming the ranks that wait
/// on each other and what each waits to do.
///
/// Expects a schedule whose channels pair up (verifySchedule's checks
/// before its deadlock check): a send meeting a receive from the same peer
/// is then always its own message.
Status runRendezvous(const Schedule &schedule, const Costs &costs,
                     std::vector<std::vector<SimResult::Span>> &spans);

/// Checks that `costs` has one finite, non-negative entry per model stage
/// in each list and a finite, non-negative latency.
Status checkCosts(int numModelStages, const Costs &costs);

} // namespace pipeline
} // namespace weft

#endif // WEFT_LIB_TRANSFORMS_PIPELINE_RENDEZVOUS_H
