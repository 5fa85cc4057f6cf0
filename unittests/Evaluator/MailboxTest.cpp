//===- MailboxTest.cpp - Messages between ranks evaluated together --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// LocalMailbox on its own (tag matching, order, every way a recv can never
// be served) and evaluateFunction with a RankContext on rank functions run
// in threads, as weft-eval --ranks runs them.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorTestFixture.h"

#include <thread>

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::test;
using namespace std::chrono_literals;

namespace {

using Status = Mailbox::RecvStatus;

class EvaluatorMailboxTest : public EvaluatorTest {
protected:
  /// A 1-element f32 tensor holding `v`, to tell messages apart.
  Tensor value(double v) { return f32({1}, {v}); }

  /// Receives from `from` to `to` with `tag`, expecting a message.
  double take(LocalMailbox &box, int64_t to, int64_t from, int64_t tag) {
    Tensor t;
    std::string error;
    EXPECT_EQ(box.recv(to, from, tag, 1s, t, error), Status::Received) << error;
    return t.fp.empty() ? -1 : t.fp[0];
  }
};

TEST_F(EvaluatorMailboxTest, TagsMatchOutOfOrderAndOneTagIsFirstInFirstOut) {
  LocalMailbox box(2);
  std::string error;
  ASSERT_TRUE(succeeded(box.send(0, 1, 7, value(1), error)));
  ASSERT_TRUE(succeeded(box.send(0, 1, 3, value(2), error)));
  ASSERT_TRUE(succeeded(box.send(0, 1, 7, value(3), error)));
  // The same tag in the other direction is another channel.
  ASSERT_TRUE(succeeded(box.send(1, 0, 7, value(4), error)));
  EXPECT_EQ(take(box, 1, 0, 3), 2);
  EXPECT_EQ(take(box, 1, 0, 7), 1);
  EXPECT_EQ(take(box, 1, 0, 7), 3);
  EXPECT_EQ(take(box, 0, 1, 7), 4);
  EXPECT_TRUE(succeeded(box.finish(0, error))) << error;
  EXPECT_TRUE(succeeded(box.finish(1, error))) << error;
}

TEST_F(EvaluatorMailboxTest, RecvWaitsForASendFromAnotherThread) {
  LocalMailbox box(2);
  std::thread sender([&] {
    std::this_thread::sleep_for(20ms);
    std::string error;
    EXPECT_TRUE(succeeded(box.send(0, 1, 5, value(42), error))) << error;
  });
  EXPECT_EQ(take(box, 1, 0, 5), 42);
  sender.join();
}

TEST_F(EvaluatorMailboxTest, TimeoutNamesTheWaitWhileTheSenderRuns) {
  LocalMailbox box(2);
  Tensor t;
  std::string error;
  // Rank 0 neither waits nor has returned: it may still send, so only the
  // timeout ends the wait.
  EXPECT_EQ(box.recv(1, 0, 9, 50ms, t, error), Status::Failed);
  EXPECT_EQ(error, "nothing came within 0.05 s while rank 0 was still "
                   "running (raise weft-eval --recv-timeout if it is only "
                   "slow)");
  EXPECT_FALSE(box.stopped());
}

TEST_F(EvaluatorMailboxTest, RecvFromARankThatReturnedFailsAtOnce) {
  LocalMailbox box(3);
  std::string error;
  ASSERT_TRUE(succeeded(box.finish(0, error)));
  Tensor t;
  // No timeout at all: only the check on the sender ends the wait.
  EXPECT_EQ(box.recv(1, 0, 4, 0ms, t, error), Status::Failed);
  EXPECT_EQ(error, "rank 0 returned without sending it");
}

TEST_F(EvaluatorMailboxTest, ReturningWakesAWaitingRecv) {
  LocalMailbox box(3);
  std::thread finisher([&] {
    std::this_thread::sleep_for(20ms);
    std::string error;
    EXPECT_TRUE(succeeded(box.finish(0, error)));
  });
  Tensor t;
  std::string error;
  EXPECT_EQ(box.recv(1, 0, 4, 0ms, t, error), Status::Failed);
  EXPECT_EQ(error, "rank 0 returned without sending it");
  finisher.join();
}

TEST_F(EvaluatorMailboxTest, SendToARankThatReturnedFails) {
  LocalMailbox box(2);
  std::string error;
  ASSERT_TRUE(succeeded(box.finish(1, error)));
  EXPECT_TRUE(failed(box.send(0, 1, 2, value(1), error)));
  EXPECT_EQ(error, "rank 1 has already returned, so no recv will take it (a "
                   "send without its recv)");
}

TEST_F(EvaluatorMailboxTest, ReturningWithUnreadMessagesFails) {
  LocalMailbox box(3);
  std::string error;
  ASSERT_TRUE(succeeded(box.send(0, 2, 8, value(1), error)));
  ASSERT_TRUE(succeeded(box.send(1, 2, 3, f32({2, 2}, {1, 2, 3, 4}), error)));
  ASSERT_TRUE(succeeded(box.send(2, 0, 1, value(1), error)));
  EXPECT_TRUE(failed(box.finish(2, error)));
  EXPECT_EQ(error, "returned with 2 unread messages: tag 8 from rank 0 "
                   "(tensor<1xf32>), tag 3 from rank 1 (tensor<2x2xf32>) (a "
                   "send without its recv)");
  // Messages from the rank are its peers' to read.
  EXPECT_TRUE(succeeded(box.finish(1, error))) << error;
}

TEST_F(EvaluatorMailboxTest, ReceivesWaitingOnEachOtherAreADeadlock) {
  LocalMailbox box(3);
  std::string error0, error1;
  Status status0, status1;
  std::string finishError;
  ASSERT_TRUE(succeeded(box.finish(2, finishError)));
  std::thread rank0([&] {
    Tensor t;
    status0 = box.recv(0, 1, 1, 10s, t, error0);
  });
  std::thread rank1([&] {
    Tensor t;
    status1 = box.recv(1, 0, 0, 10s, t, error1);
  });
  rank0.join();
  rank1.join();
  // Whichever waited last sees the deadlock; the other is stopped.
  std::string expected = "no rank can go on (rank 0 waits for tag 1 from "
                         "rank 1; rank 1 waits for tag 0 from rank 0; rank 2 "
                         "has returned)";
  if (status0 == Status::Failed) {
    EXPECT_EQ(error0, expected);
    EXPECT_EQ(status1, Status::Stopped);
  } else {
    EXPECT_EQ(status0, Status::Stopped);
    EXPECT_EQ(status1, Status::Failed);
    EXPECT_EQ(error1, expected);
  }
  EXPECT_TRUE(box.stopped());
}

TEST_F(EvaluatorMailboxTest, StopEndsAWait) {
  LocalMailbox box(2);
  std::thread stopper([&] {
    std::this_thread::sleep_for(20ms);
    box.stop();
  });
  Tensor t;
  std::string error;
  EXPECT_EQ(box.recv(0, 1, 0, 10s, t, error), Status::Stopped);
  EXPECT_TRUE(error.empty());
  stopper.join();
}

TEST_F(EvaluatorMailboxTest, RanksOutsideTheRunAreRefused) {
  LocalMailbox box(2);
  std::string error;
  EXPECT_TRUE(failed(box.send(0, 2, 0, value(1), error)));
  EXPECT_EQ(error, "rank 2 is not one of the 2 ranks (0 to 1)");
  EXPECT_TRUE(failed(box.send(1, 1, 0, value(1), error)));
  EXPECT_EQ(error, "a rank cannot send to itself");
  Tensor t;
  EXPECT_EQ(box.recv(0, -1, 0, 1s, t, error), Status::Failed);
  EXPECT_EQ(error, "rank -1 is not one of the 2 ranks (0 to 1)");
}

//===----------------------------------------------------------------------===//
// evaluateFunction with a RankContext
//===----------------------------------------------------------------------===//

constexpr StringLiteral kPipeline = R"mlir(
  module attributes {weft.mesh = #weft.mesh<pp = 2>} {
    func.func @rank0(%x: tensor<2xf32>) -> tensor<2xf32> {
      weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 0 : i64} : tensor<2xf32>
      %y = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 1 : i64} : tensor<2xf32>
      %z = weft.add %x, %y : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %z : tensor<2xf32>
    }
    func.func @stage(%h: tensor<2xf32>) -> tensor<2xf32> {
      %m = weft.mul %h, %h : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      weft.send %m {axes = ["pp"], peer = 0 : i64, tag = 1 : i64} : tensor<2xf32>
      return %m : tensor<2xf32>
    }
    func.func @rank1() -> tensor<2xf32> {
      %h = weft.recv {axes = ["pp"], peer = 0 : i64, tag = 0 : i64} : tensor<2xf32>
      %m = call @stage(%h) : (tensor<2xf32>) -> tensor<2xf32>
      return %m : tensor<2xf32>
    }
  }
)mlir";

