/* test_gradcheck.c: gradients of worker/seq.c against finite differences
 * of an independent forward written here in double precision (naive loops
 * for Linear, Conv2d, ReLU, 2x2 max-pool, flatten and softmax
 * cross-entropy). Covers every layer type alone and mixed, a whole MLP and
 * the whole LeNet. Also:
 *  - the fp32 forward loss equals the double one to ~1e-6;
 *  - backward with loss scale 1024 gives exactly 1024x the gradients;
 *  - the hook reports every tensor once, in descending order, and only when
 *    its layer no longer reads the parameters: poisoning a tensor's
 *    parameters inside the hook leaves every gradient bit-identical;
 *  - a linear layer hands its gradients over before it computes its input's
 *    gradient (the product backward still owes then can hide a bucket's
 *    communication), in fp32 and fp16;
 *  - fp16 / bf16 compute gives gradients close to fp32 (and not equal). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "worker/model.h"
#include "kernels/rng.h"

typedef struct net {
  const char *name;
  const gs_layer_def *defs;
  int nd, c, h, w;
  int batch;
  int per_tensor;  /* parameters checked per tensor (0: all) */
} net;

/* ---- the double-precision reference ---- */

static double ref_loss(const net *n, const gs_model *m, const double *p, const float *x,
                       const int32_t *y) {
  int B = n->batch, c = n->c, h = n->h, w = n->w, t = 0;
  size_t size = (size_t)c * h * w;
  double *a = malloc((size_t)B * size * sizeof *a);
  for (size_t i = 0; i < (size_t)B * size; i++) a[i] = x[i];
  for (int l = 0; l < n->nd; l++) {
    const gs_layer_def *d = &n->defs[l];
    double *o = NULL;
    size_t osize = size;
    if (d->kind == GS_L_LINEAR) {
      const double *W = p + m->tensors[t].offset, *bias = p + m->tensors[t + 1].offset;
      t += 2;
      osize = (size_t)d->out;
      o = malloc((size_t)B * osize * sizeof *o);
      for (int b = 0; b < B; b++)
        for (int j = 0; j < d->out; j++) {
          double s = bias[j];
          for (size_t i = 0; i < size; i++) s += W[(size_t)j * size + i] * a[(size_t)b * size + i];
          o[(size_t)b * osize + j] = s;
        }
      c = d->out;
      h = w = 1;
    } else if (d->kind == GS_L_CONV) {
      const double *W = p + m->tensors[t].offset, *bias = p + m->tensors[t + 1].offset;
      t += 2;
      int k = d->kernel, oh = h - k + 1, ow = w - k + 1;
      osize = (size_t)d->out * oh * ow;
      o = malloc((size_t)B * osize * sizeof *o);
      for (int b = 0; b < B; b++)
        for (int oc = 0; oc < d->out; oc++)
          for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
              double s = bias[oc];
              for (int ic = 0; ic < c; ic++)
                for (int ki = 0; ki < k; ki++)
                  for (int kj = 0; kj < k; kj++)
                    s += W[(((size_t)oc * c + ic) * k + ki) * k + kj] *
                         a[(size_t)b * size + ((size_t)ic * h + i + ki) * w + j + kj];
              o[(size_t)b * osize + ((size_t)oc * oh + i) * ow + j] = s;
            }
      c = d->out;
      h = oh;
      w = ow;
    } else if (d->kind == GS_L_RELU) {
      for (size_t i = 0; i < (size_t)B * size; i++) a[i] = a[i] > 0 ? a[i] : 0;
    } else if (d->kind == GS_L_POOL) {
      int oh = h / 2, ow = w / 2;
      osize = (size_t)c * oh * ow;
      o = malloc((size_t)B * osize * sizeof *o);
      for (int b = 0; b < B; b++)
        for (int ch = 0; ch < c; ch++)
          for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
              const double *q = a + (size_t)b * size + (size_t)ch * h * w;
              double v = q[(2 * i) * w + 2 * j];
              v = fmax(v, q[(2 * i) * w + 2 * j + 1]);
              v = fmax(v, q[(2 * i + 1) * w + 2 * j]);
              v = fmax(v, q[(2 * i + 1) * w + 2 * j + 1]);
              o[(size_t)b * osize + ((size_t)ch * oh + i) * ow + j] = v;
            }
      h = oh;
      w = ow;
    }
    if (o) {
      free(a);
      a = o;
      size = osize;
    }
  }
  double loss = 0;
  for (int b = 0; b < B; b++) {
    const double *z = a + (size_t)b * size;
    double mx = z[0], s = 0;
    for (size_t j = 1; j < size; j++) mx = fmax(mx, z[j]);
    for (size_t j = 0; j < size; j++) s += exp(z[j] - mx);
    loss += log(s) + mx - z[y[b]];
  }
  free(a);
  return loss / B;
}

