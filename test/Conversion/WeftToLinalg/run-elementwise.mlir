// Every elementwise op, lowered and executed, against weft-eval on the same
// random inputs (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @arith_f32
func.func @arith_f32(%a: tensor<4x1x5xf32>, %b: tensor<3x1xf32>, %s: tensor<f32>)
    -> (tensor<4x3x5xf32>, tensor<4x3x5xf32>, tensor<4x3x5xf32>, tensor<4x3x5xf32>,
        tensor<4x3x5xf32>, tensor<4x3x5xf32>, tensor<4x1x5xf32>) {
  %0 = weft.add %a, %b : (tensor<4x1x5xf32>, tensor<3x1xf32>) -> tensor<4x3x5xf32>
  %1 = weft.sub %b, %a : (tensor<3x1xf32>, tensor<4x1x5xf32>) -> tensor<4x3x5xf32>
  %2 = weft.mul %a, %b : (tensor<4x1x5xf32>, tensor<3x1xf32>) -> tensor<4x3x5xf32>
  %3 = weft.div %a, %b : (tensor<4x1x5xf32>, tensor<3x1xf32>) -> tensor<4x3x5xf32>
  %4 = weft.max %a, %b : (tensor<4x1x5xf32>, tensor<3x1xf32>) -> tensor<4x3x5xf32>
  %5 = weft.min %a, %b : (tensor<4x1x5xf32>, tensor<3x1xf32>) -> tensor<4x3x5xf32>
  %6 = weft.mul %a, %s : (tensor<4x1x5xf32>, tensor<f32>) -> tensor<4x1x5xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x3x5xf32>, tensor<4x3x5xf32>,
      tensor<4x3x5xf32>, tensor<4x3x5xf32>, tensor<4x3x5xf32>, tensor<4x3x5xf32>,
      tensor<4x1x5xf32>
}