TEST_F(EvaluatorMailboxTest, RanksInThreadsExchangeTensorsThroughCalls) {
  // Parse through the fixture (which evaluates @rank0 alone: an error, as
  // it communicates) and run both ranks together.
  ASSERT_TRUE(failed(run(kPipeline, {f32({2}, {1, 2})}, "rank0")));
  EXPECT_NE(diagnostics.find("'weft.send' passes a tensor between ranks: "
                             "@rank0 is one rank's part of the step"),
            std::string::npos)
      << diagnostics;
  auto rank0 = module->lookupSymbol<func::FuncOp>("rank0");
  auto rank1 = module->lookupSymbol<func::FuncOp>("rank1");
  LocalMailbox box(2);
  FailureOr<SmallVector<Tensor>> r0 = failure(), r1 = failure();
  std::thread t0([&] {
    r0 = evaluateFunction(rank0, {f32({2}, {1, 2})}, RankContext{0, &box});
  });
  std::thread t1([&] {
    r1 = evaluateFunction(rank1, {}, RankContext{1, &box});
  });
  t0.join();
  t1.join();
  ASSERT_TRUE(succeeded(r0) && succeeded(r1));
  expectValues(r0->front(), {2}, {2, 6});
  expectValues(r1->front(), {2}, {1, 4});
}

