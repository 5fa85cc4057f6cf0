// RUN: weft-opt %s --weft-bf16-storage-as-i16 | FileCheck %s

// After arith-expand, bf16 is loaded, bit-cast to i16, rounded in integer
// arithmetic, bit-cast back, selected and stored: all of it becomes i16,
// constants keep their bits, and the casts between i16 and bf16 vanish.

// CHECK-LABEL: llvm.func @relu_grad
// CHECK-NOT: bf16
// CHECK: %[[ZERO:.*]] = llvm.mlir.constant(0 : i16) : i16
// CHECK: %[[ONE:.*]] = llvm.mlir.constant(16256 : i16) : i16
// CHECK: %[[X:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i16
// CHECK: %[[S:.*]] = llvm.select %{{.*}}, %[[X]], %[[ZERO]] : i1, i16
// CHECK: llvm.br ^bb1(%[[S]] : i16)
// CHECK: ^bb1(%[[Y:.*]]: i16):
// CHECK: llvm.store %[[Y]], %{{.*}} : i16, !llvm.ptr
// CHECK: llvm.store %[[ONE]], %{{.*}} : i16, !llvm.ptr
// CHECK: llvm.return
llvm.func @relu_grad(%x: !llvm.ptr, %y: !llvm.ptr, %c: i1) {
  %zero = llvm.mlir.constant(0.0 : bf16) : bf16
  %one = llvm.mlir.constant(1.0 : bf16) : bf16
  %v = llvm.load %x : !llvm.ptr -> bf16
  %bits = llvm.bitcast %v : bf16 to i16
  %back = llvm.bitcast %bits : i16 to bf16
  %s = llvm.select %c, %back, %zero : i1, bf16
  llvm.br ^bb1(%s : bf16)
^bb1(%r: bf16):
  llvm.store %r, %y : bf16, !llvm.ptr
  %p = llvm.getelementptr %y[1] : (!llvm.ptr) -> !llvm.ptr, bf16
  llvm.store %one, %p : bf16, !llvm.ptr
  llvm.return
}

// Arithmetic on bf16 (and a call passing it by value) keeps the function
// as it is.
// CHECK-LABEL: llvm.func @computes
// CHECK: llvm.fadd %{{.*}} : bf16
llvm.func @computes(%x: !llvm.ptr) {
  %v = llvm.load %x : !llvm.ptr -> bf16
  %w = llvm.fadd %v, %v : bf16
  llvm.store %w, %x : bf16, !llvm.ptr
  llvm.return
}
// CHECK-LABEL: llvm.func @passes
// CHECK: llvm.call @takes(%{{.*}}) : (bf16) -> ()
llvm.func @takes(bf16)
llvm.func @passes(%x: !llvm.ptr) {
  %v = llvm.load %x : !llvm.ptr -> bf16
  llvm.call @takes(%v) : (bf16) -> ()
  llvm.return
}
