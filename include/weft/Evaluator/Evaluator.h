//===- Evaluator.h - Reference evaluator for the weft dialect ---*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The oracle every later stage is checked against: a direct, unoptimized
// interpreter of weft ops. Floats are computed in double and each op's
// result is rounded to its element type (f32, bf16, f16; f64 stays exact),
// so the evaluator has the element type's semantics with float64
// accumulation inside every op.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_EVALUATOR_EVALUATOR_H
#define WEFT_EVALUATOR_EVALUATOR_H

#include "weft/Formats/HostArray.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace weft {
namespace eval {

/// A value during evaluation. Float element types keep their elements in
/// `fp` (already rounded to the element type); integer and i1 element types
/// keep them in `ints`, so 64-bit indices are exact.
struct Tensor {
  mlir::Type elementType;
  llvm::SmallVector<int64_t> shape;
  std::vector<double> fp;
  std::vector<int64_t> ints;

  bool isFloat() const { return mlir::isa<mlir::FloatType>(elementType); }
  int64_t numElements() const;
  mlir::RankedTensorType getType() const;

  /// Zero-filled tensor of `type`.
  static Tensor zeros(mlir::RankedTensorType type);
  /// Decodes a constant (dense or dense resource elements). The attribute
  /// must be decodable (see tryFromAttr); anything else is a fatal error.
  static Tensor fromAttr(mlir::ElementsAttr attr);
  /// Decodes a constant, or explains in `error` why it cannot (a dense
  /// resource whose blob was elided, a dynamic shape, an unsupported element
  /// type). A probe, not a diagnostic: folders ask it of every constant and
  /// most callers only want to know whether it can; the few that report
  /// put the explanation into their own diagnostic.
  static mlir::FailureOr<Tensor> tryFromAttr(mlir::ElementsAttr attr,
                                             std::string &error);
  /// Encodes as a DenseElementsAttr of getType().
  mlir::DenseElementsAttr toAttr() const;
  /// Converts a host array to `type`: the shape must match exactly; the
  /// element type may differ only by a lossless-enough conversion (any float
  /// to any float, any integer to any integer). Errors, at `loc`, name
  /// `what`.
  static mlir::FailureOr<Tensor> fromHostArray(const rt::HostArray &array,
                                               mlir::RankedTensorType type,
                                               llvm::StringRef what,
                                               mlir::Location loc);
  /// Converts to a host array of the same element type (f64 stays f64).
  rt::HostArray toHostArray() const;
};

/// Rounds `v` to the nearest value of `type`, ties to even, straight from
/// the double (no double rounding through f32), and widens it back. Values
/// beyond the largest finite value become infinities; NaN stays NaN.
double roundToFloat(mlir::FloatType type, double v);

/// Wraps `v` to the two's-complement range of `type` (i32 results wrap like
/// int32_t arithmetic); i1 keeps the low bit, so it is 0 or 1.
int64_t wrapToInteger(mlir::IntegerType type, int64_t v);

/// Evaluates a single weft op on operand values. On failure (an op the
/// evaluator does not know, an index out of range at run time) emits an
/// error on `op` and returns failure.
mlir::FailureOr<llvm::SmallVector<Tensor>>
evaluateOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands);

/// How deeply `func.call`s may nest: deeper is reported as an error (most
/// likely a recursive program) instead of growing without bound.
constexpr unsigned kMaxCallDepth = 256;

/// Evaluates `fn` (a single-block func.func of weft ops ending in
/// func.return) on `args`, which must match the function's argument types.
/// `func.call`s to functions of the same module are evaluated too, on an
/// explicit frame stack rather than by native recursion. A function that
/// communicates (weft.send, weft.recv) needs the overload with a
/// RankContext; here it is an error.
mlir::FailureOr<llvm::SmallVector<Tensor>>
evaluateFunction(mlir::func::FuncOp fn, llvm::ArrayRef<Tensor> args);

//===----------------------------------------------------------------------===//
// Several ranks: weft.send and weft.recv
//===----------------------------------------------------------------------===//

/// Where weft.send leaves tensors and weft.recv takes them when the
/// functions of several ranks (one per pipeline stage) are evaluated
/// together. Ranks are numbered 0 .. N-1. A message is keyed by (sender,
/// receiver, tag); messages with the same key are taken in the order they
/// were sent. Implementations are called from one thread per rank at once.
class Mailbox {
public:
  virtual ~Mailbox();

