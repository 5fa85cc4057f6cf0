/*===- sgemm_peak.c - OpenBLAS SGEMM throughput ---------------------------===*\
|*                                                                            *|
|* Part of the Weft project (bench/gemm.py).                                  *|
|*                                                                            *|
|* Usage: sgemm_peak THREADS MxNxK[:TT]...                                    *|
|* For each shape (row-major C = op(A) op(B), op given by the two letters     *|
|* N/T, default NN), runs cblas_sgemm with THREADS OpenBLAS threads until     *|
|* half a second has passed (after one warm-up call) and prints              *|
|*   <shape> <GFLOP/s> <microseconds per call>                                *|
|* SGEMM_LIBRARY=onednn times oneDNN's dnnl_sgemm (dlopen'ed libdnnl.so.2,   *|
|* the library Weft's runtime prefers) instead, on THREADS OpenMP threads.    *|
\*===----------------------------------------------------------------------===*/

#include <cblas.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float *filled(size_t n) {
  float *p = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
  for (size_t i = 0; i < n; ++i)
    p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  return p;
}

typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float,
                             const float *, int64_t, const float *, int64_t,
                             float, float *, int64_t);
static dnnl_sgemm_fn onednn;

static void sgemm(char ta, char tb, int m, int n, int k, const float *a,
                  int lda, const float *b, int ldb, float *c) {
  if (onednn) {
    onednn(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans,
              tb == 'T' ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, 0.0f, c, n);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s THREADS MxNxK[:TT]...\n", argv[0]);
    return 1;
  }
  openblas_set_num_threads(atoi(argv[1]));
  const char *library = getenv("SGEMM_LIBRARY");
  if (library && strcmp(library, "onednn") == 0) {
    void *lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    onednn = lib ? (dnnl_sgemm_fn)dlsym(lib, "dnnl_sgemm") : NULL;
    void (*setThreads)(int) =
        lib ? (void (*)(int))dlsym(lib, "omp_set_num_threads") : NULL;
    if (!onednn || !setThreads) {
      fprintf(stderr, "SGEMM_LIBRARY=onednn: libdnnl.so.2 does not load "
                      "(Debian: libdnnl2)\n");
      return 1;
    }
    setThreads(atoi(argv[1]));
  }
  for (int i = 2; i < argc; ++i) {
    int m, n, k;
    char ta = 'N', tb = 'N';
    if (sscanf(argv[i], "%dx%dx%d:%c%c", &m, &n, &k, &ta, &tb) < 3) {
      fprintf(stderr, "bad shape %s\n", argv[i]);
      return 1;
    }
    float *a = filled((size_t)m * k), *b = filled((size_t)k * n);
    float *c = filled((size_t)m * n);
    int lda = ta == 'T' ? m : k, ldb = tb == 'T' ? k : n;
    sgemm(ta, tb, m, n, k, a, lda, b, ldb, c);
    long calls = 0;
    double start = now(), elapsed;
    do {
      sgemm(ta, tb, m, n, k, a, lda, b, ldb, c);
      ++calls;
      elapsed = now() - start;
    } while (elapsed < 0.5);
    printf("%s %.2f %.2f\n", argv[i], 2.0 * m * n * k * calls / elapsed / 1e9,
           1e6 * elapsed / calls);
    fflush(stdout);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
