// RUN: weft-opt %s | weft-opt | FileCheck %s

// CHECK-LABEL: func.func @selection
// CHECK: weft.floor %arg0 : tensor<4x6xf32>
// CHECK: weft.ceil %arg0 : tensor<4x6xf32>
// CHECK: weft.round %arg0 : tensor<4x6xf32>
// CHECK: weft.cumsum %arg0 {axis = 1 : i64, exclusive = true, reverse = true} : tensor<4x6xf32>
// CHECK: weft.arg_max %arg0 {axis = 1 : i64, keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xi64>
// CHECK: weft.arg_min %arg1 {axis = 0 : i64, select_last_index = true} : (tensor<4x6xi64>) -> tensor<6xi64>
// CHECK: weft.top_k %arg0 {axis = 1 : i64, k = 2 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
// CHECK: weft.top_k_indices %arg0 {axis = 0 : i64, k = 4 : i64, largest = false} : (tensor<4x6xf32>) -> tensor<4x6xi64>
func.func @selection(%x: tensor<4x6xf32>, %i: tensor<4x6xi64>) {
  %0 = weft.floor %x : tensor<4x6xf32>
  %1 = weft.ceil %x : tensor<4x6xf32>
  %2 = weft.round %x : tensor<4x6xf32>
  %3 = weft.cumsum %x {axis = 1 : i64, exclusive = true, reverse = true} : tensor<4x6xf32>
  %4 = weft.arg_max %x {axis = 1 : i64, keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xi64>
  %5 = weft.arg_min %i {axis = 0 : i64, select_last_index = true} : (tensor<4x6xi64>) -> tensor<6xi64>
  %6 = weft.top_k %x {axis = 1 : i64, k = 2 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
  %7 = weft.top_k_indices %x {axis = 0 : i64, k = 4 : i64, largest = false} : (tensor<4x6xf32>) -> tensor<4x6xi64>
  return
}
