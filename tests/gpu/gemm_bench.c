/* gemm_bench.c: TFLOP/s of the CUDA table's GEMMs on the shapes an MLP's
 * training step runs, for comparison with torch.matmul on the same GPU
 * (bench/peers/torch_gemm.py prints the same table for the same shapes).
 *
 *   gemm_bench [--model mlp:784-2048-2048-10] [--batch 64,1024] [--iters N]
 *              [--dtype fp32|fp16|bf16]
 *
 * Not a test: it asserts nothing and prints what it measured. For each
 * layer (in -> out) and batch B the three GEMMs of a step, row-major as
 * worker/seq.c calls them: forward y = x W^T (B x out x in), backward
 * dx = dy W (B x in x out) and dW = dy^T x (out x in x B). Each runs
 * --iters times back to back after 5 untimed ones, then one sync: the
 * wall time of the batch over iters, as torch_gemm.py times torch.matmul
 * (queue, then torch.cuda.synchronize). fp32 is exact fp32 (no TF32, as
 * the table and PyTorch's default); fp16/bf16 are gemm_lp (fp32
 * accumulation, fp32 C). Exit 77 without a GPU.
 *
 * Then, for fp32, the step's other ops at each batch, timed the same way:
 * what a training step spends beside the GEMMs (bias, ReLU, the loss,
 * whose result the host waits for, and the optimizer over every
 * parameter). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_list(const char *s, int *out, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v <= 0 || v > (1 << 24)) return -1;
    out[n++] = (int)v;
    s = *end == ',' || *end == '-' ? end + 1 : end;
    if (*end && *end != ',' && *end != '-') return -1;
  }
  return n;
}

int main(int argc, char **argv) {
  const char *model = "mlp:784-2048-2048-10", *batches = "64,1024", *dts = "fp32";
  int iters = 50;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batches = argv[++i];
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dts = argv[++i];
    else {
      fprintf(stderr, "usage: gemm_bench [--model mlp:IN-..-OUT] [--batch B,B] [--iters N] "
                      "[--dtype fp32|fp16|bf16]\n");
      return 2;
    }
  }
  int sizes[16], bs[8];
  int nsizes = strncmp(model, "mlp:", 4) ? -1 : parse_list(model + 4, sizes, 16);
  int nb = parse_list(batches, bs, 8);
  gs_dtype t = GS_F32;
  if (!strcmp(dts, "fp16")) t = GS_F16;
  else if (!strcmp(dts, "bf16")) t = GS_BF16;
  else if (strcmp(dts, "fp32")) nsizes = -1;
  if (nsizes < 2 || nb < 1 || iters < 1) {
    fprintf(stderr, "gemm_bench: bad --model (mlp:IN-..-OUT), --batch, --iters or --dtype\n");
    return 2;
  }
  if (gs_cuda_device_count() <= 0) {
    printf("SKIP: no usable CUDA GPU\n");
    return 77;
  }
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cuda(0, &e);
  if (!k) {
    fprintf(stderr, "gemm_bench: %s\n", e.msg);
    return 1;
  }
  int maxd = 0, maxb = 0;
  for (int i = 0; i < nsizes; i++) maxd = sizes[i] > maxd ? sizes[i] : maxd;
  for (int i = 0; i < nb; i++) maxb = bs[i] > maxb ? bs[i] : maxb;
  size_t big = (size_t)maxd * (maxd > maxb ? maxd : maxb);
  size_t es = gs_dtype_size(t);
  void *a = k->alloc(k, big * es), *b = k->alloc(k, big * es);
  float *c = k->alloc(k, big * sizeof(float));
  if (!a || !b || !c || k->sync(k, &e)) {
    fprintf(stderr, "gemm_bench: allocating %zu elements: %s\n", big, e.msg);
    return 1;
  }
  printf("gradsync gemm (%s, %s): %d iterations after 5 untimed, wall time / iterations\n",
         dts, t == GS_F32 ? "fp32 exact, no TF32" : "fp32 accumulation, fp32 C", iters);
  printf("%-6s %-10s %6s %6s %6s %10s %9s\n", "batch", "gemm", "m", "n", "k", "us", "TFLOP/s");
  for (int bi = 0; bi < nb; bi++) {
    int B = bs[bi];
    double total_flop = 0, total_s = 0;
    for (int l = 0; l + 1 < nsizes; l++) {
      int in = sizes[l], out = sizes[l + 1];
      struct { const char *name; bool ta, tb; int m, n, kk, lda, ldb; } g[3] = {
          {"forward", false, true, B, out, in, in, in},
          {"dx", false, false, B, in, out, out, in},
          {"dW", true, false, out, in, B, out, in}};
      for (int j = 0; j < 3; j++) {
        if (l == 0 && j == 1) continue;  /* no dx for the input layer */
        double t0 = 0;
        for (int it = 0; it < iters + 5; it++) {
          if (it == 5) {
            if (k->sync(k, &e)) break;
            t0 = now();
          }
          if (t == GS_F32)
            k->gemm(k, g[j].ta, g[j].tb, g[j].m, g[j].n, g[j].kk, 1.0f, a, g[j].lda, b,
                    g[j].ldb, 0.0f, c, g[j].n);
          else
            k->gemm_lp(k, t, g[j].ta, g[j].tb, g[j].m, g[j].n, g[j].kk, 1.0f, a, g[j].lda, b,
                       g[j].ldb, 0.0f, c, g[j].n);
        }
        if (k->sync(k, &e)) {
          fprintf(stderr, "gemm_bench: %s: %s\n", g[j].name, e.msg);
          return 1;
        }
        double s = (now() - t0) / iters, flop = 2.0 * g[j].m * g[j].n * (double)g[j].kk;
        total_flop += flop;
        total_s += s;
        char name[32];
        snprintf(name, sizeof name, "%s.%d", g[j].name, l);
        printf("%-6d %-10s %6d %6d %6d %10.1f %9.2f\n", B, name, g[j].m, g[j].n, g[j].kk,
               s * 1e6, flop / s / 1e12);
      }
    }
    printf("%-6d %-10s %6s %6s %6s %10.1f %9.2f\n", B, "step", "", "", "", total_s * 1e6,
           total_flop / total_s / 1e12);
  }
  if (t == GS_F32) {
    size_t nparams = 0;
    for (int l = 0; l + 1 < nsizes; l++) nparams += (size_t)sizes[l + 1] * (sizes[l] + 1);
    float *p = k->alloc(k, nparams * 4), *g = k->alloc(k, nparams * 4),
          *mom = k->alloc(k, nparams * 4);
    int32_t *labels = k->alloc(k, (size_t)maxb * 4);
    if (!p || !g || !mom || !labels || k->sync(k, &e)) {
      fprintf(stderr, "gemm_bench: allocating the ops' buffers: %s\n", e.msg);
      return 1;
    }
    printf("\nthe step's other ops (fp32): %d iterations after 5 untimed, wall time / iterations\n",
           iters);
    printf("%-6s %-22s %10s\n", "batch", "op", "us");
    for (int bi = 0; bi < nb; bi++) {
      int B = bs[bi], classes = sizes[nsizes - 1];
      double total = 0;
      for (int op = 0; op < 7; op++) {
        static const char *names[] = {"bias_add (all layers)", "relu (hidden layers)",
                                      "relu_grad",             "bias_grad (all layers)",
                                      "xent_forward (waits)",  "xent_backward",
                                      "sgd (momentum)"};
        double t0 = 0;
        for (int it = 0; it < iters + 5; it++) {
          if (it == 5) {
            k->sync(k, &e);
            t0 = now();
          }
          for (int l = 0; l + 1 < nsizes; l++) {
            int out = sizes[l + 1];
            size_t ny = (size_t)B * out;
            bool hidden = l + 2 < nsizes;
            if (op == 0) k->bias_add(k, B, out, p, c);
            else if (op == 1 && hidden) k->relu(k, ny, c, c);
            else if (op == 2 && hidden) k->relu_grad(k, ny, c, c, c);
            else if (op == 3) k->bias_grad(k, B, out, c, g);
          }
          if (op == 4) k->xent_forward(k, B, classes, c, labels, (float *)b, NULL, NULL);
          else if (op == 5) k->xent_backward(k, B, classes, (float *)b, labels, 1.0f, c);
          else if (op == 6) k->sgd(k, nparams, p, g, mom, (gs_sgd){0.01f, 0.9f, 0.0f}, false);
        }
        if (k->sync(k, &e)) {
          fprintf(stderr, "gemm_bench: %s: %s\n", names[op], e.msg);
          return 1;
        }
        double s = (now() - t0) / iters;
        total += s;
        printf("%-6d %-22s %10.1f\n", B, names[op], s * 1e6);
      }
      printf("%-6d %-22s %10.1f\n", B, "total", total * 1e6);
    }
    k->release(k, p);
    k->release(k, g);
    k->release(k, mom);
    k->release(k, labels);
  }
  k->release(k, a);
  k->release(k, b);
  k->release(k, c);
  k->destroy(k);
  return 0;
}
