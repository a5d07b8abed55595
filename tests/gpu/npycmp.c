/* npycmp.c: compare two directories of saved parameters (one float32 .npy
 * per tensor, as `bench --save-params` writes them), so tests/gpu/gpu_checks.sh
 * needs nothing but this tree on a GPU machine (no NumPy there).
 *
 *   npycmp [--exact | --rtol R | --bound fp32|fp16|bf16 [--world N]] GOT_DIR REF_DIR
 *
 * Both directories must hold the same tensor names with the same shapes.
 * Per tensor it prints max|got - ref|, max|ref| and their ratio; a tensor
 * passes when the ratio is <= R (default 1e-3: "close, not bitwise"), or,
 * with --exact, when every byte is equal. A NaN or an infinity on either
 * side fails the tensor, in both modes and where both sides hold one at
 * the same place: a run that diverged proves nothing, and two runs that
 * both diverged are not equal. Exit 0 when all pass, 1 on a
 * mismatch, 2 on a bad file or usage. Reads .npy format 1.0 / 2.0 / 3.0,
 * little-endian '<f4', C order.
 *
 * --bound P [--world N]: R derived from what precision P carries, for the
 * GPU-against-CPU comparisons of tests/gpu (the same training run, 20 SGD
 * steps at lr 0.01, momentum 0.9, on the GPU and on the CPU), never set
 * from what a run showed:
 *   - both runs keep FP32 master weights and update them by the same
 *     formula; they differ only in the order of their FP32 sums (cuBLAS
 *     against OpenBLAS, NCCL or the GPU master against the CPU's sums), and
 *     with P = fp16/bf16 in which way a value rounds to P where the two
 *     FP32 results fall on either side of a rounding boundary of P;
 *   - so a step's update differs between the runs, relative to the update,
 *     by at most: (sqrt(K) + N - 1) u32, the FP32 sums in another order
 *     (sqrt(K) u: the statistical bound on a K-term dot product's rounding,
 *     Higham & Mary 2019; K = 1024 >= the longest dot product of the models
 *     these scripts train, mlp 784 and lenet 400; N - 1 roundings of the
 *     N ranks' sum), plus with 16 bits 2 u_P (one ulp of P: the most a
 *     value rounded to P moves when its FP32 input moves by less than an
 *     ulp of P) and (N - 1) u_P (the ranks' sum, which travels and adds in
 *     P); u32 = 2^-24, u_fp16 = 2^-11, u_bf16 = 2^-9 (unit roundoff: half
 *     the spacing of the 24, 11 and 8 significant bits each carries);
 *   - the parameters' difference is then at most that relative error times
 *     how far the parameters moved, and this comparison divides by the
 *     tensor's largest value: bounded by D = 1, a tensor moving less than
 *     its largest value in 20 steps (measured on the CPU: at most 0.42x,
 *     fc3.bias of mlp:784-256-128-10; 0.40x, lenet);
 *   R = D ((sqrt(K) + N - 1) u32 + [16 bits] (N + 1) u_P):
 *     fp32 1.91e-6, fp16 9.78e-4, bf16 3.91e-3 at N = 1.
 * A different summation order on the CPU alone (OpenBLAS's Haswell kernels
 * against its SkylakeX ones) moves these runs by 2.0e-7 (fp32), 1.3e-5
 * (fp16) and 2.3e-6 (bf16). */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct npy {
  size_t n;
  char shape[128];
  float *data;
} npy;

static int load(const char *path, npy *out) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "npycmp: cannot open %s\n", path);
    return -1;
  }
  unsigned char head[12];
  int rc = -1, reported = 0;
  char *hdr = NULL;
  if (fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6)) {
    fprintf(stderr, "npycmp: %s is not a .npy file\n", path);
    reported = 1;
    goto out;
  }
  size_t hlen;
  if (head[6] == 1) {
    hlen = (size_t)head[8] | (size_t)head[9] << 8;
  } else {
    if (fread(head + 10, 1, 2, f) != 2) goto out;
    hlen = (size_t)head[8] | (size_t)head[9] << 8 | (size_t)head[10] << 16 |
           (size_t)head[11] << 24;
  }
  if (hlen > 1 << 20) goto out;
  hdr = calloc(1, hlen + 1);
  if (!hdr || fread(hdr, 1, hlen, f) != hlen) goto out;
  if (!strstr(hdr, "'descr': '<f4'") || !strstr(hdr, "'fortran_order': False")) {
    fprintf(stderr, "npycmp: %s: only little-endian float32 in C order is compared (%s)\n",
            path, hdr);
    reported = 1;
    goto out;
  }
  const char *sh = strstr(hdr, "'shape': (");
  if (!sh) goto out;
  sh += strlen("'shape': (");
  const char *end = strchr(sh, ')');
  if (!end || (size_t)(end - sh) >= sizeof out->shape) goto out;
  memcpy(out->shape, sh, (size_t)(end - sh));
  out->shape[end - sh] = '\0';
  size_t n = 1;
  for (const char *p = sh; p < end;) {
    char *q;
    unsigned long long d = strtoull(p, &q, 10);
    if (q == p) { p++; continue; }
    n *= (size_t)d;
    p = q;
  }
  out->n = n;
  out->data = malloc(n ? n * 4 : 4);
  if (!out->data || fread(out->data, 4, n, f) != n) {
    fprintf(stderr, "npycmp: %s: truncated data (%zu floats expected)\n", path, n);
    reported = 1;
    goto out;
  }
  rc = 0;
out:
  if (rc && !reported) fprintf(stderr, "npycmp: %s: bad .npy header\n", path);
  free(hdr);
  fclose(f);
  return rc;
}