/* ---- hooks ---- */

typedef struct hook_state {
  const gs_model *m;
  float *params;     /* poisoned when non-NULL */
  float *saved;
  int last, calls;
  bool order_ok;
} hook_state;

static int hook(void *ctx, int tensor, gs_err *e) {
  hook_state *s = ctx;
  if (tensor >= s->last) s->order_ok = false;
  s->last = tensor;
  s->calls++;
  if (s->params) {
    const gs_tensor *t = &s->m->tensors[tensor];
    memcpy(s->saved + t->offset, s->params + t->offset, t->count * sizeof(float));
    for (size_t i = 0; i < t->count; i++) s->params[t->offset + i] = NAN;
  }
  return 0;
}

static void run_backward(gs_model *m, float *params, float *grads, float scale, hook_state *hs) {
  gs_err e = {0};
  float loss;
  CHECK_OK(m->ops->forward(m, params, m->max_batch, &loss, NULL, &e), &e);
  CHECK_OK(m->ops->backward(m, params, grads, m->max_batch, scale, hook, hs, &e), &e);
}

/* ---- one network ---- */

static void check_net(const net *n, gs_kernels *k) {
  gs_err e = {0};
  gs_model *m = NULL;
  CHECK_OK(gs_model_create_seq(n->defs, n->nd, n->c, n->h, n->w, false, k, n->batch, GS_F32, &m,
                               &e), &e);
  if (!m) return;
  size_t np = m->nparams, in = (size_t)n->batch * m->in_size;
  float *params = malloc(np * sizeof *params), *grads = calloc(np, sizeof *grads);
  float *g2 = calloc(np, sizeof *g2), *saved = malloc(np * sizeof *saved);
  float *x = malloc(in * sizeof *x);
  int32_t *y = malloc((size_t)n->batch * sizeof *y);
  gs_model_init_params(m, 11, params);
  gs_rng r;
  gs_rng_seed(&r, 5, 99);
  for (size_t i = 0; i < in; i++) x[i] = gs_rng_uniform(&r);
  for (int b = 0; b < n->batch; b++) y[b] = (int32_t)gs_rng_below(&r, (uint64_t)m->classes);
  k->to_device(k, m->input, x, in * sizeof *x);
  k->to_device(k, m->labels, y, (size_t)n->batch * sizeof *y);

  /* forward against the reference */
  double *p = malloc(np * sizeof *p);
  for (size_t i = 0; i < np; i++) p[i] = params[i];
  double ref = ref_loss(n, m, p, x, y);
  float loss = 0;
  CHECK_OK(m->ops->forward(m, params, n->batch, &loss, NULL, &e), &e);
  CHECK(fabs(loss - ref) <= 2e-6 * fabs(ref) + 1e-7, "%s: loss %.9g, reference %.12g", n->name,
         loss, ref);

  /* gradients, hook order */
  hook_state hs = {.m = m, .last = m->ntensors, .order_ok = true};
  run_backward(m, params, grads, 1.0f, &hs);
  CHECK(hs.order_ok && hs.calls == m->ntensors, "%s: hook calls %d of %d, order %s", n->name,
         hs.calls, m->ntensors, hs.order_ok ? "ok" : "wrong");

  /* finite differences */
  double gmax = 0;
  for (size_t i = 0; i < np; i++) gmax = fmax(gmax, fabs(grads[i]));
  double worst = 0;
  const char *worst_name = "";
  int checked = 0;
  for (int t = 0; t < m->ntensors; t++) {
    const gs_tensor *ts = &m->tensors[t];
    size_t cnt = n->per_tensor && (size_t)n->per_tensor < ts->count ? (size_t)n->per_tensor
                                                                    : ts->count;
    for (size_t s = 0; s < cnt; s++) {
      size_t j = ts->offset + (cnt == ts->count ? s : gs_rng_below(&r, ts->count));
      double h = 1e-5, save = p[j];
      p[j] = save + h;
      double up = ref_loss(n, m, p, x, y);
      p[j] = save - h;
      double down = ref_loss(n, m, p, x, y);
      p[j] = save;
      double num = (up - down) / (2 * h);
      double err = fabs(grads[j] - num) / (1e-4 * fabs(num) + 1e-5 * gmax);
      if (err > worst) {
        worst = err;
        worst_name = ts->name;
      }
      checked++;
    }
  }
  CHECK(worst <= 1.0, "%s: gradient off by %.2f x tolerance in %s", n->name, worst, worst_name);
  printf("%-22s %7zu params, %4d checked by finite differences, worst %.1e of tolerance\n",
         n->name, np, checked, worst);

  /* the loss scale multiplies exactly */
  run_backward(m, params, g2, 1024.0f, &(hook_state){.m = m, .last = m->ntensors, .order_ok = true});
  bool exact = true;
  for (size_t i = 0; i < np; i++) exact &= g2[i] == 1024.0f * grads[i];
  CHECK(exact, "%s: scale 1024 is not exactly 1024x", n->name);

  /* a tensor's parameters may change as soon as the hook saw it */
  hook_state poison = {.m = m, .params = params, .saved = saved, .last = m->ntensors,
                       .order_ok = true};
  memset(g2, 0, np * sizeof *g2);
  float l2;
  CHECK_OK(m->ops->forward(m, params, n->batch, &l2, NULL, &e), &e);
  CHECK_OK(m->ops->backward(m, params, g2, n->batch, 1.0f, hook, &poison, &e), &e);
  memcpy(params, saved, np * sizeof *params);
  CHECK(!memcmp(g2, grads, np * sizeof *g2),
         "%s: gradients changed when parameters were poisoned after their hook", n->name);

  /* mixed precision: close to fp32, not equal */
  for (int dt = GS_F16; dt <= GS_BF16; dt++) {
    gs_model *ml = NULL;
    CHECK_OK(gs_model_create_seq(n->defs, n->nd, n->c, n->h, n->w, false, k, n->batch,
                                 (gs_dtype)dt, &ml, &e), &e);
    if (!ml) continue;
    k->to_device(k, ml->input, x, in * sizeof *x);
    k->to_device(k, ml->labels, y, (size_t)n->batch * sizeof *y);
    float *gl = calloc(np, sizeof *gl);
    run_backward(ml, params, gl, 1.0f, &(hook_state){.m = ml, .last = ml->ntensors, .order_ok = true});
    double num = 0, den = 0;
    for (size_t i = 0; i < np; i++) {
      num += (double)(gl[i] - grads[i]) * (gl[i] - grads[i]);
      den += (double)grads[i] * grads[i];
    }
    double rel = sqrt(num / den), tol = dt == GS_F16 ? 1e-2 : 5e-2;
    CHECK(rel < tol && rel > 0, "%s %s: relative gradient error %.3g (tolerance %.3g)", n->name,
           gs_dtype_name((gs_dtype)dt), rel, tol);
    printf("%-22s %s gradients within %.2e of fp32\n", n->name, gs_dtype_name((gs_dtype)dt), rel);
    free(gl);
    gs_model_destroy(ml);
  }
  free(p);
  free(params);
  free(grads);
  free(g2);
  free(saved);
  free(x);
  free(y);
  gs_model_destroy(m);
}

