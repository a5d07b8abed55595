/* kbench.c: GB/s of the CPU table's streaming ops on every code path.
 *
 *   kbench [-n ELEMENTS] [-t SECONDS]
 *
 * Not a test: it asserts nothing and prints what it measured. For each path
 * this CPU has (scalar, avx2, avx512: the table gs_kernels_cpu() builds
 * under GS_ISA=...), each op runs on n elements (default 16M, far
 * beyond the caches, and n/256 = 64K, which fits in L2) repeatedly for about
 * t seconds (default 0.3); the best repetition is reported as bytes moved
 * (read + written, by the op's definition) per second. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/kernels.h"

typedef struct bufs {
  float *a, *b, *c;
  uint16_t *h;
} bufs;

enum { OP_F32_F16, OP_F16_F32, OP_F32_BF16, OP_BF16_F32, OP_ADD, OP_ADD_F16, OP_AXPY,
       OP_SGD, OP_RELU, OP_NONFINITE, OP_COUNT };
static const char *op_names[OP_COUNT] = {"fp32->fp16", "fp16->fp32", "fp32->bf16", "bf16->fp32",
                                         "add", "add_lp fp16", "axpy", "sgd (momentum, wd)",
                                         "relu", "nonfinite fp32"};
/* bytes read + written per element */
static const double op_bytes[OP_COUNT] = {6, 6, 6, 6, 12, 10, 12, 20, 8, 4};

static size_t sink;

static void run(gs_kernels *k, int op, size_t n, bufs *m) {
  gs_sgd h = {0.01f, 0.9f, 1e-4f};
  switch (op) {
  case OP_F32_F16: k->convert(k, GS_F16, m->h, GS_F32, m->a, n); break;
  case OP_F16_F32: k->convert(k, GS_F32, m->b, GS_F16, m->h, n); break;
  case OP_F32_BF16: k->convert(k, GS_BF16, m->h, GS_F32, m->a, n); break;
  case OP_BF16_F32: k->convert(k, GS_F32, m->b, GS_BF16, m->h, n); break;
  case OP_ADD: k->add(k, n, m->b, m->a); break;
  case OP_ADD_F16: k->add_lp(k, GS_F16, n, m->b, m->h); break;
  case OP_AXPY: k->axpy(k, n, 1e-3f, m->a, m->b); break;
  case OP_SGD: k->sgd(k, n, m->b, m->a, m->c, h, false); break;
  case OP_RELU: k->relu(k, n, m->a, m->b); break;
  case OP_NONFINITE: sink += k->nonfinite(k, GS_F32, n, m->a); break;
  }
}

static double measure(gs_kernels *k, int op, size_t n, bufs *m, double seconds) {
  double best = 1e30, start = gs_now();
  int reps = 0;
  while (reps < 3 || gs_now() - start < seconds) {
    double t0 = gs_now();
    run(k, op, n, m);
    double t = gs_now() - t0;
    if (t < best) best = t;
    reps++;
  }
  return op_bytes[op] * (double)n / best / 1e9;
}

int main(int argc, char **argv) {
  size_t n = (size_t)16 << 20;
  double seconds = 0.3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "-t") && i + 1 < argc) seconds = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: kbench [-n ELEMENTS] [-t SECONDS]\n");
      return 2;
    }
  }
  if (n < 256) n = 256;
  gs_err e = {0};
  bufs m;
  m.a = gs_alloc(n * 4, &e);
  m.b = gs_alloc(n * 4, &e);
  m.c = gs_alloc(n * 4, &e);
  m.h = gs_alloc(n * 2, &e);
  if (!m.a || !m.b || !m.c || !m.h) {
    fprintf(stderr, "kbench: %s\n", e.msg);
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    m.a[i] = (float)((i * 2654435761u) % 2001) * 1e-3f - 1.0f;
    m.b[i] = 0.5f;
    m.c[i] = 0.0f;
  }
  size_t sizes[2] = {n, n / 256};
  gs_kernels *ks[GS_ISA_COUNT] = {0};
  printf("GB/s (bytes read + written per second, best of repetitions over %.1f s)\n", seconds);
  printf("%-20s %-10s", "op", "elements");
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    if (!gs_cpu_isa_supported((gs_cpu_isa)isa)) continue;
    setenv("GS_ISA", gs_cpu_isa_name((gs_cpu_isa)isa), 1);
    ks[isa] = gs_kernels_cpu(1, &e);
    if (!ks[isa]) {
      fprintf(stderr, "kbench: %s\n", e.msg);
      return 1;
    }
    printf(" %9s", gs_cpu_isa_name((gs_cpu_isa)isa));
  }
  unsetenv("GS_ISA");
  printf("\n");
  for (int op = 0; op < OP_COUNT; op++)
    for (int s = 0; s < 2; s++) {
      printf("%-20s %-10zu", op_names[op], sizes[s]);
      for (int isa = 0; isa < GS_ISA_COUNT; isa++)
        if (ks[isa]) printf(" %9.1f", measure(ks[isa], op, sizes[s], &m, seconds));
      printf("\n");
      fflush(stdout);
    }
  for (int isa = 0; isa < GS_ISA_COUNT; isa++)
    if (ks[isa]) ks[isa]->destroy(ks[isa]);
  gs_free(m.a);
  gs_free(m.b);
  gs_free(m.c);
  gs_free(m.h);
  return sink == (size_t)-1;
}