TEST_F(EvaluatorMailboxTest, TypeMismatchNamesBothTypes) {
  constexpr StringLiteral ir = R"mlir(
    func.func @f() -> tensor<3xf32> {
      %h = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 6 : i64} : tensor<3xf32>
      return %h : tensor<3xf32>
    }
  )mlir";
  ASSERT_TRUE(failed(run(ir, {})));
  LocalMailbox box(2);
  std::string error;
  ASSERT_TRUE(succeeded(box.send(1, 0, 6, f32({2}, {1, 2}), error)));
  diagnostics.clear();
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return success();
  });
  auto f = module->lookupSymbol<func::FuncOp>("f");
  EXPECT_TRUE(failed(evaluateFunction(f, {}, RankContext{0, &box})));
  EXPECT_EQ(diagnostics, "rank 0: weft.recv of tensor<3xf32> from rank 1 with "
                         "tag 6: rank 1 sent tensor<2xf32>; the two ranks "
                         "disagree on the message's type\n");
}

TEST_F(EvaluatorMailboxTest, AStoppedRunEndsWithoutADiagnostic) {
  constexpr StringLiteral ir = R"mlir(
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = weft.neg %x : tensor<2xf32>
      return %y : tensor<2xf32>
    }
  )mlir";
  ASSERT_TRUE(succeeded(run(ir, {f32({2}, {1, 2})})));
  LocalMailbox box(1);
  box.stop();
  diagnostics.clear();
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return success();
  });
  auto f = module->lookupSymbol<func::FuncOp>("f");
  EXPECT_TRUE(
      failed(evaluateFunction(f, {f32({2}, {1, 2})}, RankContext{0, &box})));
  EXPECT_EQ(diagnostics, "");
}

} // namespace
