/* seq.c: sequential networks (mlp, lenet, and any Linear / Conv / ReLU /
 * MaxPool / Flatten stack) over the kernels table.
 *
 * Activations: act[0] is the input, act[i + 1] the output of layer i.
 * ReLU works in place and Flatten is a view (NCHW flattened is the same
 * memory), so they alias their input. Backward ping-pongs between two
 * gradient buffers g0 / g1 and keeps ReLU's gradient in place; it stops at
 * the first layer that has parameters (nothing before it needs a gradient),
 * and never computes the gradient of the input. */
#include "worker/model.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



/* ---- sequential networks ---- */

typedef struct seq_layer {
  gs_layer_kind kind;
  int wt, bt;                 /* tensor indices or -1 */
  int in_c, in_h, in_w, out_c, out_h, out_w;
  size_t in_size, out_size;   /* per sample */
  gs_conv_desc cd;
  float *out;                 /* owned output (linear, conv, pool) */
  int32_t *argmax;            /* pool */
  void *xlp;                  /* linear in low precision: its input, rounded */
} seq_layer;

typedef struct seq_model {
  gs_model base;
  int nl;
  seq_layer *l;
  float **act;
  float *probs;
  float *g0, *g1;
  float *ws;
  size_t max_act;             /* largest activation, floats per batch */
  void *wlp;                  /* low precision: params in the compute dtype */
  float *wr;                  /* ... and widened back to fp32 */
  void *tlp;                  /* low-precision scratch of max_act */
  float *wdx;                 /* fp32: a linear layer's weights kept for its dx after
                                 its hook (largest such layer) */
  int first_param;
} seq_model;

static void *dalloc(gs_kernels *k, size_t bytes, gs_err *e) {
  void *p = k->alloc(k, bytes ? bytes : 1);
  if (!p) {
    k->sync(k, e);
    GS_FAIL(e, GS_ENOMEM, "out of device memory (%zu bytes) for the model", bytes);
  }
  return p;
}

static void seq_destroy(gs_model *gm) {
  seq_model *m = (seq_model *)gm;
  gs_kernels *k = gm->k;
  for (int i = 0; m->l && i < m->nl; i++) {
    k->release(k, m->l[i].out);
    k->release(k, m->l[i].argmax);
    k->release(k, m->l[i].xlp);
  }
  k->release(k, gm->input);
  k->release(k, gm->labels);
  k->release(k, m->probs);
  k->release(k, m->g0);
  k->release(k, m->g1);
  k->release(k, m->ws);
  k->release(k, m->wlp);
  k->release(k, m->wr);
  k->release(k, m->tlp);
  k->release(k, m->wdx);
  free(m->l);
  free(m->act);
  free(gm->tensors);
  free(m);
}

/* x = round_through(dtype, x): the value a low-precision tensor would hold */
static void round_lp(seq_model *m, float *x, size_t n) {
  gs_kernels *k = m->base.k;
  k->convert(k, m->base.compute, m->tlp, GS_F32, x, n);
  k->convert(k, GS_F32, x, m->base.compute, m->tlp, n);
}

