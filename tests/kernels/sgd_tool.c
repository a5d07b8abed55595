/* sgd_tool.c: runs the CPU table's sgd for sgd_torch.py.
 *
 *   sgd_tool N STEPS LR MOMENTUM WEIGHT_DECAY IN OUT
 *
 * IN holds N fp32 parameters then STEPS x N fp32 gradients (native byte
 * order); OUT gets the N parameters after STEPS steps of k->sgd (the first
 * with first = true). GS_ISA picks the code path. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kernels.h"

int main(int argc, char **argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: sgd_tool N STEPS LR MOMENTUM WEIGHT_DECAY IN OUT\n");
    return 2;
  }
  size_t n = strtoull(argv[1], NULL, 10);
  int steps = atoi(argv[2]);
  gs_sgd h = {strtof(argv[3], NULL), strtof(argv[4], NULL), strtof(argv[5], NULL)};
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  if (!k) {
    fprintf(stderr, "sgd_tool: %s\n", e.msg);
    return 1;
  }
  float *p = k->alloc(k, n * 4), *g = k->alloc(k, n * 4), *buf = k->alloc(k, n * 4);
  FILE *in = fopen(argv[6], "rb");
  if (!p || !g || !buf || !in || fread(p, 4, n, in) != n) {
    fprintf(stderr, "sgd_tool: cannot read %zu parameters from %s\n", n, argv[6]);
    return 1;
  }
  for (int s = 0; s < steps; s++) {
    if (fread(g, 4, n, in) != n) {
      fprintf(stderr, "sgd_tool: %s ends before step %d's gradients\n", argv[6], s);
      return 1;
    }
    k->sgd(k, n, p, g, h.momentum != 0.0f ? buf : NULL, h, s == 0);
  }
  fclose(in);
  FILE *out = fopen(argv[7], "wb");
  if (!out || fwrite(p, 4, n, out) != n || fclose(out) != 0) {
    fprintf(stderr, "sgd_tool: cannot write %s\n", argv[7]);
    return 1;
  }
  int rc = k->sync(k, &e);
  if (rc) fprintf(stderr, "sgd_tool: %s\n", e.msg);
  k->release(k, p);
  k->release(k, g);
  k->release(k, buf);
  k->destroy(k);
  return rc ? 1 : 0;
}
