/* test_profiles.c: the profiles of worker/profile.c, built from the files
 * tools/profile_model.py wrote (worker/profiles/, shipped inside the
 * program) and from profile:FILE.
 *  - parameter counts of the real networks (torchvision resnet50 and vgg16,
 *    Hugging Face bert-base-uncased with its pooler, CIFAR's VGG-11 with
 *    batch norm), tensor counts, names
 *    and shapes, and the multiply-adds per sample the profiler counted;
 *  - the tensors lie in the order backward made them ready, reversed (the
 *    profile's ready_order), so backward walks them from the last; each
 *    layer's measured times are on one tensor of it, and add up;
 *  - a training step hands buckets over progressively: the first bucket is
 *    ready long before the last one (most of backward lies between them);
 *  - --compute-scale emulates the measured time, scaled to the batch;
 *  - pseudo-gradients are deterministic, and differ between ranks and steps;
 *  - the local backend steps the parameters, in fp32 and fp16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "recorder.h"
#include "worker/model.h"
#include "worker/profile_read.h"
#include "worker/worker.h"

static gs_kernels *K;

static const gs_tensor *find(const gs_model *m, const char *name) {
  for (int i = 0; i < m->ntensors; i++)
    if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
  return NULL;
}

static void shape_is(const gs_model *m, const char *name, int nd, int64_t a, int64_t b, int64_t c,
                     int64_t d) {
  const gs_tensor *t = find(m, name);
  CHECK(t != NULL, "no tensor %s", name);
  if (!t) return;
  int64_t want[4] = {a, b, c, d};
  bool ok = t->ndim == nd;
  for (int i = 0; ok && i < nd; i++) ok = t->shape[i] == want[i];
  CHECK(ok, "%s has the wrong shape", name);
}

/* the model's tensors are the profile's parameters, last ready first, and
 * carry every layer's time once */
static void laid_out_as(const gs_model *m, const char *name) {
  size_t len = 0;
  const char *text = gs_profile_builtin(name, &len);
  CHECK(text != NULL, "%s is not built in", name);
  gs_profile p;
  gs_err e = {0};
  if (!text || gs_profile_parse(text, len, name, &p, &e)) {
    CHECK(0, "%s: %s", name, e.msg);
    return;
  }
  CHECK(m->ntensors == p.nparams);
  double fwd = p.fwd_tail_s, bwd = p.bwd_tail_s, tf = p.fwd_tail_s, tb = p.bwd_tail_s;
  for (int l = 0; l < p.nlayers; l++) fwd += p.layers[l].fwd_s, bwd += p.layers[l].bwd_s;
  for (int i = 0; i < m->ntensors && i < p.nparams; i++) {
    const gs_prof_param *q = &p.params[p.ready[p.nparams - 1 - i]];
    const gs_tensor *t = &m->tensors[i];
    bool same = !strcmp(t->name, q->name) && t->ndim == q->ndim && t->count == q->count;
    for (int d = 0; same && d < q->ndim; d++) same = t->shape[d] == q->shape[d];
    CHECK(same, "%s: tensor %d is %s, the profile's %d-th ready from the end is %s", name, i,
          t->name, i, q->name);
    tf += t->fwd_s;
    tb += t->bwd_s;
  }
  CHECK(fabs(tf - fwd) < 1e-9 * fwd && fabs(tb - bwd) < 1e-9 * bwd,
        "%s: the tensors carry %g s forward and %g s backward, the layers %g and %g", name, tf, tb,
        fwd, bwd);
  CHECK(fabs(m->prof_fwd_s * p.batch - fwd) < 1e-9 * fwd && m->prof_batch == p.batch);
  gs_profile_free(&p);
}

