/* profile.c: gradient-shape profiles of well-known networks, for measuring
 * communication at real model sizes without running the real networks.
 *
 * Each profile is the real list of parameter tensors, in PyTorch's
 * parameters() order with state_dict names:
 *   resnet50   torchvision.models.resnet50()           25,557,032 parameters
 *   vgg16      torchvision.models.vgg16()             138,357,544
 *   bert-base  transformers BertModel (uncased, with   109,482,240
 *              the pooler), hidden 768, 12 layers
 *   vgg11      VGG-11 with batch norm for CIFAR-10         9,231,114
 *              (32x32 inputs, one Linear 512->10: the
 *              pytorch-cifar model UW-Madison's CS744
 *              trains; docs/labs/hosts-ps.md)
 * built by the loops below rather than typed out (the counts are checked
 * by tests/worker/test_profiles.c).
 *
 * Compute is emulated with real work: a step costs about compute_ms of
 * 128x128x128 GEMMs through the kernels table (gemm_lp in mixed precision),
 * one third in forward and two thirds in backward, split over the tensors
 * in proportion to the multiply-adds of the layer each belongs to (per
 * sample: 224x224 images, 128-token sequences), not to their sizes: in a
 * real backward VGG-16's fully connected layers, 90% of its parameters and
 * under 1% of its work, are done almost at once. The time of one GEMM is measured once when
 * the profile is created (the fastest of a few trials, so a busy machine at
 * start does not inflate the plan). Backward walks the tensors from the last
 * to the first: each tensor's share of GEMMs, then its pseudo-gradient, then
 * the hook, so buckets become ready progressively as in a real backward.
 *
 * Pseudo-gradients are deterministic: a fixed pattern of 65,536 values
 * uniform in (-1e-3, 1e-3) from the seed, times the loss scale, copied in at
 * a phase that depends on the tensor, the step and the rank (so ranks push
 * different gradients and every step differs). The loss is a dummy 0 and
 * accuracy 0: profiles measure time and bytes, not learning. Parameters
 * still go through the optimizer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/model.h"
#include "kernels/rng.h"

#define UNIT 128
#define PATTERN 65536

typedef struct prof_model {
  gs_model base;
  int *fwd_units, *bwd_units;   /* GEMMs per tensor */
  float *a, *b, *c;             /* UNIT x UNIT operands, fp32 */
  void *alp, *blp;              /* ... in the compute dtype */
  float *pattern;               /* device, PATTERN values times pattern_scale */
  float *pattern_host;          /* unscaled */
  float pattern_scale;
  double unit_s;
} prof_model;

/* ---- tables ---- */

/* macs: the multiply-adds per sample of the work that produces the
 * tensor's gradient (its layer's), which the emulated compute follows */
static int add(gs_model *m, gs_err *e, double macs, bool uniform, float v, int ndim, int64_t d0,
               int64_t d1, int64_t d2, int64_t d3, const char *fmt, ...)
    __attribute__((format(printf, 11, 12)));
