// weft.lstm (reversed) and weft.gru in the evaluator against the ONNX
// equations in NumPy (test/lib/rnn_reference.py), in f64: every hidden and
// cell state of 5 steps.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.default_rng(7); \
// RUN:   [np.save('%t/%%s.npy' %% n, r.standard_normal(s)) for n, s in \
// RUN:    [('xg', (5, 2, 12)), ('r', (12, 3)), ('h0', (2, 3)), ('c0', (2, 3)), \
// RUN:     ('xg3', (5, 2, 9)), ('r3', (9, 3)), ('rb', (9,))]]"
// RUN: weft-eval %s --input xg=%t/xg.npy --input r=%t/r.npy --input h0=%t/h0.npy \
// RUN:   --input c0=%t/c0.npy --input xg3=%t/xg3.npy --input r3=%t/r3.npy \
// RUN:   --input rb=%t/rb.npy -o %t/out
// RUN: %python %weft_src/test/lib/rnn_reference.py lstm %t/xg.npy %t/r.npy \
// RUN:   %t/h0.npy %t/c0.npy %t/lstm --reverse
// RUN: %python %weft_src/test/lib/rnn_reference.py gru %t/xg3.npy %t/r3.npy \
// RUN:   %t/rb.npy %t/h0.npy %t/gru
// RUN: %compare %t/out.0.npy %t/lstm.hidden.npy --rtol 1e-12
// RUN: %compare %t/out.1.npy %t/lstm.cell.npy --rtol 1e-12
// RUN: %compare %t/out.2.npy %t/gru.hidden.npy --rtol 1e-12

func.func @forward(%xg: tensor<5x2x12xf64> {weft.input = "xg"},
                   %r: tensor<12x3xf64> {weft.input = "r"},
                   %h0: tensor<2x3xf64> {weft.input = "h0"},
                   %c0: tensor<2x3xf64> {weft.input = "c0"},
                   %xg3: tensor<5x2x9xf64> {weft.input = "xg3"},
                   %r3: tensor<9x3xf64> {weft.input = "r3"},
                   %rb: tensor<9xf64> {weft.input = "rb"})
    -> (tensor<5x2x3xf64>, tensor<5x2x3xf64>, tensor<5x2x3xf64>) {
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 {reverse = true} : (tensor<5x2x12xf64>, tensor<12x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) -> (tensor<5x2x3xf64>, tensor<5x2x3xf64>, tensor<5x2x12xf64>)
  %gy, %gg = weft.gru %xg3, %r3, %rb, %h0 : (tensor<5x2x9xf64>, tensor<9x3xf64>, tensor<9xf64>, tensor<2x3xf64>) -> (tensor<5x2x3xf64>, tensor<5x2x12xf64>)
  return %y, %c, %gy : tensor<5x2x3xf64>, tensor<5x2x3xf64>, tensor<5x2x3xf64>
}
