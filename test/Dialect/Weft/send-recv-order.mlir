// RUN: weft-opt %s --canonicalize --cse | FileCheck %s

// weft.send and weft.recv have effects on the communication: canonicalize
// and CSE neither drop one whose result is unused nor merge two alike, and
// they stay in program order, so each still meets its partner on the peer.

// CHECK-LABEL: func.func @kept_in_order
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: weft.send %[[X]] {axes = ["pp"], peer = 1 : i64, tag = 0 : i64}
// CHECK-NEXT: %[[A:.*]] = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 1 : i64}
// CHECK-NEXT: %[[B:.*]] = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 1 : i64}
// CHECK-NEXT: weft.recv {axes = ["pp"], peer = 1 : i64, tag = 2 : i64}
// CHECK-NEXT: weft.send %[[X]] {axes = ["pp"], peer = 1 : i64, tag = 0 : i64}
// CHECK-NEXT: %[[S:.*]] = weft.add %[[A]], %[[B]]
// CHECK-NEXT: return %[[S]]
func.func @kept_in_order(%x: tensor<4xf32>) -> tensor<4xf32> {
  weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  %a = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
  %b = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
  %unused = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 2 : i64} : tensor<4xf32>
  weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  %s = weft.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}
