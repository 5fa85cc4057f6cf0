// RUN: weft-opt %s --weft-recurrent-activations=mode=recompute | FileCheck %s --check-prefix=RECOMPUTE
// RUN: weft-opt %s --weft-recurrent-activations=mode=store | FileCheck %s --check-prefix=STORE
// auto: the LSTM's gates are 512*4*128*4 bytes = 1 MiB, the GRU's 4 KiB.
// RUN: weft-opt %s --weft-recurrent-activations="mode=auto threshold-mb=0.5" | FileCheck %s --check-prefix=AUTO
// RUN: weft-opt %s --weft-recurrent-activations | FileCheck %s --check-prefix=STORE
// Autodiff builds the adjoints to match: the input gates (and the GRU's
// bias) in place of the stored gates.
// RUN: weft-opt %s --weft-recurrent-activations=mode=recompute --weft-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: not weft-opt %s --weft-recurrent-activations=mode=sometimes 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: mode must be store, recompute or auto, got 'sometimes'

// RECOMPUTE-LABEL: func.func @loss
// RECOMPUTE: weft.lstm %{{.*}} {recompute} : ({{.*}}) -> (tensor<512x4x32xf32>, tensor<512x4x32xf32>)
// RECOMPUTE: weft.gru %{{.*}} {recompute} : ({{.*}}) -> tensor<8x2x4xf32>
// STORE-LABEL: func.func @loss
// STORE: weft.lstm %{{.*}} -> (tensor<512x4x32xf32>, tensor<512x4x32xf32>, tensor<512x4x128xf32>)
// STORE: weft.gru %{{.*}} -> (tensor<8x2x4xf32>, tensor<8x2x16xf32>)
// AUTO-LABEL: func.func @loss
// AUTO: weft.lstm %{{.*}} {recompute}
// AUTO: weft.gru %{{.*}} -> (tensor<8x2x4xf32>, tensor<8x2x16xf32>)

// GRAD-LABEL: func.func @loss_grad
// GRAD: weft.gru_grad %{{.*}}, %arg5 {recompute} : ({{.*}}, tensor<8x2x12xf32>, tensor<12xf32>) -> (tensor<8x2x12xf32>, tensor<8x2x12xf32>, tensor<2x4xf32>)
// GRAD: weft.lstm_grad %{{.*}}, %arg0 {recompute} : ({{.*}}, tensor<512x4x128xf32>) -> (tensor<512x4x128xf32>, tensor<4x32xf32>, tensor<4x32xf32>)
func.func @loss(%xg: tensor<512x4x128xf32> {weft.param = "xg"},
                %r: tensor<128x32xf32> {weft.param = "r"},
                %h0: tensor<4x32xf32>, %c0: tensor<4x32xf32>,
                %xg3: tensor<8x2x12xf32> {weft.param = "xg3"},
                %rb: tensor<12xf32> {weft.param = "rb"},
                %r3: tensor<12x4xf32> {weft.param = "r3"},
                %g0: tensor<2x4xf32>) -> tensor<f32> {
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 : (tensor<512x4x128xf32>, tensor<128x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) -> (tensor<512x4x32xf32>, tensor<512x4x32xf32>, tensor<512x4x128xf32>)
  %gy, %gg = weft.gru %xg3, %r3, %rb, %g0 : (tensor<8x2x12xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<2x4xf32>) -> (tensor<8x2x4xf32>, tensor<8x2x16xf32>)
  %s1 = weft.reduce_sum %y {axes = array<i64: 0, 1, 2>} : (tensor<512x4x32xf32>) -> tensor<f32>
  %s2 = weft.reduce_sum %gy {axes = array<i64: 0, 1, 2>} : (tensor<8x2x4xf32>) -> tensor<f32>
  %l = weft.add %s1, %s2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
