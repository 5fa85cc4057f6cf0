// weft.cast between every pair of element types and weft.constant, lowered
// and executed against weft-eval (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @float_to_float
func.func @float_to_float(%a: tensor<16xf32> {check.range = [-300.0, 300.0]},
                          %d: tensor<8xf64>)
    -> (tensor<16xbf16>, tensor<16xf16>, tensor<16xf64>, tensor<16xf32>,
        tensor<16xbf16>, tensor<8xf32>, tensor<8xbf16>) {
  %0 = weft.cast %a : tensor<16xf32> -> tensor<16xbf16>
  %1 = weft.cast %a : tensor<16xf32> -> tensor<16xf16>
  %2 = weft.cast %a : tensor<16xf32> -> tensor<16xf64>
  %3 = weft.cast %0 : tensor<16xbf16> -> tensor<16xf32>
  %4 = weft.cast %1 : tensor<16xf16> -> tensor<16xbf16>
  %5 = weft.cast %d : tensor<8xf64> -> tensor<8xf32>
  %6 = weft.cast %d : tensor<8xf64> -> tensor<8xbf16>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<16xbf16>, tensor<16xf16>,
      tensor<16xf64>, tensor<16xf32>, tensor<16xbf16>, tensor<8xf32>,
      tensor<8xbf16>
}

// Float to integer truncates toward zero, saturates and maps NaN to 0;
// to i1 tests for non-zero (NaN included). Not checked: +inf (or >= 2^63) to
// i64, where the evaluator's `static_cast<int64_t>(2^63 - 1 as double)`
// overflows to INT64_MIN; the lowering saturates to INT64_MAX.
// CHECK: OK @float_to_int
func.func @float_to_int(%a: tensor<16xf32> {check.range = [-9.0, 9.0]})
    -> (tensor<16xi64>, tensor<16xi32>, tensor<16xi1>, tensor<7xi32>,
        tensor<7xi64>, tensor<7xi1>, tensor<4xi32>) {
  %special = weft.constant dense<[0x7FC00000, 0x7F800000, 0xFF800000, 3.0e9, -3.0e9, 2.5, -0.0]> : tensor<7xf32>
  %big = weft.constant dense<[2147483520.0, -2147483648.0, 9.0e18, -1.0e19]> : tensor<4xf64>
  %0 = weft.cast %a : tensor<16xf32> -> tensor<16xi64>
  %1 = weft.cast %a : tensor<16xf32> -> tensor<16xi32>
  %2 = weft.cast %a : tensor<16xf32> -> tensor<16xi1>
  %3 = weft.cast %special : tensor<7xf32> -> tensor<7xi32>
  %special64 = weft.constant dense<[0x7FC00000, -1.0e30, 0xFF800000, 3.0e9, -3.0e9, 2.5, -0.0]> : tensor<7xf32>
  %4 = weft.cast %special64 : tensor<7xf32> -> tensor<7xi64>
  %5 = weft.cast %special : tensor<7xf32> -> tensor<7xi1>
  %6 = weft.cast %big : tensor<4xf64> -> tensor<4xi32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<16xi64>, tensor<16xi32>,
      tensor<16xi1>, tensor<7xi32>, tensor<7xi64>, tensor<7xi1>, tensor<4xi32>
}

// CHECK: OK @int_casts
func.func @int_casts(%i: tensor<10xi64> {check.range = [-1000, 1000]},
                     %j: tensor<10xi32>, %b: tensor<10xi1>)
    -> (tensor<10xf32>, tensor<10xbf16>, tensor<10xf64>, tensor<10xi32>,
        tensor<10xi1>, tensor<10xi64>, tensor<10xf32>, tensor<10xi64>,
        tensor<10xf16>, tensor<10xi32>) {
  %0 = weft.cast %i : tensor<10xi64> -> tensor<10xf32>
  %1 = weft.cast %i : tensor<10xi64> -> tensor<10xbf16>
  %2 = weft.cast %j : tensor<10xi32> -> tensor<10xf64>
  %3 = weft.cast %i : tensor<10xi64> -> tensor<10xi32>
  %4 = weft.cast %j : tensor<10xi32> -> tensor<10xi1>
  %5 = weft.cast %j : tensor<10xi32> -> tensor<10xi64>
  %6 = weft.cast %b : tensor<10xi1> -> tensor<10xf32>
  %7 = weft.cast %b : tensor<10xi1> -> tensor<10xi64>
  %8 = weft.cast %i : tensor<10xi64> -> tensor<10xf16>
  %9 = weft.cast %b : tensor<10xi1> -> tensor<10xi32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<10xf32>,
      tensor<10xbf16>, tensor<10xf64>, tensor<10xi32>, tensor<10xi1>,
      tensor<10xi64>, tensor<10xf32>, tensor<10xi64>, tensor<10xf16>,
      tensor<10xi32>
}

// i64 to i32 wraps.
// CHECK: OK @wrap
func.func @wrap() -> tensor<3xi32> {
  %c = weft.constant dense<[4294967297, -2147483649, 7]> : tensor<3xi64>
  %0 = weft.cast %c : tensor<3xi64> -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// CHECK: OK @constants
func.func @constants() -> (tensor<2x3xf32>, tensor<i64>, tensor<4xi1>, tensor<2xbf16>) {
  %0 = weft.constant dense<[[1.5, -2.0, 3.25], [0.0, 1.0e-3, 7.0]]> : tensor<2x3xf32>
  %1 = weft.constant dense<42> : tensor<i64>
  %2 = weft.constant dense<[true, false, false, true]> : tensor<4xi1>
  %3 = weft.constant dense<[0.1, 3.0e4]> : tensor<2xbf16>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<i64>, tensor<4xi1>, tensor<2xbf16>
}