// CHECK: OK @pow_f32
func.func @pow_f32(%a: tensor<3x4xf32> {check.range = [0.1, 3.0]}, %b: tensor<4xf32>)
    -> tensor<3x4xf32> {
  %0 = weft.pow %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// Integer division truncates toward zero; the divisor range has both signs.
// CHECK: OK @arith_i64
func.func @arith_i64(%a: tensor<4x6xi64> {check.range = [-20, 20]},
                     %b: tensor<6xi64> {check.range = [1, 7]},
                     %c: tensor<4x6xi64> {check.range = [-7, -1]})
    -> (tensor<4x6xi64>, tensor<4x6xi64>, tensor<4x6xi64>, tensor<4x6xi64>,
        tensor<4x6xi64>, tensor<4x6xi64>, tensor<4x6xi64>) {
  %0 = weft.add %a, %b : (tensor<4x6xi64>, tensor<6xi64>) -> tensor<4x6xi64>
  %1 = weft.sub %a, %b : (tensor<4x6xi64>, tensor<6xi64>) -> tensor<4x6xi64>
  %2 = weft.mul %a, %b : (tensor<4x6xi64>, tensor<6xi64>) -> tensor<4x6xi64>
  %3 = weft.div %a, %b : (tensor<4x6xi64>, tensor<6xi64>) -> tensor<4x6xi64>
  %4 = weft.div %a, %c : (tensor<4x6xi64>, tensor<4x6xi64>) -> tensor<4x6xi64>
  %5 = weft.max %a, %b : (tensor<4x6xi64>, tensor<6xi64>) -> tensor<4x6xi64>
  %6 = weft.min %a, %b : (tensor<4x6xi64>, tensor<6xi64>) -> tensor<4x6xi64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x6xi64>, tensor<4x6xi64>,
      tensor<4x6xi64>, tensor<4x6xi64>, tensor<4x6xi64>, tensor<4x6xi64>,
      tensor<4x6xi64>
}

// i32 wraps at 32 bits; INT32_MIN / -1 wraps to INT32_MIN.
// CHECK: OK @arith_i32
func.func @arith_i32(%a: tensor<8xi32> {check.range = [-9, 9]},
                     %b: tensor<8xi32> {check.range = [1, 3]}) -> (tensor<8xi32>,
    tensor<8xi32>, tensor<8xi32>, tensor<2xi32>) {
  %big = weft.constant dense<[2147483647, -2147483648]> : tensor<2xi32>
  %m1 = weft.constant dense<-1> : tensor<i32>
  %0 = weft.div %a, %b : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
  %1 = weft.neg %a : tensor<8xi32>
  %2 = weft.abs %a : tensor<8xi32>
  %3 = weft.div %big, %m1 : (tensor<2xi32>, tensor<i32>) -> tensor<2xi32>
  return %0, %1, %2, %3 : tensor<8xi32>, tensor<8xi32>, tensor<8xi32>, tensor<2xi32>
}

// CHECK: OK @cmp_where
func.func @cmp_where(%a: tensor<3x4xf32>, %b: tensor<4xf32>,
                     %i: tensor<3x4xi64> {check.range = [-2, 2]},
                     %j: tensor<3x1xi64> {check.range = [-2, 2]})
    -> (tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>,
        tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>,
        tensor<3x4xf32>, tensor<3x4xi64>) {
  %0 = weft.cmp eq, %a, %a : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
  %1 = weft.cmp ne, %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  %2 = weft.cmp lt, %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  %3 = weft.cmp le, %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  %4 = weft.cmp gt, %i, %j : (tensor<3x4xi64>, tensor<3x1xi64>) -> tensor<3x4xi1>
  %5 = weft.cmp ge, %i, %j : (tensor<3x4xi64>, tensor<3x1xi64>) -> tensor<3x4xi1>
  %6 = weft.cmp eq, %i, %j : (tensor<3x4xi64>, tensor<3x1xi64>) -> tensor<3x4xi1>
  %7 = weft.cmp ne, %i, %j : (tensor<3x4xi64>, tensor<3x1xi64>) -> tensor<3x4xi1>
  %8 = weft.where %2, %a, %b : (tensor<3x4xi1>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %9 = weft.where %4, %i, %j : (tensor<3x4xi1>, tensor<3x4xi64>, tensor<3x1xi64>) -> tensor<3x4xi64>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<3x4xi1>, tensor<3x4xi1>,
      tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>,
      tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xf32>, tensor<3x4xi64>
}

// NaN compares unequal to itself and is false for every ordered predicate;
// max/min propagate it, relu lets it through.
// CHECK: OK @nan
func.func @nan() -> (tensor<3xi1>, tensor<3xi1>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %x = weft.constant dense<[0x7FC00000, 1.0, -2.0]> : tensor<3xf32>
  %y = weft.constant dense<[1.0, 0x7FC00000, -3.0]> : tensor<3xf32>
  %0 = weft.cmp ne, %x, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %1 = weft.cmp ge, %x, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %2 = weft.max %x, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %3 = weft.min %x, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %4 = weft.relu %x : tensor<3xf32>
  return %0, %1, %2, %3, %4 : tensor<3xi1>, tensor<3xi1>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// CHECK: OK @unary
func.func @unary(%a: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>,
    tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
    tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
    tensor<4x8xf32>) {
  %0 = weft.neg %a : tensor<4x8xf32>
  %1 = weft.abs %a : tensor<4x8xf32>
  %2 = weft.relu %a : tensor<4x8xf32>
  %3 = weft.tanh %a : tensor<4x8xf32>
  %4 = weft.sigmoid %a : tensor<4x8xf32>
  %5 = weft.exp %a : tensor<4x8xf32>
  %6 = weft.erf %a : tensor<4x8xf32>
  %7 = weft.cos %a : tensor<4x8xf32>
  %8 = weft.sin %a : tensor<4x8xf32>
  %9 = weft.gelu %a : tensor<4x8xf32>
  %10 = weft.gelu %a approximate = tanh : tensor<4x8xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : tensor<4x8xf32>,
      tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
      tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
      tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK: OK @unary_positive
func.func @unary_positive(%a: tensor<4x8xf32> {check.range = [0.01, 10.0]})
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = weft.log %a : tensor<4x8xf32>
  %1 = weft.sqrt %a : tensor<4x8xf32>
  %2 = weft.rsqrt %a : tensor<4x8xf32>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// f64 computes in f64 (libm's erf/tanh, not the f32 ones).
// CHECK: OK @unary_f64
func.func @unary_f64(%a: tensor<6xf64>, %b: tensor<6xf64>) -> (tensor<6xf64>,
    tensor<6xf64>, tensor<6xf64>, tensor<6xf64>) {
  %0 = weft.erf %a : tensor<6xf64>
  %1 = weft.gelu %a approximate = tanh : tensor<6xf64>
  %2 = weft.div %a, %b : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
  %3 = weft.sigmoid %a : tensor<6xf64>
  return %0, %1, %2, %3 : tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>
}

// CHECK: OK @causal_mask
func.func @causal_mask(%a: tensor<2x4x5xf32>) -> (tensor<2x4x5xf32>, tensor<2x4x5xf32>) {
  %0 = weft.causal_mask %a : tensor<2x4x5xf32>
  %1 = weft.causal_mask %a {diagonal = -1 : i64, fill = -1.0e4 : f64} : tensor<2x4x5xf32>
  return %0, %1 : tensor<2x4x5xf32>, tensor<2x4x5xf32>
}

// The mask is a hash of the seed, the op id and the index: the lowered code
// and the evaluator drop the same elements.
// CHECK: OK @dropout
func.func @dropout(%a: tensor<3x7x5xf32>, %seed: tensor<i64>) -> (tensor<3x7x5xf32>, tensor<3x7x5xf32>) {
  %0 = weft.dropout %a, %seed {ratio = 3.000000e-01 : f64, op_id = 7 : i64} : tensor<3x7x5xf32>, tensor<i64>
  %1 = weft.dropout %a, %seed {ratio = 9.000000e-01 : f64, op_id = -5 : i64} : tensor<3x7x5xf32>, tensor<i64>
  return %0, %1 : tensor<3x7x5xf32>, tensor<3x7x5xf32>
}

// A rank's block of rows counts its elements from index_offset.
// CHECK: OK @dropout_offset
func.func @dropout_offset(%a: tensor<3x7x5xf32>, %seed: tensor<i64>) -> tensor<3x7x5xf32> {
  %off = weft.constant dense<35> : tensor<i64>
  %0 = weft.dropout %a, %seed offset(%off : tensor<i64>) {ratio = 3.000000e-01 : f64, op_id = 7 : i64} : tensor<3x7x5xf32>, tensor<i64>
  return %0 : tensor<3x7x5xf32>
}
