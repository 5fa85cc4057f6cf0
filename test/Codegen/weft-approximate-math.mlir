// RUN: weft-opt %s --pass-pipeline='builtin.module(func.func(weft-approximate-math))' | FileCheck %s

// exp becomes arithmetic: no libm call, no math.fma (an fmaf call without
// FMA) and no math.floor (a floorf call without SSE4.1).

// CHECK-LABEL: func.func @exp_f32
// CHECK-NOT: math.exp
// CHECK-NOT: math.fma
// CHECK-NOT: math.floor
// CHECK: arith.fptosi
// CHECK: arith.mulf {{.*}} fastmath<contract> : f32
// CHECK: arith.addf {{.*}} fastmath<contract> : f32
// CHECK: arith.bitcast {{.*}} : i32 to f32
// CHECK: return
func.func @exp_f32(%x: f32) -> f32 {
  %y = math.exp %x : f32
  return %y : f32
}

// log: inputs below the smallest normal are scaled by 2^24 and the result
// shifted back by 24 ln 2.

// CHECK-LABEL: func.func @log_f32
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK: %[[MIN:.*]] = arith.constant 1.17549435E-38 : f32
// CHECK: %[[SMALL:.*]] = arith.cmpf olt, %[[X]], %[[MIN]] : f32
// CHECK: %[[SCALE:.*]] = arith.constant 0x4B800000 : f32
// CHECK: %[[SCALED:.*]] = arith.mulf %[[X]], %[[SCALE]] : f32
// CHECK: arith.select %[[SMALL]], %[[SCALED]], %[[X]] : f32
// CHECK-NOT: math.log
// CHECK: %[[SHIFT:.*]] = arith.select %[[SMALL]], %{{.*}}, %{{.*}} : f32
// CHECK: %[[R:.*]] = arith.subf %{{.*}}, %[[SHIFT]] : f32
// CHECK: return %[[R]]
func.func @log_f32(%x: f32) -> f32 {
  %y = math.log %x : f32
  return %y : f32
}

// tanh saturates to +-1 beyond 13 ln 2.

// CHECK-LABEL: func.func @tanh_f32
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-NOT: math.tanh
// CHECK: %[[P:.*]] = arith.divf
// CHECK: %[[POLY:.*]] = arith.select %{{.*}}, %{{.*}}, %[[P]] : f32
// CHECK: %[[ABS:.*]] = math.absf %[[X]] : f32
// CHECK: %[[SAT:.*]] = arith.cmpf ogt, %[[ABS]], %{{.*}} : f32
// CHECK: %[[ONE:.*]] = math.copysign %{{.*}}, %[[X]] : f32
// CHECK: %[[R:.*]] = arith.select %[[SAT]], %[[ONE]], %[[POLY]] : f32
// CHECK: return %[[R]]
func.func @tanh_f32(%x: f32) -> f32 {
  %y = math.tanh %x : f32
  return %y : f32
}

// bf16 is computed in f32.

// CHECK-LABEL: func.func @erf_bf16
// CHECK: %[[WIDE:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK-NOT: math.erf
// CHECK: %[[R:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[R]]
func.func @erf_bf16(%x: bf16) -> bf16 {
  %y = math.erf %x : bf16
  return %y : bf16
}

// expm1 and log1p: their inner exp and log are approximated too.

// CHECK-LABEL: func.func @expm1_log1p
// CHECK-NOT: math.{{(exp|log|fma|floor)}}
// CHECK: return
func.func @expm1_log1p(%x: f32) -> f32 {
  %y = math.expm1 %x : f32
  %z = math.log1p %y : f32
  return %z : f32
}

// Vectors (already vectorized code) work the same way.

// CHECK-LABEL: func.func @exp_vector
// CHECK-NOT: math.exp
// CHECK: arith.fptosi {{.*}} : vector<8xf32> to vector<8xi32>
func.func @exp_vector(%x: vector<8xf32>) -> vector<8xf32> {
  %y = math.exp %x : vector<8xf32>
  return %y : vector<8xf32>
}

// f64 stays a libm call; a model's own floor and fma are kept.

// CHECK-LABEL: func.func @untouched
// CHECK: math.exp %{{.*}} : f64
// CHECK: math.floor %{{.*}} : f32
// CHECK: math.fma %{{.*}} : f32
func.func @untouched(%x: f64, %y: f32) -> (f64, f32) {
  %e = math.exp %x : f64
  %f = math.floor %y : f32
  %g = math.fma %f, %f, %f : f32
  return %e, %g : f64, f32
}

// A reduction's exp is approximated too (it vectorizes once its
// accumulator is promoted), like the elementwise loop next to it.

// CHECK-LABEL: func.func @reduction
// CHECK-NOT: math.exp
// CHECK: return
func.func @reduction(%x: memref<128xf32>, %sum: memref<f32>,
                     %y: memref<128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  scf.for %i = %c0 to %c128 step %c1 {
    %v = memref.load %x[%i] : memref<128xf32>
    %acc = memref.load %sum[] : memref<f32>
    %e = math.exp %v : f32
    %s = arith.addf %acc, %e fastmath<reassoc> : f32
    memref.store %s, %sum[] : memref<f32>
  }
  scf.for %i = %c0 to %c128 step %c1 {
    %v = memref.load %x[%i] : memref<128xf32>
    %e = math.exp %v : f32
    memref.store %e, %y[%i] : memref<128xf32>
  }
  return
}
