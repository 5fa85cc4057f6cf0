//===- Mailbox.cpp - Messages between ranks evaluated together ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// LocalMailbox: the messages of ranks evaluated in threads of one process,
// under one mutex. Every change (a message sent, a rank returned, the run
// stopped) wakes all waiting receives; each re-checks its own message. With
// a handful of pipeline ranks a single condition variable costs nothing and
// keeps the deadlock check simple: it runs under the same lock that every
// change takes, so it sees a consistent picture of all ranks.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorInternal.h"
#include "weft/Evaluator/Evaluator.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace weft;
using namespace weft::eval;

Mailbox::~Mailbox() = default;

namespace {

std::string seconds(std::chrono::milliseconds d) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%g", static_cast<double>(d.count()) / 1000.0) << " s";
  return s;
}
} // namespace

LocalMailbox::LocalMailbox(int64_t numRanks)
    : ranks(static_cast<size_t>(std::max<int64_t>(numRanks, 0))) {}

std::string LocalMailbox::checkPair(int64_t from, int64_t to) const {
  int64_t n = getNumRanks();
  for (int64_t rank : {from, to})
    if (rank < 0 || rank >= n)
      return "rank " + std::to_string(rank) + " is not one of the " +
             std::to_string(n) + " ranks (0 to " + std::to_string(n - 1) + ")";
  if (from == to)
    return "a rank cannot send to itself";
  return "";
}

LogicalResult LocalMailbox::send(int64_t from, int64_t to, int64_t tag,
                                 Tensor tensor, std::string &error) {
  std::lock_guard<std::mutex> lock(mutex);
  if (std::string why = checkPair(from, to); !why.empty()) {
    error = why;
    return failure();
  }
  // Stopping ends every rank at its next op; the message no longer matters.
  if (isStopped)
    return success();
  if (ranks[to].finished) {
    error = "rank " + std::to_string(to) +
            " has already returned, so no recv will take it (a send without "
            "its recv)";
    return failure();
  }
  messages[{from, to, tag}].push_back(std::move(tensor));
  changed.notify_all();
  return success();
}

bool LocalMailbox::deadlocked() const {
  for (const RankState &rank : ranks) {
    if (rank.finished)
      continue;
    if (!rank.waitingFor)
      return false;
    auto it = messages.find(*rank.waitingFor);
    if (it != messages.end() && !it->second.empty())
      return false;
  }
  return true;
}

std::string LocalMailbox::describeWaits() const {
  std::string s;
  for (auto [index, rank] : llvm::enumerate(ranks)) {
    s += s.empty() ? "" : "; ";
    s += "rank " + std::to_string(index);
    if (rank.finished) {
      s += " has returned";
      continue;
    }
    auto [from, to, tag] = *rank.waitingFor;
    s += " waits for tag " + std::to_string(tag) + " from rank " +
         std::to_string(from);
  }
  return s;
}

Mailbox::RecvStatus LocalMailbox::recv(int64_t to, int64_t from, int64_t tag,
                                       std::chrono::milliseconds timeout,
                                       Tensor &tensor, std::string &error) {
  std::unique_lock<std::mutex> lock(mutex);
  if (std::string why = checkPair(from, to); !why.empty()) {
    error = why;
    return RecvStatus::Failed;
  }
  Key key{from, to, tag};
  auto deadline = std::chrono::steady_clock::now() + timeout;
  RankState &self = ranks[to];
  self.waitingFor = key;
  auto done = [&](RecvStatus status) {
    self.waitingFor.reset();
    return status;
  };
  while (true) {
    if (isStopped)
      return done(RecvStatus::Stopped);
    auto it = messages.find(key);
    if (it != messages.end() && !it->second.empty()) {
      tensor = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty())
        messages.erase(it);
      return done(RecvStatus::Received);
    }
    if (ranks[from].finished) {
      error = "rank " + std::to_string(from) + " returned without sending it";
      return done(RecvStatus::Failed);
    }
    if (deadlocked()) {
      error = "no rank can go on (" + describeWaits() + ")";
      isStopped = true;
      changed.notify_all();
      return done(RecvStatus::Failed);
    }
    if (timeout.count() == 0) {
      changed.wait(lock);
      continue;
    }
    if (changed.wait_until(lock, deadline) == std::cv_status::timeout) {
      // A message may have come with the timeout; the loop takes it.
      auto late = messages.find(key);
      if ((late != messages.end() && !late->second.empty()) || isStopped)
        continue;
      error = "nothing came within " + seconds(timeout) + " while rank " +
              std::to_string(from) +
              " was still running (raise weft-eval --recv-timeout if it is "
              "only slow)";
      return done(RecvStatus::Failed);
    }
  }
}

LogicalResult LocalMailbox::finish(int64_t rank, std::string &error) {
  std::lock_guard<std::mutex> lock(mutex);
  if (rank < 0 || rank >= getNumRanks()) {
    error = "is not one of the " + std::to_string(getNumRanks()) + " ranks";
    return failure();
  }
  ranks[rank].finished = true;
  changed.notify_all();
  std::string unread;
  size_t count = 0;
  for (auto &[key, queue] : messages) {
    auto [from, to, tag] = key;
    if (to != rank)
      continue;
    for (const Tensor &t : queue) {
      unread += unread.empty() ? "" : ", ";
      unread += "tag " + std::to_string(tag) + " from rank " +
                std::to_string(from) + " (" + detail::describeValue(t) + ")";
      ++count;
    }
  }
  if (count == 0)
    return success();
  error = "returned with " + std::to_string(count) + " unread message" +
          (count == 1 ? "" : "s") + ": " + unread +
          " (a send without its recv)";
  return failure();
}

void LocalMailbox::stop() {
  std::lock_guard<std::mutex> lock(mutex);
  isStopped = true;
  changed.notify_all();
}
