// RUN: weft-opt %s | weft-opt | FileCheck %s

// CHECK-LABEL: func.func @recurrences
// CHECK: %[[Y:.*]], %[[C:.*]], %[[G:.*]] = weft.lstm %arg0, %arg1, %arg2, %arg3 {reverse = true} : (tensor<7x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>)
// CHECK: weft.lstm_grad %[[Y]], %[[C]], %arg1, %arg2, %arg3, %[[Y]], %[[C]], %[[G]] {reverse = true} : (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>) -> (tensor<7x3x24xf32>, tensor<3x6xf32>, tensor<3x6xf32>)
// CHECK: %[[GY:.*]], %[[GG:.*]] = weft.gru %arg4, %arg5, %arg6, %arg2 : (tensor<7x3x18xf32>, tensor<18x6xf32>, tensor<18xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x24xf32>)
// The default direction is not printed.
// CHECK: weft.gru_grad %[[GY]], %arg5, %arg2, %[[GY]], %[[GG]] : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>) -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
func.func @recurrences(%xg: tensor<7x3x24xf32>, %r: tensor<24x6xf32>, %h0: tensor<3x6xf32>, %c0: tensor<3x6xf32>,
                       %xg3: tensor<7x3x18xf32>, %r3: tensor<18x6xf32>, %rb: tensor<18xf32>) {
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 {reverse = true} : (tensor<7x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  %dx, %dh0, %dc0 = weft.lstm_grad %y, %c, %r, %h0, %c0, %y, %c, %g {reverse = true} : (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>) -> (tensor<7x3x24xf32>, tensor<3x6xf32>, tensor<3x6xf32>)
  %gy, %gg = weft.gru %xg3, %r3, %rb, %h0 : (tensor<7x3x18xf32>, tensor<18x6xf32>, tensor<18xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  %gdx, %gdp, %gdh0 = weft.gru_grad %gy, %r3, %h0, %gy, %gg {reverse = false} : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>) -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
  return
}

// Recompute mode: the forward ops have no gates result; the adjoints take
// the input gates (and the GRU's the recurrent bias) in their place.
// CHECK-LABEL: func.func @recompute
// CHECK: %[[Y:.*]], %[[C:.*]] = weft.lstm %arg0, %arg1, %arg2, %arg3 {recompute} : (tensor<7x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>)
// CHECK: weft.lstm_grad %[[Y]], %[[C]], %arg1, %arg2, %arg3, %[[Y]], %[[C]], %arg0 {recompute, reverse = true} : ({{.*}}, tensor<7x3x24xf32>) -> (tensor<7x3x24xf32>, tensor<3x6xf32>, tensor<3x6xf32>)
// CHECK: %[[GY:.*]] = weft.gru %arg4, %arg5, %arg6, %arg2 {recompute} : (tensor<7x3x18xf32>, tensor<18x6xf32>, tensor<18xf32>, tensor<3x6xf32>) -> tensor<7x3x6xf32>
// CHECK: weft.gru_grad %[[GY]], %arg5, %arg2, %[[GY]], %arg4, %arg6 {recompute} : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x18xf32>, tensor<18xf32>) -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
func.func @recompute(%xg: tensor<7x3x24xf32>, %r: tensor<24x6xf32>, %h0: tensor<3x6xf32>, %c0: tensor<3x6xf32>,
                     %xg3: tensor<7x3x18xf32>, %r3: tensor<18x6xf32>, %rb: tensor<18xf32>) {
  %y, %c = weft.lstm %xg, %r, %h0, %c0 {recompute} : (tensor<7x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>)
  %dx, %dh0, %dc0 = weft.lstm_grad %y, %c, %r, %h0, %c0, %y, %c, %xg {recompute, reverse = true} : (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>) -> (tensor<7x3x24xf32>, tensor<3x6xf32>, tensor<3x6xf32>)
  %gy = weft.gru %xg3, %r3, %rb, %h0 {recompute} : (tensor<7x3x18xf32>, tensor<18x6xf32>, tensor<18xf32>, tensor<3x6xf32>) -> tensor<7x3x6xf32>
  %gdx, %gdp, %gdh0 = weft.gru_grad %gy, %r3, %h0, %gy, %xg3, %rb {recompute} : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x18xf32>, tensor<18xf32>) -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
  return
}