static int add(gs_model *m, gs_err *e, double macs, bool uniform, float v, int ndim, int64_t d0,
               int64_t d1, int64_t d2, int64_t d3, const char *fmt, ...) {
  char name[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  int64_t shape[4] = {d0, d1, d2, d3};
  int rc = gs_model_add_tensor(m, name, ndim, shape, uniform, v, e);
  if (rc >= 0) m->tensors[rc].macs = macs;
  return rc < 0 ? rc : 0;
}

/* nn.Conv2d / nn.Linear weight: uniform(+-1/sqrt(fan_in)); hw: output
 * pixels, tok: positions the layer runs at */
#define CONV(oc, ic, kh, kw, hw, ...)                                                          \
  add(m, e, (double)(oc) * (ic) * (kh) * (kw) * (hw), true,                                    \
      1.0f / sqrtf((float)((ic) * (kh) * (kw))), 4, oc, ic, kh, kw, __VA_ARGS__)
#define LINEAR_W(out, in, tok, ...)                                                            \
  add(m, e, (double)(out) * (in) * (tok), true, 1.0f / sqrtf((float)(in)), 2, out, in, 0, 0,   \
      __VA_ARGS__)
#define LINEAR_B(out, in, tok, ...)                                                            \
  add(m, e, (double)(out) * (tok), true, 1.0f / sqrtf((float)(in)), 1, out, 0, 0, 0, __VA_ARGS__)
#define ONES(n, hw, ...) add(m, e, (double)(n) * (hw), false, 1.0f, 1, n, 0, 0, 0, __VA_ARGS__)
#define ZEROS(n, hw, ...) add(m, e, (double)(n) * (hw), false, 0.0f, 1, n, 0, 0, 0, __VA_ARGS__)
/* embeddings: BERT's N(0, 0.02) replaced by a uniform of the same
 * deviation; backward adds tok rows into the table */
#define EMBED(rows, dim, tok, ...)                                                             \
  add(m, e, (double)(dim) * (tok), true, 0.02f * sqrtf(3.0f), 2, rows, dim, 0, 0, __VA_ARGS__)

static int build_resnet50(gs_model *m, gs_err *e) {
  static const int blocks[4] = {3, 4, 6, 3};
  const int stem = 112 * 112; /* conv1 (stride 2) output; the max-pool halves it again */
  int rc = CONV(64, 3, 7, 7, stem, "conv1.weight");
  rc = rc ? rc : ONES(64, stem, "bn1.weight");
  rc = rc ? rc : ZEROS(64, stem, "bn1.bias");
  int inplanes = 64;
  for (int s = 0; s < 4 && !rc; s++) {
    int planes = 64 << s;
    int out = (56 >> s) * (56 >> s);
    for (int b = 0; b < blocks[s] && !rc; b++) {
      int l = s + 1;
      /* the first block of stages 2-4 strides in conv2 (torchvision's v1.5) */
      int in = b == 0 && s > 0 ? 4 * out : out;
      rc = CONV(planes, inplanes, 1, 1, in, "layer%d.%d.conv1.weight", l, b);
      rc = rc ? rc : ONES(planes, in, "layer%d.%d.bn1.weight", l, b);
      rc = rc ? rc : ZEROS(planes, in, "layer%d.%d.bn1.bias", l, b);
      rc = rc ? rc : CONV(planes, planes, 3, 3, out, "layer%d.%d.conv2.weight", l, b);
      rc = rc ? rc : ONES(planes, out, "layer%d.%d.bn2.weight", l, b);
      rc = rc ? rc : ZEROS(planes, out, "layer%d.%d.bn2.bias", l, b);
      rc = rc ? rc : CONV(planes * 4, planes, 1, 1, out, "layer%d.%d.conv3.weight", l, b);
      rc = rc ? rc : ONES(planes * 4, out, "layer%d.%d.bn3.weight", l, b);
      rc = rc ? rc : ZEROS(planes * 4, out, "layer%d.%d.bn3.bias", l, b);
      if (b == 0) {
        rc = rc ? rc : CONV(planes * 4, inplanes, 1, 1, out, "layer%d.0.downsample.0.weight", l);
        rc = rc ? rc : ONES(planes * 4, out, "layer%d.0.downsample.1.weight", l);
        rc = rc ? rc : ZEROS(planes * 4, out, "layer%d.0.downsample.1.bias", l);
      }
      inplanes = planes * 4;
    }
  }
  rc = rc ? rc : LINEAR_W(1000, 2048, 1, "fc.weight");
  rc = rc ? rc : LINEAR_B(1000, 2048, 1, "fc.bias");
  return rc;
}

static int build_vgg16(gs_model *m, gs_err *e) {
  /* torchvision cfg "D"; 0 is a max-pool (one module index, no tensors) */
  static const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0,
                            512, 512, 512, 0, 512, 512, 512, 0};
  int rc = 0, idx = 0, in = 3, side = 224;
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0] && !rc; i++) {
    if (cfg[i] == 0) {
      idx += 1;
      side /= 2;
      continue;
    }
    rc = CONV(cfg[i], in, 3, 3, side * side, "features.%d.weight", idx);
    rc = rc ? rc : LINEAR_B(cfg[i], in * 9, side * side, "features.%d.bias", idx);
    in = cfg[i];
    idx += 2;  /* conv, ReLU */
  }
  /* classifier: Linear, ReLU, Dropout, Linear, ReLU, Dropout, Linear */
  rc = rc ? rc : LINEAR_W(4096, 512 * 7 * 7, 1, "classifier.0.weight");
  rc = rc ? rc : LINEAR_B(4096, 512 * 7 * 7, 1, "classifier.0.bias");
  rc = rc ? rc : LINEAR_W(4096, 4096, 1, "classifier.3.weight");
  rc = rc ? rc : LINEAR_B(4096, 4096, 1, "classifier.3.bias");
  rc = rc ? rc : LINEAR_W(1000, 4096, 1, "classifier.6.weight");
  rc = rc ? rc : LINEAR_B(1000, 4096, 1, "classifier.6.bias");
  return rc;
}

