// RUN: weft-opt %s --weft-scope-noalias-accesses | FileCheck %s

// Accesses through noalias arguments %a and %b get their own scope and do
// not alias the other's; one through %c (not noalias) aliases neither
// scope; one through a pointer loaded from memory gets no metadata. The
// accesses inside the OpenMP region are scoped too: that is where they
// end up after the region is outlined.

// CHECK-DAG: #[[DOMAIN:.*]] = #llvm.alias_scope_domain<{{.*}}description = "copy">
// CHECK-DAG: #[[A:.*]] = #llvm.alias_scope<{{.*}}domain = #[[DOMAIN]], description = "arg0">
// CHECK-DAG: #[[B:.*]] = #llvm.alias_scope<{{.*}}domain = #[[DOMAIN]], description = "arg1">

// CHECK: llvm.func @copy
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[A]]], noalias_scopes = [#[[B]]]}
// CHECK: llvm.store %{{.*}} {alias_scopes = [#[[B]]], noalias_scopes = [#[[A]]]}
// CHECK: llvm.load %{{.*}} {noalias_scopes = [#[[A]], #[[B]]]}
// CHECK: %[[P:.*]] = llvm.load %{{.*}} {noalias_scopes = [#[[A]], #[[B]]]} : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.store %{{.*}}, %[[P]] : f32, !llvm.ptr
// CHECK: omp.parallel
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[A]]], noalias_scopes = [#[[B]]]}
// CHECK: llvm.store %{{.*}} {alias_scopes = [#[[B]]], noalias_scopes = [#[[A]]]}
llvm.func @copy(%a: !llvm.ptr {llvm.noalias}, %b: !llvm.ptr {llvm.noalias},
                %c: !llvm.ptr, %i: i64) {
  %pa = llvm.getelementptr %a[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %pa : !llvm.ptr -> f32
  %pb = llvm.getelementptr %b[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %pb : f32, !llvm.ptr
  %w = llvm.load %c : !llvm.ptr -> f32
  %p = llvm.load %c : !llvm.ptr -> !llvm.ptr
  llvm.store %w, %p : f32, !llvm.ptr
  omp.parallel {
    %pa2 = llvm.getelementptr %pa[1] : (!llvm.ptr) -> !llvm.ptr, f32
    %v2 = llvm.load %pa2 : !llvm.ptr -> f32
    %pb2 = llvm.getelementptr %pb[1] : (!llvm.ptr) -> !llvm.ptr, f32
    llvm.store %v2, %pb2 : f32, !llvm.ptr
    omp.terminator
  }
  llvm.return
}

// No noalias argument: nothing to scope.
// CHECK-LABEL: llvm.func @plain
// CHECK-NOT: alias_scopes
// CHECK-NOT: noalias_scopes
// CHECK: llvm.return
llvm.func @plain(%a: !llvm.ptr, %b: !llvm.ptr) {
  %v = llvm.load %a : !llvm.ptr -> f32
  llvm.store %v, %b : f32, !llvm.ptr
  llvm.return
}
