// RUN: weft-opt %s --weft-fuse-kernels -split-input-file | FileCheck %s

// Softmax over rows: max, exp, sum and divide run as one loop over rows.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @softmax
// CHECK-NOT: linalg.generic
// CHECK: scf.forall (%{{.*}}) in (64)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: math.exp
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.divf
// CHECK: tensor.parallel_insert_slice
// CHECK: } {weft.kernel = "fused_0"}
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @softmax(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x128xf32>) outs(%m0 : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %e2 = tensor.empty() : tensor<64x128xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : tensor<64x128xf32>, tensor<64xf32>) outs(%e2 : tensor<64x128xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %s = arith.subf %in, %m : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<64x128xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<64x128xf32>) outs(%s0 : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %out = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<64x128xf32>, tensor<64xf32>) outs(%e2 : tensor<64x128xf32>) {
  ^bb0(%in: f32, %s: f32, %o: f32):
    %d = arith.divf %in, %s : f32
    linalg.yield %d : f32
  } -> tensor<64x128xf32>
  return %out : tensor<64x128xf32>
}

// -----

// Layer norm over the last axis of a 3-D tensor: both reductions and the
// normalization run in one loop over (batch, position); gamma and beta are
// read whole by every row.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#chan = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @layer_norm
// CHECK-NOT: linalg.generic
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (2, 8)
// CHECK: linalg.generic {{.*}}["parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}}["parallel", "parallel", "parallel"]
// CHECK: linalg.generic {{.*}}["parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}}["parallel", "parallel", "parallel"]
// CHECK: math.rsqrt
// CHECK: } {weft.kernel = "fused_0"}
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @layer_norm(%x: tensor<2x8x32xf32>, %gamma: tensor<32xf32>,
                      %beta: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %inv = arith.constant 0.03125 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e1 = tensor.empty() : tensor<2x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x8x32xf32>) outs(%z : tensor<2x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %e3 = tensor.empty() : tensor<2x8x32xf32>
  %centered = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %sum : tensor<2x8x32xf32>, tensor<2x8xf32>) outs(%e3 : tensor<2x8x32xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %mean = arith.mulf %s, %inv : f32
    %c = arith.subf %in, %mean : f32
    linalg.yield %c : f32
  } -> tensor<2x8x32xf32>
  %sq = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%centered : tensor<2x8x32xf32>) outs(%z : tensor<2x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %p = arith.mulf %in, %in : f32
    %r = arith.addf %p, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %y = linalg.generic {indexing_maps = [#id3, #row3, #chan, #chan, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%centered, %sq, %gamma, %beta : tensor<2x8x32xf32>, tensor<2x8xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e3 : tensor<2x8x32xf32>) {
  ^bb0(%c: f32, %v: f32, %g: f32, %b: f32, %out: f32):
    %var = arith.mulf %v, %inv : f32
    %ve = arith.addf %var, %eps : f32
    %rs = math.rsqrt %ve : f32
    %n = arith.mulf %c, %rs : f32
    %s = arith.mulf %n, %g : f32
    %r = arith.addf %s, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// GELU (erf form) as four elementwise ops: merged into one generic, one loop.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @gelu
// CHECK-NOT: linalg.generic
// CHECK: scf.forall (%{{.*}}) in (16)
// CHECK-COUNT-1: linalg.generic
// CHECK: math.erf
// CHECK: } {weft.kernel = "fused_0"}
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @gelu(%x: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %rsqrt2 = arith.constant 0.707106769 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<16x64xf32>) outs(%e : tensor<16x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %rsqrt2 : f32
    linalg.yield %r : f32
  } -> tensor<16x64xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<16x64xf32>) outs(%e : tensor<16x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.erf %in : f32
    linalg.yield %r : f32
  } -> tensor<16x64xf32>
  %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<16x64xf32>) outs(%e : tensor<16x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %one : f32
    linalg.yield %r : f32
  } -> tensor<16x64xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %c : tensor<16x64xf32>, tensor<16x64xf32>) outs(%e : tensor<16x64xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %h = arith.mulf %in, %half : f32
    %r = arith.mulf %h, %in2 : f32
    linalg.yield %r : f32
  } -> tensor<16x64xf32>
  return %d : tensor<16x64xf32>
}