static int seq_forward(gs_model *gm, const float *params, int batch, float *loss, int *correct,
                       gs_err *e) {
  seq_model *m = (seq_model *)gm;
  gs_kernels *k = gm->k;
  bool lp = gm->compute != GS_F32;
  if (batch <= 0 || batch > gm->max_batch)
    return GS_FAIL(e, GS_EINVAL, "forward: batch %d outside 1..%d", batch, gm->max_batch);
  const float *w = params;   /* weights as the GEMMs of conv see them */
  size_t esz = gs_dtype_size(gm->compute);
  if (lp) {
    k->convert(k, gm->compute, m->wlp, GS_F32, params, gm->nparams);
    k->convert(k, GS_F32, m->wr, gm->compute, m->wlp, gm->nparams);
    w = m->wr;
    round_lp(m, m->act[0], (size_t)batch * gm->in_size);
  }
  for (int i = 0; i < m->nl; i++) {
    seq_layer *L = &m->l[i];
    const float *x = m->act[i];
    float *y = m->act[i + 1];
    size_t ny = (size_t)batch * L->out_size;
    switch (L->kind) {
    case GS_L_LINEAR: {
      const gs_tensor *tw = &gm->tensors[L->wt], *tb = &gm->tensors[L->bt];
      int in = (int)L->in_size, out = (int)L->out_size;
      if (lp) {
        k->convert(k, gm->compute, L->xlp, GS_F32, x, (size_t)batch * in);
        /* y[b, o] = sum_i x[b, i] w[o, i] */
        k->gemm_lp(k, gm->compute, false, true, batch, out, in, 1.0f, L->xlp, in,
                   (const char *)m->wlp + tw->offset * esz, in, 0.0f, y, out);
      } else {
        k->gemm(k, false, true, batch, out, in, 1.0f, x, in, params + tw->offset, in, 0.0f, y,
                out);
      }
      k->bias_add(k, batch, out, w + tb->offset, y);
      if (lp) round_lp(m, y, ny);
      break;
    }
    case GS_L_CONV: {
      gs_conv_desc d = L->cd;
      d.n = batch;
      gs_conv2d_forward(k, &d, x, w + gm->tensors[L->wt].offset, w + gm->tensors[L->bt].offset,
                        y, m->ws);
      if (lp) round_lp(m, y, ny);
      break;
    }
    case GS_L_RELU:
      k->relu(k, ny, x, y);
      break;
    case GS_L_POOL:
      k->maxpool_forward(k, batch * L->in_c, L->in_h, L->in_w, x, y, L->argmax);
      break;
    case GS_L_FLATTEN:
      break;
    }
  }
  /* queued: *loss and *correct arrive with the kernels' next sync */
  k->xent_forward(k, batch, gm->classes, m->act[m->nl], gm->labels, m->probs, loss, correct);
  return GS_OK;
}

/* The layer's parameter gradients are written: hand them over (bias, then
 * weight: the last first), once the device has finished them. */
static int hand_over(gs_kernels *k, const seq_layer *L, gs_grad_hook hook, void *ctx,
                     gs_err *e) {
  if (L->wt < 0 || !hook) return 0;
  int rc = k->sync(k, e);
  if (rc == 0 && L->bt >= 0) rc = hook(ctx, L->bt, e);
  if (rc == 0) rc = hook(ctx, L->wt, e);
  return rc;
}

/* A linear layer computes its weight and bias gradients before the
 * gradient of its input, and hands them over in between: their bucket can
 * then travel while backward computes dx here and everything below (the
 * hook may let a backend overwrite the weights at once, so dx reads a copy
 * taken before: the low-precision weights of the forward, or wdx in fp32).
 * The two products are independent, so the order changes no bit of
 * either. */
static int seq_backward(gs_model *gm, const float *params, float *grads, int batch, float scale,
                        gs_grad_hook hook, void *ctx, gs_err *e) {
  seq_model *m = (seq_model *)gm;
  gs_kernels *k = gm->k;
  bool lp = gm->compute != GS_F32;
  size_t esz = gs_dtype_size(gm->compute);
  const float *w = lp ? m->wr : params;
  float *cur = m->g0, *other = m->g1;
  k->xent_backward(k, batch, gm->classes, m->probs, gm->labels, scale, cur);
  for (int i = m->nl - 1; i >= m->first_param; i--) {
    seq_layer *L = &m->l[i];
    bool need_dx = i > m->first_param;
    size_t nout = (size_t)batch * L->out_size;
    bool handed = false;
    switch (L->kind) {
    case GS_L_LINEAR: {
      const gs_tensor *tw = &gm->tensors[L->wt], *tb = &gm->tensors[L->bt];
      int in = (int)L->in_size, out = (int)L->out_size;
      const void *wl = lp ? (const char *)m->wlp + tw->offset * esz : NULL;
      if (lp) {
        k->convert(k, gm->compute, m->tlp, GS_F32, cur, nout);
        k->convert(k, GS_F32, cur, gm->compute, m->tlp, nout);
        /* dw[o, i] = sum_b dy[b, o] x[b, i] */
        k->gemm_lp(k, gm->compute, true, false, out, in, batch, 1.0f, m->tlp, out, L->xlp, in,
                   0.0f, grads + tw->offset, in);
      } else {
        k->gemm(k, true, false, out, in, batch, 1.0f, cur, out, m->act[i], in, 0.0f,
                grads + tw->offset, in);
      }
      k->bias_grad(k, batch, out, cur, grads + tb->offset);
      const float *wf = params + tw->offset;
      if (need_dx && !lp && hook) {
        k->copy(k, m->wdx, wf, tw->count * sizeof(float));
        wf = m->wdx;
      }
      int rc = hand_over(k, L, hook, ctx, e);
      if (rc) return rc;
      handed = true;
      if (need_dx && lp)  /* dx[b, i] = sum_o dy[b, o] w[o, i] */
        k->gemm_lp(k, gm->compute, false, false, batch, in, out, 1.0f, m->tlp, out, wl, in,
                   0.0f, other, in);
      else if (need_dx)
        k->gemm(k, false, false, batch, in, out, 1.0f, cur, out, wf, in, 0.0f, other, in);
      break;
    }
    case GS_L_CONV: {
      gs_conv_desc d = L->cd;
      d.n = batch;
      if (lp) round_lp(m, cur, nout);
      gs_conv2d_backward(k, &d, m->act[i], w + gm->tensors[L->wt].offset, cur,
                         need_dx ? other : NULL, grads + gm->tensors[L->wt].offset,
                         grads + gm->tensors[L->bt].offset, m->ws);
      break;
    }
    case GS_L_RELU:
      k->relu_grad(k, nout, m->act[i + 1], cur, cur);
      continue;
    case GS_L_POOL:
      k->maxpool_backward(k, batch * L->in_c, L->in_h, L->in_w, cur, L->argmax, other);
      break;
    case GS_L_FLATTEN:
      continue;
    }
    float *t = cur;
    cur = other;
    other = t;
    if (!handed) {
      int rc = hand_over(k, L, hook, ctx, e);
      if (rc) return rc;
    }
  }
  int rc = k->sync(k, e);
  if (rc) gs_err_prefix(e, "backward: ");
  return rc;
}

