// Data movement and index ops, lowered and executed against weft-eval on
// the same random inputs (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// Collapse, expand, through-1-D, to and from rank 0; i1 and i64 too.
// CHECK: OK @reshape
func.func @reshape(%x: tensor<2x3x4xf32>, %s: tensor<1x1xf32>, %b: tensor<6x2xi1>,
                   %i: tensor<4xi64>)
    -> (tensor<6x4xf32>, tensor<2x3x2x2xf32>, tensor<4x6xf32>, tensor<f32>,
        tensor<1x1x1xf32>, tensor<3x4xi1>, tensor<2x1x2xi64>) {
  %0 = weft.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = weft.reshape %x : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %2 = weft.reshape %x : tensor<2x3x4xf32> -> tensor<4x6xf32>
  %3 = weft.reshape %s : tensor<1x1xf32> -> tensor<f32>
  %4 = weft.reshape %3 : tensor<f32> -> tensor<1x1x1xf32>
  %5 = weft.reshape %b : tensor<6x2xi1> -> tensor<3x4xi1>
  %6 = weft.reshape %i : tensor<4xi64> -> tensor<2x1x2xi64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<6x4xf32>, tensor<2x3x2x2xf32>,
      tensor<4x6xf32>, tensor<f32>, tensor<1x1x1xf32>, tensor<3x4xi1>,
      tensor<2x1x2xi64>
}

// CHECK: OK @broadcast_transpose
func.func @broadcast_transpose(%x: tensor<4x1x3xf32>, %s: tensor<f32>, %b: tensor<3x1xi1>,
                               %y: tensor<2x3x4xf32>)
    -> (tensor<2x4x5x3xf32>, tensor<2x2xf32>, tensor<3x4xi1>, tensor<4x2x3xf32>,
        tensor<3x4x1xf32>) {
  %0 = weft.broadcast %x : tensor<4x1x3xf32> -> tensor<2x4x5x3xf32>
  %1 = weft.broadcast %s : tensor<f32> -> tensor<2x2xf32>
  %2 = weft.broadcast %b : tensor<3x1xi1> -> tensor<3x4xi1>
  %3 = weft.transpose %y {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %4 = weft.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<4x1x3xf32>) -> tensor<3x4x1xf32>
  return %0, %1, %2, %3, %4 : tensor<2x4x5x3xf32>, tensor<2x2xf32>, tensor<3x4xi1>,
      tensor<4x2x3xf32>, tensor<3x4x1xf32>
}

// CHECK: OK @slice_concat
func.func @slice_concat(%x: tensor<5x9xf32>, %a: tensor<2x3xi64>, %b: tensor<2x1xi64>,
                        %c: tensor<2x2xi64>)
    -> (tensor<5x3xf32>, tensor<2x4xf32>, tensor<0x9xf32>, tensor<2x6xi64>,
        tensor<10x9xf32>) {
  %0 = weft.slice %x {starts = array<i64: 0, 1>, limits = array<i64: 5, 9>, strides = array<i64: 1, 3>} : (tensor<5x9xf32>) -> tensor<5x3xf32>
  %1 = weft.slice %x {starts = array<i64: 1, 2>, limits = array<i64: 5, 6>, strides = array<i64: 2, 1>} : (tensor<5x9xf32>) -> tensor<2x4xf32>
  %2 = weft.slice %x {starts = array<i64: 3, 0>, limits = array<i64: 3, 9>, strides = array<i64: 1, 1>} : (tensor<5x9xf32>) -> tensor<0x9xf32>
  %3 = weft.concat %a, %b, %c {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2x1xi64>, tensor<2x2xi64>) -> tensor<2x6xi64>
  %4 = weft.concat %x, %x {axis = 0 : i64} : (tensor<5x9xf32>, tensor<5x9xf32>) -> tensor<10x9xf32>
  return %0, %1, %2, %3, %4 : tensor<5x3xf32>, tensor<2x4xf32>, tensor<0x9xf32>,
      tensor<2x6xi64>, tensor<10x9xf32>
}