// -----

// Bias + ReLU after a matmul: the matmul stays outside (BLAS), keeps its own
// zero fill right before it, and bias + ReLU are one generic in one loop.

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @bias_relu
// CHECK: %[[FILL:.*]] = linalg.fill
// CHECK-NEXT: %[[MM:.*]] = linalg.matmul {{.*}}outs(%[[FILL]]
// CHECK: %[[FILL2:.*]] = linalg.fill
// CHECK-NEXT: linalg.matmul {{.*}}outs(%[[FILL2]]
// CHECK: scf.forall (%{{.*}}) in (8)
// CHECK-COUNT-1: linalg.generic
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: } {weft.kernel = "fused_0"}
// CHECK: return
func.func @bias_relu(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %w2: tensor<16x32xf32>,
                     %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>)
                      outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  %mm2 = linalg.matmul ins(%x, %w2 : tensor<8x16xf32>, tensor<16x32xf32>)
                       outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  %biased = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<8x32xf32>, tensor<32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %r = arith.addf %in, %bias : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%biased : tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>
  return %relu, %mm2 : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// A producer that is also used after the kernel is yielded by the loop, not
// computed twice.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @yield_producer
// CHECK: %[[K:.*]]:2 = scf.forall
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK: } {weft.kernel = "fused_0"}
// CHECK-NOT: linalg.generic
// CHECK: return %[[K]]#0, %[[K]]#1
func.func @yield_producer(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %two : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %b, %a : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Not fused into the last kernel: a column sum every row reads whole
// (fusing would recompute it per row), and %sq, which %neg reads before the
// kernel: it is computed once, in %neg's kernel, which yields it.

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @not_fused
// CHECK: %[[COLS:.*]] = linalg.generic {{.*}}["reduction", "parallel"]
// CHECK: %[[K:.*]]:2 = scf.forall
// CHECK: arith.mulf
// CHECK: arith.negf
// CHECK: } {weft.kernel = "fused_0"}
// CHECK: scf.forall
// CHECK-DAG: tensor.extract_slice %[[K]]#1
// CHECK-DAG: tensor.extract_slice %[[COLS]][0] [8] [1]
// CHECK: } {weft.kernel = "fused_1"}
func.func @not_fused(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %cols = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sq : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.negf %in : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %out = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sq, %cols : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %c: f32, %o: f32):
    %r = arith.addf %in, %c : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %out, %neg : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A sum over the batch of a per-sample product that nothing else reads
// (bf16's weight gradient), with other work before the update that reads
// the sum: the sum stays a kernel of its own where it is, so the [4, 8, 16]
// product dies there; fused into the update, it would live until the
// update. The same sum right before its consumer still fuses.

#b3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#s2 = affine_map<(d0, d1, d2) -> (d1, d2)>
#i2 = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @batch_sum_apart
// CHECK: %[[SUM:.*]] = scf.forall
// CHECK: linalg.generic {{.*}}["reduction", "parallel", "parallel"]
// CHECK: } {weft.kernel = "fused_0"}
// CHECK: scf.forall
// CHECK: arith.negf
// CHECK: } {weft.kernel = "fused_1"}
// CHECK: scf.forall
// CHECK-NOT: "reduction"
// CHECK: tensor.extract_slice %[[SUM]]
// CHECK: arith.subf
// CHECK: } {weft.kernel = "fused_2"}
// CHECK-LABEL: func.func @batch_sum_next
// CHECK: scf.forall
// CHECK: linalg.generic {{.*}}["reduction", "parallel", "parallel"]
// CHECK: arith.subf
// CHECK: } {weft.kernel = "fused_0"}
// CHECK-NOT: scf.forall
func.func @batch_sum_apart(%p: tensor<4x8x16xf32>, %w: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %sum = linalg.generic {indexing_maps = [#b3, #s2], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%p : tensor<4x8x16xf32>) outs(%z : tensor<8x16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %neg = linalg.generic {indexing_maps = [#i2, #i2], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<8x16xf32>) outs(%e2 : tensor<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.negf %in : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %e3 = tensor.empty() : tensor<8x16xf32>
  %new = linalg.generic {indexing_maps = [#i2, #i2, #i2], iterator_types = ["parallel", "parallel"]}
      ins(%w, %sum : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e3 : tensor<8x16xf32>) {
  ^bb0(%a: f32, %g: f32, %o: f32):
    %r = arith.subf %a, %g : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %new, %neg : tensor<8x16xf32>, tensor<8x16xf32>
}
func.func @batch_sum_next(%p: tensor<4x8x16xf32>, %w: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %sum = linalg.generic {indexing_maps = [#b3, #s2], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%p : tensor<4x8x16xf32>) outs(%z : tensor<8x16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %e3 = tensor.empty() : tensor<8x16xf32>
  %new = linalg.generic {indexing_maps = [#i2, #i2, #i2], iterator_types = ["parallel", "parallel"]}
      ins(%w, %sum : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e3 : tensor<8x16xf32>) {
  ^bb0(%a: f32, %g: f32, %o: f32):
    %r = arith.subf %a, %g : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %new : tensor<8x16xf32>
}

// -----

// An im2col gather reads overlapping windows, so it fuses with nothing; it
// still becomes a parallel loop over the dims every map uses as a plain
// index (channel and image), not over the window dims.

// CHECK-LABEL: func.func @im2col
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (2, 4)
// CHECK: linalg.generic
// CHECK-SAME: tensor<1x3x3x1x6x6xf32>
func.func @im2col(%x: tensor<4x2x8x8xf32>) -> tensor<2x3x3x4x6x6xf32> {
  %init = tensor.empty() : tensor<2x3x3x4x6x6xf32>
  %cols = linalg.generic {
      indexing_maps = [affine_map<(c, i, j, n, y, x) -> (n, c, y + i, x + j)>,
                       affine_map<(c, i, j, n, y, x) -> (c, i, j, n, y, x)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel",
                        "parallel", "parallel"]}
      ins(%x : tensor<4x2x8x8xf32>) outs(%init : tensor<2x3x3x4x6x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x3x3x4x6x6xf32>
  return %cols : tensor<2x3x3x4x6x6xf32>
}

// -----

// A bias gradient (sum over N, H, W per channel) has one parallel loop with
// reductions inside it: its channels run in parallel. A pooling gradient
// runs in parallel over its plain loops (N, C); its floordiv-and-minus
// windows stay whole inside each tile, which reads the whole window.

// CHECK-LABEL: func.func @bias_grad
// CHECK: scf.forall (%{{.*}}) in (3)
func.func @bias_grad(%g: tensor<2x3x4x4xf32>) -> tensor<3xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<3xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<3xf32>) -> tensor<3xf32>
  %sum = linalg.generic {
      indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>,
                       affine_map<(n, c, h, w) -> (c)>],
      iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%g : tensor<2x3x4x4xf32>) outs(%fill : tensor<3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %sum : tensor<3xf32>
}

// CHECK-LABEL: func.func @pool_grad
// CHECK: scf.forall (%[[N:.*]], %[[C:.*]]) in (2, 3)
// CHECK: tensor.extract_slice %{{.*}}[%[[N]], %[[C]], 0, 0] [1, 1, 2, 2] [1, 1, 1, 1] : tensor<2x3x2x2xf32> to tensor<1x1x2x2xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<1x1x2x2xf32>, tensor<1x1xf32>)
// CHECK-SAME: outs(%{{.*}} : tensor<1x1x4x4xf32>)
// CHECK: scf.forall.in_parallel
func.func @pool_grad(%g: tensor<2x3x2x2xf32>, %w: tensor<1x1xf32>) -> tensor<2x3x4x4xf32> {
  %init = tensor.empty() : tensor<2x3x4x4xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(n, c, h, w, i, j) -> (n, c, h floordiv 2 - i, w floordiv 2 - j)>,
                       affine_map<(n, c, h, w, i, j) -> (i, j)>,
                       affine_map<(n, c, h, w, i, j) -> (n, c, h, w)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel",
                        "reduction", "reduction"]}
      ins(%g, %w : tensor<2x3x2x2xf32>, tensor<1x1xf32>) outs(%init : tensor<2x3x4x4xf32>) {
  ^bb0(%in: f32, %win: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<2x3x4x4xf32>
  return %r : tensor<2x3x4x4xf32>
}

// -----

// Linalg slices a computed index from its first and last iteration, so an
// index that decreases along a loop (a flipped kernel, a pooling gradient
// over a 2 x 2 window) keeps the op whole.

// CHECK-LABEL: func.func @flipped_kernel
// CHECK-NOT: scf.forall
// CHECK: return
func.func @flipped_kernel(%w: tensor<4x5x3x3xf32>) -> tensor<5x4x3x3xf32> {
  %init = tensor.empty() : tensor<5x4x3x3xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(o, i, h, w) -> (i, o, -h + 2, -w + 2)>,
                       affine_map<(o, i, h, w) -> (o, i, h, w)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%w : tensor<4x5x3x3xf32>) outs(%init : tensor<5x4x3x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<5x4x3x3xf32>
  return %r : tensor<5x4x3x3xf32>
}

// CHECK-LABEL: func.func @pool_grad_wide_window
// CHECK-NOT: scf.forall
// CHECK: return
func.func @pool_grad_wide_window(%g: tensor<2x3x3x3xf32>, %w: tensor<2x2xf32>) -> tensor<2x3x4x4xf32> {
  %init = tensor.empty() : tensor<2x3x4x4xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(n, c, h, w, i, j) -> (n, c, h - i, w - j)>,
                       affine_map<(n, c, h, w, i, j) -> (i, j)>,
                       affine_map<(n, c, h, w, i, j) -> (n, c, h, w)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel",
                        "reduction", "reduction"]}
      ins(%g, %w : tensor<2x3x3x3xf32>, tensor<2x2xf32>) outs(%init : tensor<2x3x4x4xf32>) {
  ^bb0(%in: f32, %win: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<2x3x4x4xf32>
  return %r : tensor<2x3x4x4xf32>
}

// -----

// A 1-D parameter's AdamW update: both moments are step results and inputs
// of the update. The loop is not tiled (its only loop is the innermost), so
// the moments are fused into the update as results of its one generic: one
// pass reading g, m, v, p and writing m', v', p'. The square of g, also
// read by the gradient norm before the update, stays on its own.
#v = affine_map<(i) -> (i)>
#s = affine_map<(i) -> ()>
// CHECK-LABEL: func.func @adamw_1d
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[SQ]]
// CHECK-SAME: outs(%{{.*}} : tensor<f32>)
// CHECK: %[[U:.*]]:3 = linalg.generic
// CHECK-SAME: iterator_types = ["parallel"]
// CHECK-SAME: outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[U]]#{{[0-9]}}, %[[U]]#{{[0-9]}}, %[[U]]#{{[0-9]}}, %{{.*}} :
func.func @adamw_1d(%g: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>,
                    %p: tensor<8xf32>, %lr: tensor<f32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>) {
  %cst = arith.constant 0.9 : f32
  %cst2 = arith.constant 0.999 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %sq = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%g : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %norm = linalg.generic {indexing_maps = [#v, #s], iterator_types = ["reduction"]}
      ins(%sq : tensor<8xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %m2 = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]}
      ins(%m, %g : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %cst : f32
    %r2 = arith.addf %r, %b : f32
    linalg.yield %r2 : f32
  } -> tensor<8xf32>
  %v2 = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]}
      ins(%v, %sq : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %cst2 : f32
    %r2 = arith.addf %r, %b : f32
    linalg.yield %r2 : f32
  } -> tensor<8xf32>
  %p2 = linalg.generic {indexing_maps = [#v, #v, #v, #s, #v], iterator_types = ["parallel"]}
      ins(%p, %m2, %v2, %lr : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %l: f32, %o: f32):
    %s = math.sqrt %c : f32
    %d = arith.divf %b, %s : f32
    %u = arith.mulf %l, %d : f32
    %r = arith.subf %a, %u : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %p2, %m2, %v2, %norm : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>
}

// -----

// A named pooling op (a convolution-like op with a window, which stays
// named) is tiled along the batch and channel loops like the other
// windowed ops: before, it ran on one thread.
// CHECK-LABEL: func.func @max_pool
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (2, 3)
// CHECK: linalg.pooling_nchw_max {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x1x4x4xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<1x1x2x2xf32>)
func.func @max_pool(%x: tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x3x2x2xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e : tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
  %w = tensor.empty() : tensor<2x2xf32>
  %r = linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%x, %w : tensor<2x3x4x4xf32>, tensor<2x2xf32>)
      outs(%init : tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
  return %r : tensor<2x3x2x2xf32>
}

// -----

// A widening cast read whole by several fusible ops is cloned into each:
// the kernel reads the bf16 tensor, and no f32 copy is written for it. The
// GEMM, which runs apart, keeps the original.

// CHECK-LABEL: func.func @widening_cast
// CHECK-SAME: (%[[X:.*]]: tensor<64x128xbf16>, %[[W:.*]]: tensor<128x16xf32>)
// CHECK: %[[WIDE:.*]] = scf.forall
// CHECK: arith.extf
// CHECK: } {weft.kernel = "fused_0"}
// CHECK: scf.forall
// CHECK: tensor.extract_slice %[[X]]
// CHECK-NOT: tensor<1x128xf32>
// CHECK: arith.extf
// CHECK-NEXT: arith.maximumf
// CHECK: arith.extf
// CHECK-NEXT: arith.subf
// CHECK: } {weft.kernel = "fused_1"}
// CHECK: linalg.matmul ins(%[[WIDE]], %[[W]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @widening_cast(%x: tensor<64x128xbf16>, %w: tensor<128x16xf32>)
    -> (tensor<64x128xbf16>, tensor<64x16xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x128xf32>
  %wide = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x128xbf16>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<64x128xf32>
  %e1 = tensor.empty() : tensor<64xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%wide : tensor<64x128xf32>) outs(%m0 : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %e2 = tensor.empty() : tensor<64x128xbf16>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%wide, %max : tensor<64x128xf32>, tensor<64xf32>) outs(%e2 : tensor<64x128xbf16>) {
  ^bb0(%in: f32, %m: f32, %out: bf16):
    %d = arith.subf %in, %m : f32
    %t = arith.truncf %d : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<64x128xbf16>
  %e3 = tensor.empty() : tensor<64x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e3 : tensor<64x16xf32>) -> tensor<64x16xf32>
  %p = linalg.matmul ins(%wide, %w : tensor<64x128xf32>, tensor<128x16xf32>) outs(%z : tensor<64x16xf32>) -> tensor<64x16xf32>
  return %y, %p : tensor<64x128xbf16>, tensor<64x16xf32>
}

// -----

// An element of a widening cast read alone (cross-entropy's logit at the
// label, a tensor.extract inside a kernel) reads the bf16 tensor and
// widens that element: with no other reader the cast is gone, and no f32
// copy of the logits is written.

// CHECK-LABEL: func.func @widening_cast_picked
// CHECK-SAME: (%[[X:.*]]: tensor<64x128xbf16>, %[[Y:.*]]: tensor<64xi64>)
// CHECK-NOT: tensor<64x128xf32>
// CHECK: %[[E:.*]] = tensor.extract %[[X]]
// CHECK-NEXT: arith.extf %[[E]] : bf16 to f32
#id1 = affine_map<(d0) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @widening_cast_picked(%x: tensor<64x128xbf16>, %y: tensor<64xi64>)
    -> tensor<64xf32> {
  %e = tensor.empty() : tensor<64x128xf32>
  %wide = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x128xbf16>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<64x128xf32>
  %e1 = tensor.empty() : tensor<64xf32>
  %picked = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%y : tensor<64xi64>) outs(%e1 : tensor<64xf32>) {
  ^bb0(%label: i64, %out: f32):
    %i = linalg.index 0 : index
    %c = arith.index_cast %label : i64 to index
    %v = tensor.extract %wide[%i, %c] : tensor<64x128xf32>
    linalg.yield %v : f32
  } -> tensor<64xf32>
  return %picked : tensor<64xf32>
}