static int build_vgg11(gs_model *m, gs_err *e) {
  /* cfg "A"; 0 is a max-pool. Each conv is features.i (Conv2d 3x3, padding 1),
   * features.i+1 (BatchNorm2d), features.i+2 (ReLU); an AvgPool2d(1) ends the
   * features, without tensors */
  static const int cfg[] = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
  int rc = 0, idx = 0, in = 3, side = 32;
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0] && !rc; i++) {
    if (cfg[i] == 0) {
      idx += 1;
      side /= 2;
      continue;
    }
    rc = CONV(cfg[i], in, 3, 3, side * side, "features.%d.weight", idx);
    rc = rc ? rc : LINEAR_B(cfg[i], in * 9, side * side, "features.%d.bias", idx);
    rc = rc ? rc : ONES(cfg[i], side * side, "features.%d.weight", idx + 1);
    rc = rc ? rc : ZEROS(cfg[i], side * side, "features.%d.bias", idx + 1);
    in = cfg[i];
    idx += 3;
  }
  rc = rc ? rc : LINEAR_W(10, 512, 1, "classifier.weight");
  rc = rc ? rc : LINEAR_B(10, 512, 1, "classifier.bias");
  return rc;
}

static int build_bert_base(gs_model *m, gs_err *e) {
  const int H = 768, I = 3072, T = 128; /* T: tokens in a sample */
  int rc = EMBED(30522, H, T, "embeddings.word_embeddings.weight");
  rc = rc ? rc : EMBED(512, H, T, "embeddings.position_embeddings.weight");
  rc = rc ? rc : EMBED(2, H, T, "embeddings.token_type_embeddings.weight");
  rc = rc ? rc : ONES(H, T, "embeddings.LayerNorm.weight");
  rc = rc ? rc : ZEROS(H, T, "embeddings.LayerNorm.bias");
  static const char *qkv[3] = {"query", "key", "value"};
  for (int l = 0; l < 12 && !rc; l++) {
    for (int j = 0; j < 3 && !rc; j++) {
      /* attention's two T x T x H products have no tensor; backward meets
         them just before value's gradient, so value carries them */
      double core = j == 2 ? 2.0 * T * T * H : 0;
      rc = add(m, e, (double)H * H * T + core, true, 1.0f / sqrtf((float)H), 2, H, H, 0, 0,
               "encoder.layer.%d.attention.self.%s.weight", l, qkv[j]);
      rc = rc ? rc : LINEAR_B(H, H, T, "encoder.layer.%d.attention.self.%s.bias", l, qkv[j]);
    }
    rc = rc ? rc : LINEAR_W(H, H, T, "encoder.layer.%d.attention.output.dense.weight", l);
    rc = rc ? rc : LINEAR_B(H, H, T, "encoder.layer.%d.attention.output.dense.bias", l);
    rc = rc ? rc : ONES(H, T, "encoder.layer.%d.attention.output.LayerNorm.weight", l);
    rc = rc ? rc : ZEROS(H, T, "encoder.layer.%d.attention.output.LayerNorm.bias", l);
    rc = rc ? rc : LINEAR_W(I, H, T, "encoder.layer.%d.intermediate.dense.weight", l);
    rc = rc ? rc : LINEAR_B(I, H, T, "encoder.layer.%d.intermediate.dense.bias", l);
    rc = rc ? rc : LINEAR_W(H, I, T, "encoder.layer.%d.output.dense.weight", l);
    rc = rc ? rc : LINEAR_B(H, I, T, "encoder.layer.%d.output.dense.bias", l);
    rc = rc ? rc : ONES(H, T, "encoder.layer.%d.output.LayerNorm.weight", l);
    rc = rc ? rc : ZEROS(H, T, "encoder.layer.%d.output.LayerNorm.bias", l);
  }
  /* the pooler reads the first token only */
  rc = rc ? rc : LINEAR_W(H, H, 1, "pooler.dense.weight");
  rc = rc ? rc : LINEAR_B(H, H, 1, "pooler.dense.bias");
  return rc;
}