// Negative indices count from the end.
// CHECK: OK @gather
func.func @gather(%t: tensor<7x4xf32>, %i: tensor<2x3xi64> {check.range = [-7, 6]},
                  %x: tensor<2x5x3xf32>, %j: tensor<4xi32> {check.range = [-5, 4]},
                  %k: tensor<i64> {check.range = [-3, 2]}, %m: tensor<7x2xi1>)
    -> (tensor<2x3x4xf32>, tensor<2x4x3xf32>, tensor<2x5xf32>, tensor<2x3x2xi1>) {
  %0 = weft.gather %t, %i {axis = 0 : i64} : (tensor<7x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %1 = weft.gather %x, %j {axis = 1 : i64} : (tensor<2x5x3xf32>, tensor<4xi32>) -> tensor<2x4x3xf32>
  %2 = weft.gather %x, %k {axis = 2 : i64} : (tensor<2x5x3xf32>, tensor<i64>) -> tensor<2x5xf32>
  %3 = weft.gather %m, %i {axis = 0 : i64} : (tensor<7x2xi1>, tensor<2x3xi64>) -> tensor<2x3x2xi1>
  return %0, %1, %2, %3 : tensor<2x3x4xf32>, tensor<2x4x3xf32>, tensor<2x5xf32>, tensor<2x3x2xi1>
}

// Repeated and negative indices accumulate into the same rows.
// CHECK: OK @scatter_add
func.func @scatter_add(%t: tensor<5x4xf32>, %i: tensor<2x6xi64> {check.range = [-5, 4]},
                       %u: tensor<2x6x4xf32>, %x: tensor<2x3x4xf32>,
                       %j: tensor<5xi32> {check.range = [-3, 2]}, %v: tensor<2x5x4xf32>,
                       %k: tensor<i64> {check.range = [0, 3]}, %w: tensor<2x3xf32>)
    -> (tensor<5x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %0 = weft.scatter_add %t, %i, %u {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2x6xi64>, tensor<2x6x4xf32>) -> tensor<5x4xf32>
  %1 = weft.scatter_add %x, %j, %v {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
  %2 = weft.scatter_add %x, %k, %w {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<i64>, tensor<2x3xf32>) -> tensor<2x3x4xf32>
  return %0, %1, %2 : tensor<5x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// CHECK: OK @pad
func.func @pad(%x: tensor<3x4xf32>, %e: tensor<0x2xf32>)
    -> (tensor<6x6xf32>, tensor<9x12xf32>, tensor<3x4xf32>, tensor<2x5xf32>) {
  %0 = weft.pad %x {low = array<i64: 1, 0>, high = array<i64: 2, 2>, interior = array<i64: 0, 0>} : (tensor<3x4xf32>) -> tensor<6x6xf32>
  %1 = weft.pad %x {low = array<i64: 0, 1>, high = array<i64: 2, 1>, interior = array<i64: 2, 2>, value = -1.5 : f64} : (tensor<3x4xf32>) -> tensor<9x12xf32>
  %2 = weft.pad %x {low = array<i64: 0, 0>, high = array<i64: 0, 0>, interior = array<i64: 0, 0>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %3 = weft.pad %e {low = array<i64: 1, 1>, high = array<i64: 1, 0>, interior = array<i64: 3, 2>, value = 2.0 : f64} : (tensor<0x2xf32>) -> tensor<2x5xf32>
  return %0, %1, %2, %3 : tensor<6x6xf32>, tensor<9x12xf32>, tensor<3x4xf32>, tensor<2x5xf32>
}

// CHECK: OK @one_hot
func.func @one_hot(%i: tensor<2x3xi64> {check.range = [0, 4]}, %j: tensor<4xi32> {check.range = [0, 2]})
    -> (tensor<2x3x5xf32>, tensor<4x3xf64>) {
  %0 = weft.one_hot %i : tensor<2x3xi64> -> tensor<2x3x5xf32>
  %1 = weft.one_hot %j : tensor<4xi32> -> tensor<4x3xf64>
  return %0, %1 : tensor<2x3x5xf32>, tensor<4x3xf64>
}