  /// Leaves `tensor` for rank `to` and returns at once (sends are buffered).
  /// Fails, explaining why in `error`, when no rank could ever read it:
  /// `to` is not a rank, is the sender itself, or has already returned.
  virtual mlir::LogicalResult send(int64_t from, int64_t to, int64_t tag,
                                   Tensor tensor, std::string &error) = 0;

  enum class RecvStatus {
    /// `tensor` holds the message.
    Received,
    /// It can never come, or did not within the timeout; `error` says which.
    Failed,
    /// The run was stopped (another rank failed); nothing to report here.
    Stopped,
  };
  /// Takes the oldest message from `from` to `to` with `tag`, waiting up to
  /// `timeout` for it to be sent (zero: no limit).
  virtual RecvStatus recv(int64_t to, int64_t from, int64_t tag,
                          std::chrono::milliseconds timeout, Tensor &tensor,
                          std::string &error) = 0;

  /// Rank `rank` has returned. Fails when messages addressed to it were
  /// never received (a schedule that sends what no recv takes).
  virtual mlir::LogicalResult finish(int64_t rank, std::string &error) = 0;

  /// Whether the run has been stopped; evaluation stops at its next op.
  virtual bool stopped() const = 0;
};

/// The mailbox of ranks evaluated in threads of one process. Besides
/// waiting, it notices when a recv can never be served, so a wrong schedule
/// fails at once with what every rank waits for instead of at the timeout:
/// the sender has returned without sending it, or every rank that has not
/// returned is waiting for a message that is not there (a deadlock; sends
/// never wait, so only receives can).
class LocalMailbox final : public Mailbox {
public:
  explicit LocalMailbox(int64_t numRanks);

  mlir::LogicalResult send(int64_t from, int64_t to, int64_t tag, Tensor tensor,
                           std::string &error) override;
  RecvStatus recv(int64_t to, int64_t from, int64_t tag,
                  std::chrono::milliseconds timeout, Tensor &tensor,
                  std::string &error) override;
  mlir::LogicalResult finish(int64_t rank, std::string &error) override;
  bool stopped() const override { return isStopped.load(); }

  /// Stops the run: waiting receives return RecvStatus::Stopped and
  /// evaluation on every rank stops at its next op. What a driver calls
  /// when one rank fails, so the others do not wait for it.
  void stop();

  int64_t getNumRanks() const { return static_cast<int64_t>(ranks.size()); }

private:
  using Key = std::tuple<int64_t, int64_t, int64_t>; // from, to, tag
  struct RankState {
    bool finished = false;
    /// The message this rank's recv waits for, if it is waiting.
    std::optional<Key> waitingFor;
  };

  /// Why `from` -> `to` is no channel, or "" when it is one.
  std::string checkPair(int64_t from, int64_t to) const;
  /// Whether no rank can make progress: each has returned or waits for a
  /// message that is not there. Called with `mutex` held.
  bool deadlocked() const;
  /// What each rank is doing, for the deadlock error.
  std::string describeWaits() const;

  std::mutex mutex;
  std::condition_variable changed;
  /// std::map: unread messages are reported in key order, deterministically.
  std::map<Key, std::deque<Tensor>> messages;
  std::vector<RankState> ranks;
  std::atomic<bool> isStopped{false};
};

/// Who is evaluating: this rank's number and the mailbox it shares with the
/// other ranks.
struct RankContext {
  int64_t rank = 0;
  Mailbox *mailbox = nullptr;
  /// How long a weft.recv waits for its message before failing (zero: no
  /// limit). LocalMailbox reports deadlocks at once, so this only ends
  /// waits on a sender that is still computing.
  std::chrono::milliseconds recvTimeout = std::chrono::seconds(60);
};

/// Evaluates `fn` as rank `ctx.rank` of a run in which each rank evaluates
/// its own function: weft.send and weft.recv (on one mesh axis whose
/// coordinate is the rank: a module without a mesh, or one whose other axes
/// have size 1) pass tensors through `ctx.mailbox`. When `fn` returns, the
/// rank is finished in the mailbox, which fails if messages to it are
/// unread. Every failure is reported as a diagnostic naming the rank, except
/// one: when the mailbox has been stopped (another rank failed), evaluation
/// returns failure at its next op or wait without reporting anything.
mlir::FailureOr<llvm::SmallVector<Tensor>>
evaluateFunction(mlir::func::FuncOp fn, llvm::ArrayRef<Tensor> args,
                 const RankContext &ctx);

} // namespace eval
} // namespace weft

#endif // WEFT_EVALUATOR_EVALUATOR_H