static const gs_model_ops seq_ops = {seq_forward, seq_backward, seq_destroy};

/* The stack laid out layer by layer: the next layer's input shape, the
 * tensors named so far per kind, the largest conv workspace (floats) and
 * the largest activation (floats per sample). */
typedef struct layout {
  int c, h, w;
  int nconv, nfc;
  size_t ws, max_act;
} layout;

/* Linear layer i (1-based in messages): its weight and bias, with
 * PyTorch's init bound 1/sqrt(fan_in), and a flat output. */
static int lay_linear(gs_model *gm, seq_layer *L, const gs_layer_def *d, int i, layout *y,
                      gs_err *e) {
  int fin = y->c * y->h * y->w, fout = d->out;
  if (fout <= 0) return GS_FAIL(e, GS_EINVAL, "layer %d: linear with %d outputs", i + 1, fout);
  float bound = 1.0f / sqrtf((float)fin);
  char name[64];
  snprintf(name, sizeof name, "fc%d.weight", ++y->nfc);
  L->wt = gs_model_add_tensor(gm, name, 2, (int64_t[]){fout, fin}, true, bound, e);
  snprintf(name, sizeof name, "fc%d.bias", y->nfc);
  L->bt = gs_model_add_tensor(gm, name, 1, (int64_t[]){fout}, true, bound, e);
  y->c = fout;
  y->h = y->w = 1;
  return GS_OK;
}

/* Convolution layer i: its descriptor for the largest batch, its weight
 * and bias as linear's, and the workspace it needs. */
static int lay_conv(gs_model *gm, seq_layer *L, const gs_layer_def *d, int i, layout *y,
                    gs_err *e) {
  L->cd = (gs_conv_desc){.n = gm->max_batch, .c = y->c, .h = y->h, .w = y->w, .oc = d->out,
                         .kh = d->kernel, .kw = d->kernel, .stride = 1, .pad = 0};
  int rc = gs_conv_init(&L->cd, e);
  if (rc) {
    gs_err_prefix(e, "layer %d: ", i + 1);
    return rc;
  }
  int fin = y->c * d->kernel * d->kernel;
  float bound = 1.0f / sqrtf((float)fin);
  char name[64];
  snprintf(name, sizeof name, "conv%d.weight", ++y->nconv);
  L->wt = gs_model_add_tensor(gm, name, 4, (int64_t[]){d->out, y->c, d->kernel, d->kernel},
                              true, bound, e);
  snprintf(name, sizeof name, "conv%d.bias", y->nconv);
  L->bt = gs_model_add_tensor(gm, name, 1, (int64_t[]){d->out}, true, bound, e);
  size_t s = gs_conv_workspace(&L->cd);
  if (s > y->ws) y->ws = s;
  y->c = L->cd.oc;
  y->h = L->cd.oh;
  y->w = L->cd.ow;
  return GS_OK;
}

/* 2x2 max-pool layer i: an odd last row / column is dropped, as PyTorch's
 * floor mode. */