static void counts(void) {
  static const struct {
    const char *name;
    size_t params;
    int tensors;
    double gmacs;  /* per sample: torchvision's model tables (224x224); BERT's matrix
                      products, 12 x 128 x (4 H^2 + 2 H I) with H 768, I 3072 (the
                      attention's products are no layer's own) */
  } want[] = {
      {"resnet50", 25557032, 161, 4.09},
      {"vgg16", 138357544, 32, 15.47},
      {"bert-base", 109482240, 199, 10.87},
      /* CIFAR-10's 32x32 (tools/models/cifar_vgg11.py): the convolutions'
       * 0.1528 G and the classifier's, as the CIFAR tables count them */
      {"vgg11", 9231114, 34, 0.1529},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    gs_err e = {0};
    gs_model *m = NULL;
    CHECK_OK(gs_model_create(want[i].name, K, 8, GS_F32, 0, 0, &m, &e), &e);
    if (!m) continue;
    CHECK(m->nparams == want[i].params, "%s: %zu parameters, expected %zu", want[i].name,
           m->nparams, want[i].params);
    CHECK(m->ntensors == want[i].tensors, "%s: %d tensors, expected %d", want[i].name,
           m->ntensors, want[i].tensors);
    CHECK(m->in_size == 0);
    size_t sum = 0;
    double macs = 0;
    for (int j = 0; j < m->ntensors; j++) {
      CHECK(m->tensors[j].offset == sum);
      sum += m->tensors[j].count;
      macs += m->tensors[j].macs;
    }
    /* within 1% of the published counts (the profiler adds the norms'
       element-wise work) */
    CHECK(fabs(macs / 1e9 / want[i].gmacs - 1) < 0.01, "%s: %.3f GMAC per sample, published %.2f",
          want[i].name, macs / 1e9, want[i].gmacs);
    laid_out_as(m, want[i].name);
    if (!strcmp(want[i].name, "resnet50")) {
      shape_is(m, "layer1.0.downsample.0.weight", 4, 256, 64, 1, 1);
      shape_is(m, "layer3.5.conv2.weight", 4, 256, 256, 3, 3);
      shape_is(m, "layer4.2.conv3.weight", 4, 2048, 512, 1, 1);
      shape_is(m, "layer4.2.bn3.bias", 1, 2048, 0, 0, 0);
      shape_is(m, "fc.weight", 2, 1000, 2048, 0, 0);
      CHECK(find(m, "layer2.1.downsample.0.weight") == NULL);
      /* the first convolution's gradient is backward's last */
      CHECK(!strcmp(m->tensors[0].name, "conv1.weight"), "resnet50: %s ready last",
            m->tensors[0].name);
    } else if (!strcmp(want[i].name, "vgg16")) {
      shape_is(m, "features.28.weight", 4, 512, 512, 3, 3);
      shape_is(m, "classifier.0.weight", 2, 4096, 25088, 0, 0);
      /* 90% of the parameters, under 1% of the work */
      double fc = 0, all = 0;
      for (int j = 0; j < m->ntensors; j++) {
        all += m->tensors[j].macs;
        if (!strncmp(m->tensors[j].name, "classifier.", 11)) fc += m->tensors[j].macs;
      }
      CHECK(fc / all < 0.01 && fc / all > 0.005, "vgg16: classifier %.4f of the work", fc / all);
    } else if (!strcmp(want[i].name, "vgg11")) {
      /* pytorch-cifar's VGG('VGG11'): conv, norm, ReLU at features.i, i+1, i+2 */
      shape_is(m, "features.0.weight", 4, 64, 3, 3, 3);
      shape_is(m, "features.1.bias", 1, 64, 0, 0, 0);
      shape_is(m, "features.15.weight", 4, 512, 256, 3, 3);
      shape_is(m, "features.26.weight", 1, 512, 0, 0, 0);
      shape_is(m, "classifier.weight", 2, 10, 512, 0, 0);
    } else {
      shape_is(m, "embeddings.position_embeddings.weight", 2, 512, 768, 0, 0);
      shape_is(m, "encoder.layer.11.attention.self.value.weight", 2, 768, 768, 0, 0);
      shape_is(m, "encoder.layer.11.intermediate.dense.weight", 2, 3072, 768, 0, 0);
      shape_is(m, "encoder.layer.11.output.dense.weight", 2, 768, 3072, 0, 0);
      shape_is(m, "encoder.layer.0.output.LayerNorm.bias", 1, 768, 0, 0, 0);
    }
    gs_model_destroy(m);
  }
  gs_err e = {0};
  gs_model *m = NULL;
  CHECK(gs_model_create("resnet50", K, 8, GS_F32, -1, 0, &m, &e) == GS_EINVAL);
  e = (gs_err){0};
  CHECK(gs_model_create_scaled("resnet50", K, 8, GS_F32, 0, -1, 0, &m, &e) == GS_EINVAL);
  e = (gs_err){0};
  CHECK(gs_model_create("profile:/no/such/profile.json", K, 8, GS_F32, 0, 0, &m, &e) == GS_EINVAL &&
        strstr(e.msg, "/no/such/profile.json"), "%s", e.msg);
}