static const struct {
  const char *name;
  int (*build)(gs_model *m, gs_err *e);
} profiles[] = {
    {"resnet50", build_resnet50},
    {"vgg16", build_vgg16},
    {"bert-base", build_bert_base},
    {"vgg11", build_vgg11},
};

bool gs_profile_known(const char *name) {
  for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++)
    if (!strcmp(name, profiles[i].name)) return true;
  return false;
}

/* ---- emulated compute ---- */

static void unit_gemm(prof_model *m) {
  gs_kernels *k = m->base.k;
  if (m->base.compute == GS_F32)
    k->gemm(k, false, false, UNIT, UNIT, UNIT, 1.0f, m->a, UNIT, m->b, UNIT, 0.0f, m->c, UNIT);
  else
    k->gemm_lp(k, m->base.compute, false, false, UNIT, UNIT, UNIT, 1.0f, m->alp, UNIT, m->blp,
               UNIT, 0.0f, m->c, UNIT);
}

static int calibrate(prof_model *m, gs_err *e) {
  gs_kernels *k = m->base.k;
  for (int i = 0; i < 3; i++) unit_gemm(m);
  GS_TRY(k->sync(k, e));
  double best = 1e30;
  for (int trial = 0; trial < 5; trial++) {
    double t0 = gs_now();
    for (int i = 0; i < 8; i++) unit_gemm(m);
    GS_TRY(k->sync(k, e));
    double dt = (gs_now() - t0) / 8;
    if (dt < best) best = dt;
  }
  m->unit_s = best > 0 ? best : 1e-9;
  return GS_OK;
}

/* Split `units` GEMMs over the tensors in proportion to their layers'
 * multiply-adds (cumulative rounding, so the parts add up exactly). */
static void split_units(const gs_model *m, double units, int *out) {
  double total = 0, cum = 0;
  long prev = 0;
  for (int i = 0; i < m->ntensors; i++) total += m->tensors[i].macs;
  for (int i = 0; i < m->ntensors; i++) {
    cum += m->tensors[i].macs;
    long upto = lround(units * cum / total);
    out[i] = (int)(upto - prev);
    prev = upto;
  }
}

static int prof_forward(gs_model *gm, const float *params, int batch, float *loss, int *correct,
                        gs_err *e) {
  prof_model *m = (prof_model *)gm;
  for (int i = 0; i < gm->ntensors; i++)
    for (int u = 0; u < m->fwd_units[i]; u++) unit_gemm(m);
  if (loss) *loss = 0.0f;
  if (correct) *correct = 0;
  return gm->k->sync(gm->k, e);
}

static int set_pattern_scale(prof_model *m, float scale, gs_err *e) {
  gs_kernels *k = m->base.k;
  float *tmp = malloc(PATTERN * sizeof(float));
  if (!tmp) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (int i = 0; i < PATTERN; i++) tmp[i] = m->pattern_host[i] * scale;
  k->to_device(k, m->pattern, tmp, PATTERN * sizeof(float));
  int rc = k->sync(k, e);
  free(tmp);
  if (rc == 0) m->pattern_scale = scale;
  return rc;
}

static int prof_backward(gs_model *gm, const float *params, float *grads, int batch, float scale,
                         gs_grad_hook hook, void *ctx, gs_err *e) {
  prof_model *m = (prof_model *)gm;
  gs_kernels *k = gm->k;
  if (scale != m->pattern_scale) GS_TRY(set_pattern_scale(m, scale, e));
  for (int i = gm->ntensors - 1; i >= 0; i--) {
    const gs_tensor *t = &gm->tensors[i];
    for (int u = 0; u < m->bwd_units[i]; u++) unit_gemm(m);
    size_t phase = (size_t)((t->offset * 2654435761ull + (uint64_t)gm->step * 7919ull +
                             (uint64_t)gm->rank * 104729ull) % PATTERN);
    for (size_t done = 0; done < t->count;) {
      size_t n = PATTERN - phase;
      if (n > t->count - done) n = t->count - done;
      k->copy(k, grads + t->offset + done, m->pattern + phase, n * sizeof(float));
      done += n;
      phase = 0;
    }
    GS_TRY(k->sync(k, e));
    if (hook) GS_TRY(hook(ctx, i, e));
  }
  return GS_OK;
}