static int lay_pool(int i, layout *y, gs_err *e) {
  if (y->h < 2 || y->w < 2)
    return GS_FAIL(e, GS_EINVAL, "layer %d: 2x2 max-pool of a %dx%d plane", i + 1, y->h, y->w);
  y->h /= 2;
  y->w /= 2;
  return GS_OK;
}

/* Layer i of the stack (d its definition): its kind, its input and output
 * shapes, its tensors; y moves past it. */
static int lay_layer(seq_model *m, const gs_layer_def *d, int i, layout *y, gs_err *e) {
  seq_layer *L = &m->l[i];
  L->kind = d->kind;
  L->wt = L->bt = -1;
  L->in_c = y->c;
  L->in_h = y->h;
  L->in_w = y->w;
  L->in_size = (size_t)y->c * y->h * y->w;
  int rc = GS_OK;
  switch (L->kind) {
  case GS_L_LINEAR:
    rc = lay_linear(&m->base, L, d, i, y, e);
    break;
  case GS_L_CONV:
    rc = lay_conv(&m->base, L, d, i, y, e);
    break;
  case GS_L_POOL:
    rc = lay_pool(i, y, e);
    break;
  case GS_L_RELU:
  case GS_L_FLATTEN:
    break;
  }
  if (rc == 0 && (L->wt < 0 && (L->kind == GS_L_LINEAR || L->kind == GS_L_CONV)))
    rc = GS_ENOMEM;
  L->out_c = y->c;
  L->out_h = y->h;
  L->out_w = y->w;
  L->out_size = (size_t)y->c * y->h * y->w;
  if (L->out_size > y->max_act) y->max_act = L->out_size;
  if (L->wt >= 0 && m->first_param < 0) m->first_param = i;
  return rc;
}

/* The model's device memory for its largest batch: input and labels,
 * probabilities, the two gradient buffers, conv's workspace (ws floats),
 * the low-precision copies, fp32's weights kept for a linear layer's dx,
 * and the outputs of the layers that own one (the other activations alias
 * their input). */
static int alloc_buffers(seq_model *m, size_t ws, gs_err *e) {
  gs_model *gm = &m->base;
  gs_kernels *k = gm->k;
  int max_batch = gm->max_batch, ndefs = m->nl;
  bool lp = gm->compute != GS_F32;
  size_t esz = gs_dtype_size(gm->compute);
  gm->input = dalloc(k, (size_t)max_batch * gm->in_size * sizeof(float), e);
  gm->labels = dalloc(k, (size_t)max_batch * sizeof(int32_t), e);
  m->probs = dalloc(k, (size_t)max_batch * gm->classes * sizeof(float), e);
  m->g0 = dalloc(k, m->max_act * sizeof(float), e);
  m->g1 = dalloc(k, m->max_act * sizeof(float), e);
  if (ws) m->ws = dalloc(k, ws * sizeof(float), e);
  if (lp) {
    m->wlp = dalloc(k, gm->nparams * esz, e);
    m->wr = dalloc(k, gm->nparams * sizeof(float), e);
    m->tlp = dalloc(k, m->max_act * esz, e);
  }
  size_t wdx = 0; /* the largest linear layer that needs dx */
  for (int i = m->first_param + 1; !lp && i < ndefs; i++)
    if (m->l[i].kind == GS_L_LINEAR && gm->tensors[m->l[i].wt].count > wdx)
      wdx = gm->tensors[m->l[i].wt].count;
  if (wdx) m->wdx = dalloc(k, wdx * sizeof(float), e);
  m->act[0] = gm->input;
  for (int i = 0; i < ndefs; i++) {
    seq_layer *L = &m->l[i];
    size_t n = (size_t)max_batch * L->out_size;
    if (L->kind == GS_L_LINEAR || L->kind == GS_L_CONV || L->kind == GS_L_POOL)
      L->out = dalloc(k, n * sizeof(float), e);
    if (L->kind == GS_L_POOL) L->argmax = dalloc(k, n * sizeof(int32_t), e);
    if (L->kind == GS_L_LINEAR && lp)
      L->xlp = dalloc(k, (size_t)max_batch * L->in_size * esz, e);
    m->act[i + 1] = L->out ? L->out : m->act[i];
  }
  if (e && e->code) return e->code;
  if (!gm->input || !gm->labels || !m->probs || !m->g0 || !m->g1) return GS_ENOMEM;
  return GS_OK;
}