/* --compute-scale: the measured time x scale x batch / the profile's batch */
static void scaled(void) {
  gs_model *m = NULL;
  gs_err e = {0};
  /* vgg16 at batch 2: the profile's per-sample time x 2 x scale */
  double scale = 0, per = 0;
  CHECK_OK(gs_model_create_scaled("vgg16", K, 2, GS_F32, 20, 0, 0, &m, &e), &e);
  if (!m) return;
  per = m->prof_fwd_s + m->prof_bwd_s;
  gs_model_destroy(m);
  scale = 0.05 / (2 * per); /* 50 ms per step */
  /* --compute-ms 1 is ignored beside the scale (it would give 50 times less) */
  CHECK_OK(gs_model_create_scaled("vgg16", K, 2, GS_F32, 1, scale, 0, &m, &e), &e);
  if (!m) return;
  CHECK(strstr(m->desc, "50.0 ms") != NULL, "%s", m->desc);
  double best = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = gs_now();
    CHECK_OK(m->ops->forward(m, NULL, 2, NULL, NULL, &e), &e);
    double t1 = gs_now();
    if (t1 - t0 < best) best = t1 - t0;
  }
  double fwd_want = 0.05 * m->prof_fwd_s / per;
  printf("vgg16 x %.3g: forward %.1f ms, %.1f ms wanted\n", scale, best * 1e3, fwd_want * 1e3);
  /* work until the schedule says done: never shorter, longer by a GEMM and
     what a busy machine adds to it */
  CHECK(best >= fwd_want && best < 3 * fwd_want, "forward %.4f s, wanted %.4f s", best,
        fwd_want);
  gs_model_destroy(m);
}

static gs_trainer *make(int rank, int world, gs_dtype p, double compute_ms, int steps) {
  gs_train_opts o;
  gs_train_opts_default(&o);
  o.model = "resnet50";
  o.batch = 32;
  o.steps = steps;
  o.compute_ms = compute_ms;
  o.rank = rank;
  o.world = world;
  o.precision = p;
  gs_err e = {0};
  gs_trainer *t = NULL;
  CHECK_OK(gs_trainer_create(&o, K, &t, &e), &e);
  return t;
}

/* the last step's gradients of a resnet50 run without emulated compute */
static float *grads_after(int rank, int steps) {
  gs_trainer *t = make(rank, 2, GS_F32, 0, steps);
  if (!t) return NULL;
  gs_err e = {0};
  recorder *r = recorder_open(t);
  CHECK_OK(gs_trainer_run(t, &r->base, NULL, NULL, &e), &e);
  float *g = malloc(r->c.n * sizeof(float));
  memcpy(g, r->c.grads, r->c.n * sizeof(float));
  r->base.ops->close(&r->base, true, &e);
  gs_trainer_destroy(t);
  return g;
}