static void prof_destroy(gs_model *gm) {
  prof_model *m = (prof_model *)gm;
  gs_kernels *k = gm->k;
  k->release(k, m->a);
  k->release(k, m->b);
  k->release(k, m->c);
  k->release(k, m->alp);
  k->release(k, m->blp);
  k->release(k, m->pattern);
  free(m->pattern_host);
  free(m->fwd_units);
  free(m->bwd_units);
  free(gm->tensors);
  free(m);
}

static const gs_model_ops prof_ops = {prof_forward, prof_backward, prof_destroy};

int gs_model_create_profile(const char *name, gs_kernels *k, int max_batch, gs_dtype compute,
                            double compute_ms, uint64_t seed, gs_model **out, gs_err *e) {
  *out = NULL;
  if (!(compute_ms >= 0) || compute_ms > 1e6)
    return GS_FAIL(e, GS_EINVAL, "--compute-ms %g: must be between 0 and 1e6", compute_ms);
  prof_model *m = calloc(1, sizeof *m);
  if (!m) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  gs_model *gm = &m->base;
  gm->ops = &prof_ops;
  gm->k = k;
  gm->compute = compute;
  gm->max_batch = max_batch;
  gm->classes = 1;
  snprintf(gm->desc, sizeof gm->desc, "%s (profile, %.1f ms of emulated compute)", name,
           compute_ms);
  int rc = GS_EINVAL;
  for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++)
    if (!strcmp(name, profiles[i].name)) rc = profiles[i].build(gm, e);
  size_t esz = gs_dtype_size(compute);
  if (rc == 0) {
    m->fwd_units = calloc((size_t)gm->ntensors, sizeof(int));
    m->bwd_units = calloc((size_t)gm->ntensors, sizeof(int));
    m->pattern_host = malloc(PATTERN * sizeof(float));
    m->a = k->alloc(k, UNIT * UNIT * sizeof(float));
    m->b = k->alloc(k, UNIT * UNIT * sizeof(float));
    m->c = k->alloc(k, UNIT * UNIT * sizeof(float));
    m->alp = k->alloc(k, UNIT * UNIT * esz);
    m->blp = k->alloc(k, UNIT * UNIT * esz);
    m->pattern = k->alloc(k, PATTERN * sizeof(float));
    rc = k->sync(k, e);
    if (rc == 0 && (!m->fwd_units || !m->bwd_units || !m->pattern_host || !m->a || !m->b ||
                    !m->c || !m->alp || !m->blp || !m->pattern))
      rc = GS_FAIL(e, GS_ENOMEM, "out of memory for the %s profile", name);
  }
  if (rc == 0) {
    gs_rng r;
    gs_rng_seed(&r, seed, GS_STREAM_PROFILE);
    float *tmp = malloc(UNIT * UNIT * sizeof(float));
    if (!tmp) rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
    for (int i = 0; tmp && i < UNIT * UNIT; i++) tmp[i] = gs_rng_uniform(&r) - 0.5f;
    if (tmp) {
      k->to_device(k, m->a, tmp, UNIT * UNIT * sizeof(float));
      k->to_device(k, m->b, tmp, UNIT * UNIT * sizeof(float));
      k->convert(k, compute, m->alp, GS_F32, m->a, UNIT * UNIT);
      k->convert(k, compute, m->blp, GS_F32, m->b, UNIT * UNIT);
    }
    free(tmp);
    for (int i = 0; i < PATTERN; i++)
      m->pattern_host[i] = 1e-3f * (2.0f * gs_rng_uniform(&r) - 1.0f);
    m->pattern_scale = 0.0f;  /* set on first use */
    if (rc == 0) rc = k->sync(k, e);
  }
  if (rc == 0 && compute_ms > 0) rc = calibrate(m, e);
  if (rc == 0 && compute_ms > 0) {
    double units = compute_ms * 1e-3 / m->unit_s;
    split_units(gm, units / 3.0, m->fwd_units);
    split_units(gm, units * 2.0 / 3.0, m->bwd_units);
  }
  if (rc) {
    prof_destroy(gm);
    return rc;
  }
  *out = gm;
  return GS_OK;
}
