// Evaluates a linear layer, gelu, softmax and cross-entropy on random data
// and matches a float64 NumPy computation of the same function.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.default_rng(0); \
// RUN:   np.save('%t/x.npy', r.standard_normal((4, 8)).astype(np.float32)); \
// RUN:   np.save('%t/w.npy', r.standard_normal((5, 8)).astype(np.float32)); \
// RUN:   np.save('%t/b.npy', r.standard_normal(5).astype(np.float32)); \
// RUN:   np.save('%t/labels.npy', np.array([0, 4, 2, 1]))"
// RUN: weft-eval %s --input x=%t/x.npy --input labels=%t/labels.npy \
// RUN:   --param fc.weight=%t/w.npy --param fc.bias=%t/b.npy -o %t/out --print \
// RUN:   | FileCheck %s
// RUN: %python -c "import numpy as np; from math import erf, sqrt; \
// RUN:   x, w, b = (np.load('%t/' + n + '.npy').astype(np.float64) for n in 'xwb'); \
// RUN:   t = np.load('%t/labels.npy'); y = x @ w.T + b; \
// RUN:   g = y * (1 + np.vectorize(erf)(y / sqrt(2))) / 2; \
// RUN:   e = np.exp(g - g.max(1, keepdims=True)); p = e / e.sum(1, keepdims=True); \
// RUN:   lse = np.log(np.exp(y).sum(1)); \
// RUN:   np.save('%t/expected.0.npy', p); \
// RUN:   np.save('%t/expected.1.npy', np.mean(lse - y[np.arange(4), t]))"
// RUN: %compare %t/out.0.npy %t/expected.0.npy --rtol 1e-5
// RUN: %compare %t/out.1.npy %t/expected.1.npy --rtol 1e-5

// CHECK: result 0: tensor<4x5xf32> -> {{.*}}out.0.npy
// CHECK: result 1: tensor<f32> -> {{.*}}out.1.npy

func.func @forward(%w: tensor<5x8xf32> {weft.param = "fc.weight"},
                   %b: tensor<5xf32> {weft.param = "fc.bias"},
                   %x: tensor<4x8xf32> {weft.input = "x"},
                   %t: tensor<4xi64> {weft.input = "labels"})
    -> (tensor<4x5xf32>, tensor<f32>) {
  %mm = weft.matmul %x, %w {transpose_rhs = true}
      : (tensor<4x8xf32>, tensor<5x8xf32>) -> tensor<4x5xf32>
  %y = weft.add %mm, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %g = weft.gelu %y : tensor<4x5xf32>
  %p = weft.softmax %g {axis = 1 : i64} : tensor<4x5xf32>
  %l = weft.cross_entropy %y, %t : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %p, %l : tensor<4x5xf32>, tensor<f32>
}