int gs_model_create_seq(const gs_layer_def *defs, int ndefs, int c, int h, int w, bool flat,
                        gs_kernels *k, int max_batch, gs_dtype compute, gs_model **out,
                        gs_err *e) {
  *out = NULL;
  if (ndefs <= 0) return GS_FAIL(e, GS_EINVAL, "a model needs at least one layer");
  if (max_batch <= 0) return GS_FAIL(e, GS_EINVAL, "batch %d is not positive", max_batch);
  seq_model *m = calloc(1, sizeof *m);
  if (!m) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  gs_model *gm = &m->base;
  gm->ops = &seq_ops;
  gm->k = k;
  gm->compute = compute;
  gm->max_batch = max_batch;
  gm->in_c = c;
  gm->in_h = h;
  gm->in_w = w;
  gm->flat = flat;
  gm->in_size = (size_t)c * h * w;
  m->nl = ndefs;
  m->l = calloc((size_t)ndefs, sizeof *m->l);
  m->act = calloc((size_t)ndefs + 1, sizeof *m->act);
  int rc = GS_OK;
  if (!m->l || !m->act) rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  m->first_param = -1;
  layout y = {.c = c, .h = h, .w = w, .max_act = gm->in_size};
  for (int i = 0; rc == 0 && i < ndefs; i++) rc = lay_layer(m, &defs[i], i, &y, e);
  if (rc == 0 && m->first_param < 0) rc = GS_FAIL(e, GS_EINVAL, "the model has no parameters");
  if (rc == 0 && m->l[ndefs - 1].out_size < 1) rc = GS_FAIL(e, GS_EINVAL, "empty output");
  if (rc == 0) {
    gm->classes = (int)m->l[ndefs - 1].out_size;
    m->max_act = y.max_act * (size_t)max_batch;
    rc = alloc_buffers(m, y.ws, e);
  }
  if (rc) {
    seq_destroy(gm);
    return rc;
  }
  *out = gm;
  return GS_OK;
}

/* ---- specs ---- */

int gs_model_create_mlp(const char *sizes, gs_kernels *k, int max_batch, gs_dtype compute,
                      gs_model **out, gs_err *e) {
  int n[64], cnt = 0;
  const char *p = sizes;
  while (*p) {
    char *end = (char *)p;  /* digits only: strtol alone would take " 4" and "+4" */
    long v = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : 0;
    if (end == p || v <= 0 || v > (1 << 24) || (*end && *end != '-') || cnt == 64)
      return GS_FAIL(e, GS_EINVAL,
                     "--model mlp:%s: sizes must be positive integers joined by '-', e.g. "
                     "mlp:784-2048-2048-10",
                     sizes);
    n[cnt++] = (int)v;
    p = *end ? end + 1 : end;
    if (*end && !*p)
      return GS_FAIL(e, GS_EINVAL, "--model mlp:%s: trailing '-'", sizes);
  }
  if (cnt < 2)
    return GS_FAIL(e, GS_EINVAL, "--model mlp:%s: need at least an input and an output size",
                   sizes);
  gs_layer_def defs[127];
  int nd = 0;
  for (int i = 1; i < cnt; i++) {
    defs[nd++] = (gs_layer_def){GS_L_LINEAR, n[i], 0};
    if (i + 1 < cnt) defs[nd++] = (gs_layer_def){GS_L_RELU, 0, 0};
  }
  int rc = gs_model_create_seq(defs, nd, 1, 1, n[0], true, k, max_batch, compute, out, e);
  if (rc == 0) snprintf((*out)->desc, sizeof (*out)->desc, "mlp:%.150s", sizes);
  return rc;
}

int gs_model_create_lenet(gs_kernels *k, int max_batch, gs_dtype compute, gs_model **out,
                        gs_err *e) {
  static const gs_layer_def defs[] = {
      {GS_L_CONV, 6, 5},    {GS_L_RELU, 0, 0},   {GS_L_POOL, 0, 0},  {GS_L_CONV, 16, 5},
      {GS_L_RELU, 0, 0},    {GS_L_POOL, 0, 0},   {GS_L_FLATTEN, 0, 0}, {GS_L_LINEAR, 120, 0},
      {GS_L_RELU, 0, 0},    {GS_L_LINEAR, 84, 0}, {GS_L_RELU, 0, 0},  {GS_L_LINEAR, 10, 0},
  };
  int rc = gs_model_create_seq(defs, (int)(sizeof defs / sizeof defs[0]), 3, 32, 32, false, k,
                               max_batch, compute, out, e);
  if (rc == 0) snprintf((*out)->desc, sizeof (*out)->desc, "lenet");
  return rc;
}

