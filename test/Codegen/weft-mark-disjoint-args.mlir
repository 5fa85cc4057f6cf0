// RUN: weft-opt %s --weft-mark-disjoint-args | FileCheck %s

// Workspace views at disjoint offsets are noalias; the step's other
// arguments may overlap each other (a caller may pass one buffer twice) but
// not the workspace. A kernel called from two sites is marked only where
// every site agrees; a kernel called from a kernel inherits its caller's
// places.

// Two disjoint workspace ranges: both marked.
// CHECK-LABEL: func.func private @train_step.kernel_0
// CHECK-SAME: (%{{.*}}: memref<16xf32> {llvm.noalias}, %{{.*}}: memref<16xf32> {llvm.noalias})
func.func private @train_step.kernel_0(%a: memref<16xf32>, %b: memref<16xf32>) {
  return
}

// Two step arguments and a workspace view: only the view is marked.
// CHECK-LABEL: func.func private @train_step.kernel_1
// CHECK-SAME: (%{{.*}}: memref<4x8xf32>, %{{.*}}: memref<4x8xf32>, %{{.*}}: memref<16xf32> {llvm.noalias})
func.func private @train_step.kernel_1(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %v: memref<16xf32>) {
  return
}

// Overlapping views (bytes 0-64 and 32-96) at the second call site: neither
// is marked, though the first call site's are disjoint.
// CHECK-LABEL: func.func private @train_step.kernel_2
// CHECK-SAME: (%{{.*}}: memref<16xf32>, %{{.*}}: memref<16xf32>)
// CHECK-NOT: llvm.noalias
// CHECK: return
func.func private @train_step.kernel_2(%a: memref<16xf32>, %b: memref<16xf32>) {
  return
}

// Called by kernel_4 with its arguments: a step argument and a reshaped
// workspace view stay disjoint; the same buffer passed twice does not.
// CHECK-LABEL: func.func private @train_step.rows_3
// CHECK-SAME: (%{{.*}}: memref<4x8xf32> {llvm.noalias}, %{{.*}}: memref<32xf32> {llvm.noalias})
func.func private @train_step.rows_3(%x: memref<4x8xf32>, %v: memref<32xf32>) {
  return
}
// CHECK-LABEL: func.func private @train_step.kernel_4
// CHECK-SAME: (%{{.*}}: memref<4x8xf32> {llvm.noalias}, %{{.*}}: memref<4x8xf32> {llvm.noalias})
func.func private @train_step.kernel_4(%x: memref<4x8xf32>, %v: memref<4x8xf32>) {
  %flat = memref.collapse_shape %v [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  call @train_step.rows_3(%x, %flat) : (memref<4x8xf32>, memref<32xf32>) -> ()
  return
}
// CHECK-LABEL: func.func private @train_step.kernel_5
// CHECK-SAME: (%{{.*}}: memref<16xf32>, %{{.*}}: memref<16xf32>)
// CHECK-NOT: llvm.noalias
// CHECK: return
func.func private @train_step.kernel_5(%a: memref<16xf32>, %b: memref<16xf32>) {
  return
}
// A view at an offset not known at compile time may be anywhere in the
// workspace.
// CHECK-LABEL: func.func private @train_step.kernel_6
// CHECK-SAME: (%{{.*}}: memref<16xf32>, %{{.*}}: memref<16xf32>)
// CHECK-NOT: llvm.noalias
// CHECK: return
func.func private @train_step.kernel_6(%a: memref<16xf32>, %b: memref<16xf32>) {
  return
}

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: llvm.noalias
// CHECK: return
func.func @train_step(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %n: index,
                      %ws: memref<256xi8> {weft.workspace}) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %v0 = memref.view %ws[%c0][] : memref<256xi8> to memref<16xf32>
  %v1 = memref.view %ws[%c64][] : memref<256xi8> to memref<16xf32>
  %v2 = memref.view %ws[%c32][] : memref<256xi8> to memref<16xf32>
  %v3 = memref.view %ws[%c128][] : memref<256xi8> to memref<4x8xf32>
  %vn = memref.view %ws[%n][] : memref<256xi8> to memref<16xf32>
  call @train_step.kernel_0(%v0, %v1) : (memref<16xf32>, memref<16xf32>) -> ()
  call @train_step.kernel_1(%x, %y, %v0) : (memref<4x8xf32>, memref<4x8xf32>, memref<16xf32>) -> ()
  call @train_step.kernel_2(%v0, %v1) : (memref<16xf32>, memref<16xf32>) -> ()
  call @train_step.kernel_2(%v0, %v2) : (memref<16xf32>, memref<16xf32>) -> ()
  call @train_step.kernel_4(%x, %v3) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
  call @train_step.kernel_5(%v1, %v1) : (memref<16xf32>, memref<16xf32>) -> ()
  call @train_step.kernel_6(%v0, %vn) : (memref<16xf32>, memref<16xf32>) -> ()
  return
}