static int is_npy(const char *name) {
  size_t l = strlen(name);
  return l > 4 && !strcmp(name + l - 4, ".npy");
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted .npy names of dir; NULL on error. */
static char **list(const char *dir, size_t *count) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "npycmp: cannot open directory %s\n", dir);
    return NULL;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    if (!is_npy(ent->d_name)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      char **r = realloc(names, cap * sizeof *r);
      if (!r) break;
      names = r;
    }
    names[n++] = strdup(ent->d_name);
  }
  closedir(d);
  if (names) qsort(names, n, sizeof *names, cmp_names);
  *count = n;
  return names ? names : calloc(1, sizeof *names);
}

static char **g_names, **r_names;
static size_t g_count, r_count;

/* Every exit goes through here, so leak checkers (ASan builds) stay quiet. */
static int finish(int code) {
  for (size_t i = 0; g_names && i < g_count; i++) free(g_names[i]);
  for (size_t i = 0; r_names && i < r_count; i++) free(r_names[i]);
  free(g_names);
  free(r_names);
  return code;
}

/* The tolerance --bound derives (the comment at the top); < 0: no such precision. */
static double derived_bound(const char *precision, int world) {
  const double K = 1024, u32 = 0x1p-24;
  double fp32 = (sqrt(K) + world - 1) * u32;
  if (!strcmp(precision, "fp32")) return fp32;
  if (!strcmp(precision, "fp16")) return fp32 + (world + 1) * 0x1p-11;
  if (!strcmp(precision, "bf16")) return fp32 + (world + 1) * 0x1p-9;
  return -1;
}

int main(int argc, char **argv) {
  int exact = 0, ai = 1, world = 1;
  double rtol = 1e-3;
  const char *bound = NULL;
  for (; ai < argc && argv[ai][0] == '-'; ai++) {
    if (!strcmp(argv[ai], "--exact")) exact = 1;
    else if (!strcmp(argv[ai], "--rtol") && ai + 1 < argc) rtol = atof(argv[++ai]);
    else if (!strcmp(argv[ai], "--bound") && ai + 1 < argc) bound = argv[++ai];
    else if (!strcmp(argv[ai], "--world") && ai + 1 < argc) world = atoi(argv[++ai]);
    else break;
  }
  if (bound && ((rtol = derived_bound(bound, world)) < 0 || world < 1)) {
    fprintf(stderr, "npycmp: --bound %s --world %d: the precision is fp32, fp16 or bf16 and "
            "the world at least 1\n", bound, world);
    return 2;
  }
  if (argc - ai != 2) {
    fprintf(stderr, "usage: npycmp [--exact | --rtol R | --bound fp32|fp16|bf16 [--world N]] "
            "GOT_DIR REF_DIR\n");
    return 2;
  }
  const char *ga = argv[ai], *ra = argv[ai + 1];
  g_names = list(ga, &g_count);
  r_names = list(ra, &r_count);
  char **g = g_names, **r = r_names;
  size_t ng = g_count, nr = r_count;
  if (!g || !r) return finish(2);
  if (ng == 0 || ng != nr) {
    fprintf(stderr, "npycmp: %s has %zu tensors, %s has %zu\n", ga, ng, ra, nr);
    return finish(ng == 0 || nr == 0 ? 2 : 1);
  }
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < ng; i++) {
    if (strcmp(g[i], r[i])) {
      fprintf(stderr, "npycmp: tensor sets differ: %s vs %s\n", g[i], r[i]);
      return finish(1);
    }
    char pg[4096], pr[4096];
    snprintf(pg, sizeof pg, "%s/%s", ga, g[i]);
    snprintf(pr, sizeof pr, "%s/%s", ra, r[i]);
    npy a = {0}, b = {0};
    if (load(pg, &a) || load(pr, &b)) {
      free(a.data);
      free(b.data);
      return finish(2);
    }
    if (strcmp(a.shape, b.shape)) {
      printf("  %-28s shape (%s) vs (%s)  MISMATCH\n", g[i], a.shape, b.shape);
      bad = 1;
      free(a.data);
      free(b.data);
      continue;
    }
    double maxd = 0, maxr = 0;
    size_t got_bad = 0, ref_bad = 0; /* NaN or infinite */
    for (size_t j = 0; j < a.n; j++) {
      double x = a.data[j], y = b.data[j];
      got_bad += !isfinite(x);
      ref_bad += !isfinite(y);
      if (!isfinite(x) || !isfinite(y)) continue;
      maxd = fmax(maxd, fabs(x - y));
      maxr = fmax(maxr, fabs(y));
    }
    double ratio = maxd / fmax(maxr, 1e-30);
    int finite = !got_bad && !ref_bad;
    int ok = finite && (exact ? !memcmp(a.data, b.data, a.n * 4) : ratio <= rtol);
    if (ratio > worst) worst = ratio;
    if (!finite) worst = INFINITY;
    printf("  %-28s (%s) max|diff| %.3e max|ref| %.3e ratio %.2e", g[i], a.shape, maxd, maxr,
           ratio);
    if (!finite) printf(" NaN/inf: %zu in got, %zu in ref", got_bad, ref_bad);
    printf("  %s\n", ok ? "ok" : "MISMATCH");
    bad |= !ok;
    free(a.data);
    free(b.data);
  }
  if (exact)
    printf("npycmp %s vs %s: %zu tensors, %s (bitwise)\n", ga, ra, ng,
           bad ? "MISMATCH" : "identical");
  else
    printf("npycmp %s vs %s: %zu tensors, worst ratio %.2e, %s (max|diff| <= %.3g * max|ref| "
           "per tensor%s%s)\n", ga, ra, ng, worst, bad ? "MISMATCH" : "match", rtol,
           bound ? ", the bound derived for " : "", bound ? bound : "");
  return finish(bad);
}