static void progressive(void) {
  gs_trainer *t = make(0, 2, GS_F32, 40, 2);
  if (!t) return;
  gs_err e = {0};
  recorder *r = recorder_open(t);
  CHECK_OK(gs_trainer_run(t, &r->base, NULL, NULL, &e), &e);
  size_t n;
  const gs_step_row *rows = gs_trainer_rows(t, &n);
  CHECK(n == 2 && !r->bad_order && !r->changed && gs_trainer_nbuckets(t) >= 3);
  if (n == 2) {
    double spread = r->t_last - r->t_first, bwd = rows[1].backward_s;
    printf("resnet50, 40 ms emulated: forward %.1f ms, backward %.1f ms, %d buckets, first to "
           "last ready %.1f ms\n", 1e3 * rows[1].forward_s, 1e3 * bwd, gs_trainer_nbuckets(t),
           1e3 * spread);
    CHECK(spread > 0.5 * bwd, "buckets ready within %.3f s of a %.3f s backward", spread, bwd);
    CHECK(rows[1].loss == 0.0f && rows[1].correct == 0 && rows[1].samples == 32);
  }
  /* pseudo-gradients: deterministic, per rank */
  size_t np = gs_trainer_nparams(t);
  float *g1 = malloc(np * sizeof(float));
  memcpy(g1, r->c.grads, np * sizeof(float));
  r->base.ops->close(&r->base, true, &e);
  gs_trainer_destroy(t);  /* ~300 MB each: keep few alive at once */

  float *same = grads_after(0, 2), *other = grads_after(1, 2), *shorter = grads_after(0, 1);
  if (same && other && shorter) {
    CHECK(!memcmp(g1, same, np * sizeof(float)));       /* deterministic */
    CHECK(memcmp(g1, other, np * sizeof(float)) != 0);  /* per rank */
    CHECK(memcmp(g1, shorter, np * sizeof(float)) != 0);  /* per step */
    double mx = 0;
    for (size_t i = 0; i < np; i++) mx = fmax(mx, fabs(g1[i]));
    CHECK(mx > 1e-4 && mx <= 1e-3);
  }
  free(g1);
  free(same);
  free(other);
  free(shorter);
}

/* the local backend steps a profile's parameters, in fp32 and fp16 */
static void local_steps(void) {
  for (int p = GS_F32; p <= GS_F16; p++) {
    gs_trainer *t = make(0, 1, (gs_dtype)p, 5, 3);
    if (!t) continue;
    size_t np = gs_trainer_nparams(t);
    float *before = malloc(np * sizeof(float)), *after = malloc(np * sizeof(float));
    gs_err e = {0};
    CHECK_OK(gs_trainer_copy_params(t, before, &e), &e);
    gs_sync_config c = {.rank = 0, .world = 1};
    gs_trainer_sync_config(t, &c);
    CHECK(c.wire == (gs_dtype)p && c.n == np);
    gs_sync *s = NULL;
    CHECK_OK(gs_sync_single(&c, &s, &e), &e);
    if (s) {
      CHECK_OK(gs_trainer_run(t, s, NULL, NULL, &e), &e);
      s->ops->close(s, true, &e);
    }
    CHECK_OK(gs_trainer_copy_params(t, after, &e), &e);
    size_t moved = 0;
    bool finite = true;
    for (size_t i = 0; i < np; i++) {
      moved += before[i] != after[i];
      finite &= isfinite(after[i]) != 0;
    }
    size_t n;
    const gs_step_row *rows = gs_trainer_rows(t, &n);
    CHECK(finite && moved > np / 2 && n == 3 && !rows[2].skipped,
           "%s: %zu of %zu parameters moved", gs_dtype_name((gs_dtype)p), moved, np);
    free(before);
    free(after);
    gs_trainer_destroy(t);
  }
}

int main(void) {
  gs_err e = {0};
  K = gs_kernels_cpu(1, &e);
  if (!K) return 1;
  counts();
  scaled();
  progressive();
  local_steps();
  K->destroy(K);
  return check_done("test_profiles");
}