/* ---- how early the hooks come ---- */

static int gemms;  /* GEMMs run since the counter was reset */
static void (*real_gemm)(gs_kernels *, bool, bool, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);
static void (*real_gemm_lp)(gs_kernels *, gs_dtype, bool, bool, int, int, int, float,
                            const void *, int, const void *, int, float, float *, int);
static void counting_gemm(gs_kernels *k, bool ta, bool tb, int m, int n, int kk, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c,
                          int ldc) {
  gemms++;
  real_gemm(k, ta, tb, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void counting_gemm_lp(gs_kernels *k, gs_dtype t, bool ta, bool tb, int m, int n, int kk,
                             float alpha, const void *a, int lda, const void *b, int ldb,
                             float beta, float *c, int ldc) {
  gemms++;
  real_gemm_lp(k, t, ta, tb, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int at_hook[16];
static int count_hook(void *ctx, int tensor, gs_err *e) {
  (void)ctx;
  (void)e;
  if (tensor < 16) at_hook[tensor] = gemms;
  return 0;
}

/* mlp 20-16-12-5: backward runs fc3's dw, its dx, fc2's dw, its dx, fc1's
 * dw. Each weight's hook comes right after its dw: after 1, 3 and 5
 * GEMMs (2, 4, 5 if dx came first). */
static void check_early_hooks(gs_kernels *k, const gs_layer_def *defs, int nd) {
  real_gemm = k->gemm;
  real_gemm_lp = k->gemm_lp;
  k->gemm = counting_gemm;
  k->gemm_lp = counting_gemm_lp;
  for (int dt = GS_F32; dt <= GS_F16; dt++) {
    gs_err e = {0};
    gs_model *m = NULL;
    CHECK_OK(gs_model_create_seq(defs, nd, 1, 1, 20, false, k, 4, (gs_dtype)dt, &m, &e), &e);
    if (!m) continue;
    float *params = malloc(m->nparams * sizeof *params), *grads = malloc(m->nparams * sizeof *grads);
    gs_model_init_params(m, 3, params);
    float loss;
    CHECK_OK(m->ops->forward(m, params, 4, &loss, NULL, &e), &e);
    gemms = 0;
    memset(at_hook, -1, sizeof at_hook);
    CHECK_OK(m->ops->backward(m, params, grads, 4, 1.0f, count_hook, NULL, &e), &e);
    /* tensors: fc1.weight 0, fc1.bias 1, fc2.weight 2, ..., fc3.bias 5 */
    CHECK(at_hook[4] == 1 && at_hook[2] == 3 && at_hook[0] == 5 && gemms == 5,
          "%s: the weights' hooks came after %d, %d and %d GEMMs of %d (want 1, 3, 5: before "
          "each layer's dx)", gs_dtype_name((gs_dtype)dt), at_hook[4], at_hook[2], at_hook[0],
          gemms);
    free(params);
    free(grads);
    gs_model_destroy(m);
  }
  k->gemm = real_gemm;
  k->gemm_lp = real_gemm_lp;
}

int main(void) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  if (!k) return 1;
  static const gs_layer_def linear[] = {{GS_L_LINEAR, 5, 0}};
  static const gs_layer_def mlp[] = {{GS_L_LINEAR, 16, 0}, {GS_L_RELU, 0, 0},
                                     {GS_L_LINEAR, 12, 0}, {GS_L_RELU, 0, 0},
                                     {GS_L_LINEAR, 5, 0}};
  static const gs_layer_def convpool[] = {{GS_L_CONV, 3, 3}, {GS_L_RELU, 0, 0},
                                          {GS_L_POOL, 0, 0}, {GS_L_FLATTEN, 0, 0},
                                          {GS_L_LINEAR, 4, 0}};
  static const gs_layer_def conv2[] = {{GS_L_CONV, 2, 3}, {GS_L_POOL, 0, 0}, {GS_L_CONV, 3, 3},
                                       {GS_L_RELU, 0, 0}, {GS_L_LINEAR, 3, 0}};
  /* 11x11 -> conv 3x3 -> 9x9 -> pool: the odd last row and column are dropped */
  static const gs_layer_def oddpool[] = {{GS_L_CONV, 2, 3}, {GS_L_POOL, 0, 0}, {GS_L_RELU, 0, 0},
                                         {GS_L_LINEAR, 3, 0}};
  static const gs_layer_def lenet[] = {
      {GS_L_CONV, 6, 5},  {GS_L_RELU, 0, 0},     {GS_L_POOL, 0, 0},     {GS_L_CONV, 16, 5},
      {GS_L_RELU, 0, 0},  {GS_L_POOL, 0, 0},     {GS_L_FLATTEN, 0, 0},  {GS_L_LINEAR, 120, 0},
      {GS_L_RELU, 0, 0},  {GS_L_LINEAR, 84, 0},  {GS_L_RELU, 0, 0},     {GS_L_LINEAR, 10, 0}};
  const net nets[] = {
      {"linear", linear, 1, 1, 1, 6, 3, 0},
      {"mlp 20-16-12-5", mlp, 5, 1, 1, 20, 4, 0},
      {"conv+relu+pool+linear", convpool, 5, 2, 8, 8, 3, 0},
      {"conv+pool+conv+linear", conv2, 5, 1, 10, 10, 2, 0},
      {"conv+odd pool+linear", oddpool, 4, 1, 11, 11, 2, 0},
      {"lenet", lenet, 12, 3, 32, 32, 2, 6},
  };
  for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) check_net(&nets[i], k);
  check_early_hooks(k, mlp, 5);

  /* the real LeNet spec has PyTorch's names and shapes */
  gs_model *m = NULL;
  CHECK_OK(gs_model_create("lenet", k, 4, GS_F32, 0, 0, &m, &e), &e);
  if (m) {
    static const char *names[] = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                  "fc1.weight",   "fc1.bias",   "fc2.weight",   "fc2.bias",
                                  "fc3.weight",   "fc3.bias"};
    CHECK(m->ntensors == 10 && m->nparams == 62006);
    for (int i = 0; i < m->ntensors && i < 10; i++) CHECK(!strcmp(m->tensors[i].name, names[i]));
    CHECK(m->tensors[0].ndim == 4 && m->tensors[0].shape[0] == 6 && m->tensors[0].shape[1] == 3 &&
          m->tensors[0].shape[2] == 5 && m->tensors[0].shape[3] == 5);
    CHECK(m->tensors[4].shape[0] == 120 && m->tensors[4].shape[1] == 400);
    /* kaiming_uniform(a=sqrt(5)): |w| <= 1/sqrt(fan_in), and the bound is nearly reached */
    float *p = malloc(m->nparams * sizeof *p);
    gs_model_init_params(m, 3, p);
    for (int i = 0; i < m->ntensors; i++) {
      const gs_tensor *t = &m->tensors[i];
      double fan_in = i < 2 ? 75 : i < 4 ? 150 : i < 6 ? 400 : i < 8 ? 120 : 84;
      double bound = 1 / sqrt(fan_in), mx = 0, mean = 0;
      for (size_t j = 0; j < t->count; j++) {
        mx = fmax(mx, fabs(p[t->offset + j]));
        mean += p[t->offset + j] / (double)t->count;
      }
      CHECK(mx <= bound && (t->count < 50 || mx > 0.9 * bound), "%s: max %g, bound %g", t->name,
             mx, bound);
      if (t->count >= 1000) CHECK(fabs(mean) < 0.1 * bound, "%s: mean %g", t->name, mean);
    }
    free(p);
    gs_model_destroy(m);
  }
  /* specs */
  static const char *bad[] = {"mlp:", "mlp:784", "mlp:784-", "mlp:784--10", "mlp:a-10",
                              "mlp:784-0-10", "mlp:-5-10", "lenet5", "resnet"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gs_err be = {0};
    CHECK(gs_model_create(bad[i], k, 4, GS_F32, 0, 0, &m, &be) == GS_EINVAL && !m,
           "spec '%s' accepted", bad[i]);
  }
  k->destroy(k);
  return check_done("test_gradcheck");
}
