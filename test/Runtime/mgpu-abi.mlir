// The runtime functions MLIR 22's GPU lowering (--gpu-to-llvm) and gpu.binary
// translation make host code call, with the signatures the runtime
// implements (lib/Runtime/Cuda.cpp; declared in include/weft/Runtime/Cuda.h).
// If this test fails after an MLIR update, the runtime's entry points must
// follow the new declarations.
// RUN: mlir-opt %s --gpu-to-llvm | mlir-translate --mlir-to-llvmir | FileCheck %s
// RUN: mlir-opt %s --gpu-to-llvm | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=DECL

// PTX reaches mgpuModuleLoadJIT NUL-terminated.
// CHECK: @ptx_binary = internal constant [4 x i8] c"PTX\00"
// Modules are registered by global constructors, before main: the runtime
// only records them then (mgpuModuleLoad does not touch the driver).
// CHECK: @llvm.global_ctors = {{.*}} @kernels_load, {{.*}} @ptx_load

// DECL-DAG: declare ptr @mgpuStreamCreate()
// DECL-DAG: declare void @mgpuStreamSynchronize(ptr)
// DECL-DAG: declare void @mgpuStreamDestroy(ptr)
// DECL-DAG: declare ptr @mgpuMemAlloc(i64, ptr, i8)
// DECL-DAG: declare void @mgpuMemFree(ptr, ptr)
// DECL-DAG: declare void @mgpuMemcpy(ptr, ptr, i64, ptr)
// DECL-DAG: declare void @mgpuMemset32(ptr, i32, i64, ptr)
// DECL-DAG: declare void @mgpuMemset16(ptr, i16, i64, ptr)
// DECL-DAG: declare void @mgpuSetDefaultDevice(i32)
// DECL-DAG: declare ptr @mgpuModuleLoad(ptr, i64)
// DECL-DAG: declare ptr @mgpuModuleLoadJIT(ptr, i32)
// DECL-DAG: declare void @mgpuModuleUnload(ptr)
// DECL-DAG: declare ptr @mgpuModuleGetFunction(ptr, ptr)
// DECL-DAG: declare void @mgpuLaunchKernel(ptr, i64, i64, i64, i64, i64, i64, i32, ptr, ptr, ptr, i64)
// DECL-DAG: declare void @mgpuLaunchClusterKernel(ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i32, ptr, ptr, ptr)

module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90">, "BLOB">]
  gpu.binary @ptx [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]

  // CHECK-LABEL: define void @step(
  func.func @step(%n: index, %x: f32, %h: f16, %device: i32) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    // CHECK: call void @mgpuSetDefaultDevice(
    gpu.set_default_device %device
    // Every stream the code uses comes from mgpuStreamCreate (the runtime
    // returns its one step stream).
    // CHECK: %[[S:.*]] = call ptr @mgpuStreamCreate()
    %t0 = gpu.wait async
    // CHECK: call ptr @mgpuMemAlloc({{.*}}, ptr %[[S]], i8 0)
    %a, %t1 = gpu.alloc async [%t0] (%n) : memref<?xf32>
    %b, %t2 = gpu.alloc async [%t1] (%n) : memref<?xf16>
    // CHECK: call void @mgpuMemset32({{.*}}, ptr %[[S]])
    %t3 = gpu.memset async [%t2] %a, %x : memref<?xf32>, f32
    // CHECK: call void @mgpuMemset16({{.*}}, ptr %[[S]])
    %t4 = gpu.memset async [%t3] %b, %h : memref<?xf16>, f16
    %a2, %t5 = gpu.alloc async [%t4] (%n) : memref<?xf32>
    // CHECK: call void @mgpuMemcpy({{.*}}, ptr %[[S]])
    %t6 = gpu.memcpy async [%t5] %a2, %a : memref<?xf32>, memref<?xf32>
    // The function is asked for before every launch (the runtime caches it).
    // CHECK: %[[F:.*]] = call ptr @mgpuModuleGetFunction(ptr %{{.*}}, ptr @kernels_kernel_name)
    // CHECK: call void @mgpuLaunchKernel(ptr %[[F]], i64 2, i64 1, i64 1, i64 2, i64 1, i64 1, i32 0, ptr %[[S]], ptr %{{.*}}, ptr null, i64 1)
    %t7 = gpu.launch_func async [%t6] @kernels::@kernel blocks in (%c2, %c1, %c1) threads in (%c2, %c1, %c1) args(%n : index)
    // CHECK: call void @mgpuMemFree({{.*}}, ptr %[[S]])
    %t8 = gpu.dealloc async [%t7] %a : memref<?xf32>
    // CHECK: call void @mgpuStreamSynchronize(ptr %[[S]])
    // CHECK: call void @mgpuStreamDestroy(ptr %[[S]])
    gpu.wait [%t8]
    // A synchronous launch gets a stream of its own, synchronized and
    // destroyed after it.
    // CHECK: %[[S2:.*]] = call ptr @mgpuStreamCreate()
    // CHECK: call void @mgpuLaunchClusterKernel(ptr %{{.*}}, i64 2, i64 1, i64 1, i64 2, i64 1, i64 1, i64 1, i64 1, i64 1, i32 0, ptr %[[S2]], ptr %{{.*}}, ptr null)
    // CHECK: call void @mgpuStreamSynchronize(ptr %[[S2]])
    // CHECK: call void @mgpuStreamDestroy(ptr %[[S2]])
    gpu.launch_func @kernels::@kernel clusters in (%c2, %c1, %c1) blocks in (%c2, %c1, %c1) threads in (%c1, %c1, %c1) args(%n : index)
    gpu.launch_func @ptx::@kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%n : index)
    return
  }
}

// CHECK-LABEL: define internal void @kernels_load()
// CHECK: call ptr @mgpuModuleLoad(ptr @kernels_binary, i64 4)
// CHECK-LABEL: define internal void @kernels_unload()
// CHECK: call void @mgpuModuleUnload(
// CHECK-LABEL: define internal void @ptx_load()
// CHECK: call ptr @mgpuModuleLoadJIT(ptr @ptx_binary, i32
