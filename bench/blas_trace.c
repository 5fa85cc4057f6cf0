/*===- blas_trace.c - Record every SGEMM call of a process ----------------===*\
|*                                                                            *|
|* Part of the Weft project (bench/gemm.py).                                  *|
|*                                                                            *|
|* An LD_PRELOAD shim over OpenBLAS: wraps cblas_sgemm (what Weft's runtime   *|
|* calls) and sgemm_ (what PyTorch calls through libblas.so.3), times each    *|
|* call with CLOCK_MONOTONIC, and at exit writes one line per call to the     *|
|* file named by $BLAS_TRACE:                                                 *|
|*                                                                            *|
|*   <api> <transA> <transB> <M> <N> <K> <nanoseconds>                        *|
|*                                                                            *|
|* with api "c" (cblas_sgemm) or "f" (sgemm_). The calls themselves go to the *|
|* real OpenBLAS (see realSymbol).                                            *|
\*===----------------------------------------------------------------------===*/

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  char api, transA, transB;
  int m, n, k;
  long long ns;
} Call;

enum { kCapacity = 1 << 20 };
static Call *calls;
static atomic_long numCalls;

static long long nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void record(char api, char ta, char tb, int m, int n, int k,
                   long long ns) {
  long i = atomic_fetch_add(&numCalls, 1);
  if (calls && i < kCapacity)
    calls[i] = (Call){api, ta, tb, m, n, k, ns};
}

__attribute__((constructor)) static void traceInit(void) {
  calls = malloc(sizeof(Call) * kCapacity);
}

__attribute__((destructor)) static void traceWrite(void) {
  const char *path = getenv("BLAS_TRACE");
  if (!path || !calls)
    return;
  FILE *f = fopen(path, "w");
  if (!f)
    return;
  long n = atomic_load(&numCalls);
  if (n > kCapacity) {
    fprintf(f, "# overflow %ld\n", n);
    n = kCapacity;
  }
  for (long i = 0; i < n; ++i)
    fprintf(f, "%c %c %c %d %d %d %lld\n", calls[i].api, calls[i].transA,
            calls[i].transB, calls[i].m, calls[i].n, calls[i].k, calls[i].ns);
  fclose(f);
}

/* The real function: the next definition in the global scope, or, for a
   process that loaded OpenBLAS privately (PyTorch's extension modules are
   dlopen'ed RTLD_LOCAL), the definition in libblas.so.3 / libopenblas.so.0. */
static void *realSymbol(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  const char *libs[] = {"libblas.so.3", "libopenblas.so.0"};
  for (int i = 0; !f && i < 2; ++i) {
    void *lib = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
    if (lib)
      f = dlsym(lib, name);
  }
  if (!f) {
    fprintf(stderr, "blas_trace: cannot find the real %s\n", name);
    abort();
  }
  return f;
}

typedef void CblasSgemm(int, int, int, int, int, int, float, const float *,
                        int, const float *, int, float, float *, int);
typedef void FortranSgemm(const char *, const char *, const int *, const int *,
                          const int *, const float *, const float *,
                          const int *, const float *, const int *,
                          const float *, float *, const int *);

void cblas_sgemm(int order, int transA, int transB, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc) {
  static CblasSgemm *real;
  if (!real)
    real = (CblasSgemm *)realSymbol("cblas_sgemm");
  long long start = nowNs();
  real(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  /* CblasNoTrans is 111, CblasTrans 112. */
  record('c', transA == 111 ? 'N' : 'T', transB == 111 ? 'N' : 'T', m, n, k,
         nowNs() - start);
}

void sgemm_(const char *transA, const char *transB, const int *m, const int *n,
            const int *k, const float *alpha, const float *a, const int *lda,
            const float *b, const int *ldb, const float *beta, float *c,
            const int *ldc) {
  static FortranSgemm *real;
  if (!real)
    real = (FortranSgemm *)realSymbol("sgemm_");
  long long start = nowNs();
  real(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  record('f', (*transA == 'N' || *transA == 'n') ? 'N' : 'T',
         (*transB == 'N' || *transB == 'n') ? 'N' : 'T', *m, *n, *k,
         nowNs() - start);
}
