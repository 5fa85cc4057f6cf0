// Rounding, cumsum, arg_max/arg_min and top_k, lowered and executed against
// weft-eval on the same random inputs (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// Inputs span several integers and halves, so every rounding direction and
// round's ties-to-even cases (x.5 after scaling by 2) are exercised.
// CHECK: OK @rounding
func.func @rounding(%x: tensor<4x6xf32> {check.range = [-4.0, 4.0]})
    -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) {
  %0 = weft.floor %x : tensor<4x6xf32>
  %1 = weft.ceil %x : tensor<4x6xf32>
  %2 = weft.round %x : tensor<4x6xf32>
  %half = weft.constant dense<0.5> : tensor<f32>
  %ties = weft.add %0, %half : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  %3 = weft.round %ties : tensor<4x6xf32>
  return %0, %1, %2, %3 : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>
}

// CHECK: OK @cumsum
func.func @cumsum(%x: tensor<3x5x4xf32>, %i: tensor<3x5xi64>)
    -> (tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5xi64>) {
  %0 = weft.cumsum %x {axis = 1 : i64} : tensor<3x5x4xf32>
  %1 = weft.cumsum %x {axis = 0 : i64, exclusive = true} : tensor<3x5x4xf32>
  %2 = weft.cumsum %x {axis = 2 : i64, reverse = true} : tensor<3x5x4xf32>
  %3 = weft.cumsum %x {axis = 1 : i64, exclusive = true, reverse = true} : tensor<3x5x4xf32>
  %4 = weft.cumsum %i {axis = 1 : i64} : tensor<3x5xi64>
  return %0, %1, %2, %3, %4 : tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5xi64>
}

// Integer inputs in [-5, 5] have ties: the first (or last) index wins.
// CHECK: OK @arg_reduce
func.func @arg_reduce(%x: tensor<3x7xf32>, %i: tensor<4x6xi64>)
    -> (tensor<3xi64>, tensor<1x7xi64>, tensor<4x1xi64>, tensor<6xi64>, tensor<4xi64>) {
  %0 = weft.arg_max %x {axis = 1 : i64} : (tensor<3x7xf32>) -> tensor<3xi64>
  %1 = weft.arg_min %x {axis = 0 : i64, keep_dims = true} : (tensor<3x7xf32>) -> tensor<1x7xi64>
  %2 = weft.arg_max %i {axis = 1 : i64, keep_dims = true} : (tensor<4x6xi64>) -> tensor<4x1xi64>
  %3 = weft.arg_min %i {axis = 0 : i64, select_last_index = true} : (tensor<4x6xi64>) -> tensor<6xi64>
  %4 = weft.arg_max %i {axis = 1 : i64, select_last_index = true} : (tensor<4x6xi64>) -> tensor<4xi64>
  return %0, %1, %2, %3, %4 : tensor<3xi64>, tensor<1x7xi64>, tensor<4x1xi64>, tensor<6xi64>, tensor<4xi64>
}

// Rounded inputs repeat values, so equal values must keep index order.
// CHECK: OK @top_k
func.func @top_k(%x: tensor<3x8xf32>, %y: tensor<5x3x2xf32> {check.range = [-3.0, 3.0]})
    -> (tensor<3x3xf32>, tensor<3x3xi64>, tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<5x3x2xi64>) {
  %0 = weft.top_k %x {axis = 1 : i64, k = 3 : i64} : (tensor<3x8xf32>) -> tensor<3x3xf32>
  %1 = weft.top_k_indices %x {axis = 1 : i64, k = 3 : i64} : (tensor<3x8xf32>) -> tensor<3x3xi64>
  %r = weft.round %y : tensor<5x3x2xf32>
  %2 = weft.top_k %r {axis = 0 : i64, k = 2 : i64, largest = false} : (tensor<5x3x2xf32>) -> tensor<2x3x2xf32>
  %3 = weft.top_k_indices %r {axis = 0 : i64, k = 2 : i64, largest = false} : (tensor<5x3x2xf32>) -> tensor<2x3x2xi64>
  %4 = weft.top_k_indices %r {axis = 0 : i64, k = 5 : i64} : (tensor<5x3x2xf32>) -> tensor<5x3x2xi64>
  return %0, %1, %2, %3, %4 : tensor<3x3xf32>, tensor<3x3xi64>, tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<5x3x2xi64>
}
