// ONNX CumSum's exclusive and reverse forms, integer sums, ArgMax/ArgMin
// tie rules and Round's ties to even, evaluated against NumPy on inputs
// with repeated values.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.default_rng(5); \
// RUN:   np.save('%t/x.npy', (np.round(r.standard_normal((3, 6)) * 2) / 2).astype(np.float32)); \
// RUN:   np.save('%t/i.npy', r.integers(-3, 3, (3, 6)))"
// RUN: weft-eval %s --input x=%t/x.npy --input i=%t/i.npy -o %t/out
// RUN: %python -c "import numpy as np; x = np.load('%t/x.npy').astype(np.float64); \
// RUN:   i = np.load('%t/i.npy'); c = np.cumsum(x, 1); \
// RUN:   rc = np.cumsum(x[:, ::-1], 1)[:, ::-1]; \
// RUN:   np.save('%t/want.0.npy', c - x); np.save('%t/want.1.npy', rc); \
// RUN:   np.save('%t/want.2.npy', rc - x); np.save('%t/want.3.npy', np.cumsum(i, 0)); \
// RUN:   np.save('%t/want.4.npy', np.argmax(i, 1)); \
// RUN:   np.save('%t/want.5.npy', 5 - np.argmin(i[:, ::-1], 1)); \
// RUN:   np.save('%t/want.6.npy', np.round(x)); \
// RUN:   np.save('%t/want.7.npy', -np.sort(-x, 1, kind='stable')[:, :4]); \
// RUN:   np.save('%t/want.8.npy', np.argsort(-x, 1, kind='stable')[:, :4])"
// RUN: %compare %t/out.0.npy %t/want.0.npy --rtol 1e-6
// RUN: %compare %t/out.1.npy %t/want.1.npy --rtol 1e-6
// RUN: %compare %t/out.2.npy %t/want.2.npy --rtol 1e-6
// RUN: %compare %t/out.3.npy %t/want.3.npy --rtol 0
// RUN: %compare %t/out.4.npy %t/want.4.npy --rtol 0
// RUN: %compare %t/out.5.npy %t/want.5.npy --rtol 0
// RUN: %compare %t/out.6.npy %t/want.6.npy --rtol 0
// RUN: %compare %t/out.7.npy %t/want.7.npy --rtol 0
// RUN: %compare %t/out.8.npy %t/want.8.npy --rtol 0

func.func @forward(%x: tensor<3x6xf32> {weft.input = "x"},
                   %i: tensor<3x6xi64> {weft.input = "i"})
    -> (tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xi64>,
        tensor<3xi64>, tensor<3xi64>, tensor<3x6xf32>, tensor<3x4xf32>,
        tensor<3x4xi64>) {
  %0 = weft.cumsum %x {axis = 1 : i64, exclusive = true} : tensor<3x6xf32>
  %1 = weft.cumsum %x {axis = 1 : i64, reverse = true} : tensor<3x6xf32>
  %2 = weft.cumsum %x {axis = 1 : i64, exclusive = true, reverse = true} : tensor<3x6xf32>
  %3 = weft.cumsum %i {axis = 0 : i64} : tensor<3x6xi64>
  %4 = weft.arg_max %i {axis = 1 : i64} : (tensor<3x6xi64>) -> tensor<3xi64>
  %5 = weft.arg_min %i {axis = 1 : i64, select_last_index = true} : (tensor<3x6xi64>) -> tensor<3xi64>
  %6 = weft.round %x : tensor<3x6xf32>
  %7 = weft.top_k %x {axis = 1 : i64, k = 4 : i64} : (tensor<3x6xf32>) -> tensor<3x4xf32>
  %8 = weft.top_k_indices %x {axis = 1 : i64, k = 4 : i64} : (tensor<3x6xf32>) -> tensor<3x4xi64>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<3x6xf32>, tensor<3x6xf32>,
      tensor<3x6xf32>, tensor<3x6xi64>, tensor<3xi64>, tensor<3xi64>,
      tensor<3x6xf32>, tensor<3x4xf32>, tensor<3x4xi64>
}
