// RUN: weft-opt %s --weft-dump-kernel-outputs | FileCheck %s

// After each kernel call, one dump per buffer the kernel writes (through a
// subview too), none for what it only reads nor for the step's workspace.

// CHECK: func.func private @weft_rt_dump_kernel_output(!llvm.ptr, i64, i64, !llvm.ptr, i32, !llvm.ptr)

// CHECK-LABEL: func.func @train_step
func.func @train_step(%x: memref<4x8xf32>, %y: memref<4x8xf32>,
                      %z: memref<4x16xbf16>, %ws: memref<256xi8> {weft.workspace}) {
  // CHECK: call @train_step.fused_0
  // CHECK: %[[NAME:.*]] = llvm.mlir.addressof @[[NAME0:__weft_dump_name_[0-9]+]]
  // CHECK: %[[LAYOUT:.*]] = llvm.mlir.addressof @[[LAYOUT0:__weft_dump_layout_[0-9]+]]
  // CHECK: %[[CALL:.*]] = arith.constant 0 : i64
  // CHECK: %[[OPERAND:.*]] = arith.constant 1 : i64
  // CHECK: %[[F32:.*]] = arith.constant 1 : i32
  // CHECK: call @weft_rt_dump_kernel_output(%[[NAME]], %[[CALL]], %[[OPERAND]], %{{.*}}, %[[F32]], %[[LAYOUT]])
  // CHECK-NOT: call @weft_rt_dump_kernel_output
  call @train_step.fused_0(%x, %y, %ws) : (memref<4x8xf32>, memref<4x8xf32>, memref<256xi8>) -> ()
  // The strided view of a bf16 buffer: its layout and pointer offset.
  // CHECK: call @train_step.kernel_1
  // CHECK: %[[BASE:.*]], %[[OFFSET:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata
  // CHECK: %[[OFF64:.*]] = arith.index_cast %[[OFFSET]] : index to i64
  // CHECK: %[[PTR:.*]] = llvm.getelementptr %{{.*}}[%[[OFF64]]] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
  // CHECK: llvm.mlir.addressof @[[NAME1:__weft_dump_name_[0-9]+]]
  // CHECK: llvm.mlir.addressof @[[LAYOUT1:__weft_dump_layout_[0-9]+]]
  // CHECK: %[[BF16:.*]] = arith.constant 3 : i32
  // CHECK: call @weft_rt_dump_kernel_output(%{{.*}}, %{{.*}}, %{{.*}}, %[[PTR]], %[[BF16]], %{{.*}})
  // CHECK-NOT: call @weft_rt_dump_kernel_output
  // CHECK: return
  %v = memref.subview %z[0, 8] [4, 4] [1, 1] : memref<4x16xbf16> to memref<4x4xbf16, strided<[16, 1], offset: 8>>
  call @train_step.kernel_1(%x, %v) : (memref<4x8xf32>, memref<4x4xbf16, strided<[16, 1], offset: 8>>) -> ()
  return
}

func.func private @train_step.fused_0(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %ws: memref<256xi8>) {
  %c0 = arith.constant 0 : index
  %scratch = memref.view %ws[%c0][] : memref<256xi8> to memref<8xf32>
  scf.forall (%i) in (4) {
    %row = memref.subview %a[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    memref.copy %row, %scratch : memref<8xf32, strided<[1], offset: ?>> to memref<8xf32>
    %out = memref.subview %b[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    memref.copy %scratch, %out : memref<8xf32> to memref<8xf32, strided<[1], offset: ?>>
  }
  return
}

func.func private @train_step.kernel_1(%a: memref<4x8xf32>, %out: memref<4x4xbf16, strided<[16, 1], offset: 8>>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0, %c0] : memref<4x8xf32>
  %t = arith.truncf %v : f32 to bf16
  linalg.fill ins(%t : bf16) outs(%out : memref<4x4xbf16, strided<[16, 1], offset: 8>>)
  return
}

// The kernel names and [rank, sizes..., strides...] as constants.
// CHECK-DAG: llvm.mlir.global internal constant @[[NAME0]]("train_step.fused_0\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[LAYOUT0]](dense<[2, 4, 8, 8, 1]> : tensor<5xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[NAME1]]("train_step.kernel_1\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[LAYOUT1]](dense<[2, 4, 4, 16, 1]> : tensor<5xi64>)
