/* test_train.c: the trainer (worker/trainer.c) with the local backend:
 *  - an MLP learns the synthetic data to >= 95% accuracy in 200 steps, and
 *    fp16 / bf16 training gets within one point of fp32 in the same steps;
 *  - determinism: same seed, bitwise the same parameters (fp32 and fp16);
 *    another seed, different ones;
 *  - loss scaling: a fixed 1e30 scale skips every step and leaves the
 *    parameters untouched; a dynamic scale from 2^40 halves on every
 *    overflow, then trains; parameters stay finite;
 *  - GradScaler's rule inside gs_sync_single, step by step (growth after
 *    `interval` clean steps, backoff and skip, momentum's first step);
 *  - buckets handed over in order, each with final gradients (recorder.h);
 *  - epochs roll over with a smaller last batch, as DataLoader does;
 *  - checkpoints: save / load round trip, shape errors naming the file,
 *    replacing an old checkpoint, refusing to clobber other files;
 *  - spans and rows are recorded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/check.h"
#include "recorder.h"
#include "worker/worker.h"

static gs_kernels *K;

static gs_train_opts small_opts(void) {
  gs_train_opts o;
  gs_train_opts_default(&o);
  o.model = "mlp:784-64-10";
  o.batch = 32;
  o.steps = 200;
  o.lr = 0.01f;
  o.seed = 1;
  o.synthetic_samples = 2000;
  return o;
}

/* train with the local backend; returns the trainer (caller destroys) */
static gs_trainer *train(const gs_train_opts *o) {
  gs_err e = {0};
  gs_trainer *t = NULL;
  CHECK_OK(gs_trainer_create(o, K, &t, &e), &e);
  if (!t) return NULL;
  gs_sync_config c = {.rank = 0, .world = 1};
  gs_trainer_sync_config(t, &c);
  gs_sync *s = NULL;
  CHECK_OK(gs_sync_single(&c, &s, &e), &e);
  if (s) {
    CHECK_OK(gs_trainer_run(t, s, NULL, NULL, &e), &e);
    s->ops->close(s, true, &e);
  }
  return t;
}

static float *params_of(gs_trainer *t) {
  gs_err e = {0};
  float *p = malloc(gs_trainer_nparams(t) * sizeof *p);
  CHECK_OK(gs_trainer_copy_params(t, p, &e), &e);
  return p;
}

static void accuracy(void) {
  double acc[3] = {0}, loss;
  for (int dt = 0; dt < 3; dt++) {
    gs_train_opts o = small_opts();
    o.precision = (gs_dtype)dt;
    gs_trainer *t = train(&o);
    if (!t) continue;
    gs_err e = {0};
    CHECK_OK(gs_trainer_evaluate(t, 0, &acc[dt], &loss, &e), &e);
    size_t n;
    const gs_step_row *rows = gs_trainer_rows(t, &n);
    int skipped = 0;
    for (size_t i = 0; i < n; i++) skipped += rows[i].skipped;
    printf("mlp:784-64-10 %s: accuracy %.2f%% after 200 steps, loss %.4f, %d skipped\n",
           gs_dtype_name((gs_dtype)dt), 100 * acc[dt], loss, skipped);
    CHECK(n == 200);
    gs_trainer_destroy(t);
  }
  CHECK(acc[0] >= 0.95, "fp32 accuracy %.4f", acc[0]);
  CHECK(acc[1] >= acc[0] - 0.01, "fp16 %.4f vs fp32 %.4f", acc[1], acc[0]);
  CHECK(acc[2] >= acc[0] - 0.01, "bf16 %.4f vs fp32 %.4f", acc[2], acc[0]);
}

static void determinism(void) {
  for (int dt = 0; dt < 2; dt++) {
    gs_train_opts o = small_opts();
    o.model = "mlp:784-32-10";
    o.steps = 25;
    o.precision = (gs_dtype)dt;
    gs_trainer *a = train(&o), *b = train(&o);
    o.seed = 2;
    gs_trainer *c = train(&o);
    if (a && b && c) {
      float *pa = params_of(a), *pb = params_of(b), *pc = params_of(c);
      size_t n = gs_trainer_nparams(a);
      CHECK(!memcmp(pa, pb, n * sizeof *pa), "%s: same seed, different parameters",
             gs_dtype_name((gs_dtype)dt));
      CHECK(memcmp(pa, pc, n * sizeof *pa) != 0);
      free(pa);
      free(pb);
      free(pc);
    }
    gs_trainer_destroy(a);
    gs_trainer_destroy(b);
    gs_trainer_destroy(c);
  }
}

static void overflow(void) {
  /* fixed, absurd scale: every step overflows and is skipped */
  gs_train_opts o = small_opts();
  o.steps = 5;
  o.precision = GS_F16;
  o.loss_scale = 1e30f;
  o.dynamic_scale = false;
  gs_trainer *init = NULL;
  gs_err e = {0};
  CHECK_OK(gs_trainer_create(&o, K, &init, &e), &e);
  gs_trainer *t = train(&o);
  if (t && init) {
    size_t n;
    const gs_step_row *rows = gs_trainer_rows(t, &n);
    for (size_t i = 0; i < n; i++) CHECK(rows[i].skipped && rows[i].scale == 1e30f);
    float *p0 = params_of(init), *p1 = params_of(t);
    CHECK(!memcmp(p0, p1, gs_trainer_nparams(t) * sizeof *p0));
    free(p0);
    free(p1);
  }
  gs_trainer_destroy(t);
  gs_trainer_destroy(init);

  /* dynamic from 2^40: halves on each overflow, then trains */
  o.steps = 80;
  o.loss_scale = 0x1p40f;
  o.dynamic_scale = true;
  t = train(&o);
  if (t) {
    size_t n;
    const gs_step_row *rows = gs_trainer_rows(t, &n);
    int skips = 0;
    float expect = 0x1p40f;
    bool halving = true;
    for (size_t i = 0; i < n; i++) {
      if (rows[i].scale != expect) halving = false;
      if (rows[i].skipped) {
        skips++;
        expect *= 0.5f;
      }
    }
    CHECK(halving, "the scale did not halve exactly once per skipped step");
    CHECK(skips >= 5 && skips < 40, "%d skipped steps", skips);
    CHECK(rows[0].skipped);                               /* 2^40 overflows fp16 at once */
    CHECK(!rows[n - 1].skipped && rows[n - 1].loss < 2.3f);  /* and then it trains */
    float *p = params_of(t);
    bool finite = true;
    for (size_t i = 0; i < gs_trainer_nparams(t); i++) finite &= isfinite(p[i]) != 0;
    CHECK(finite);
    free(p);
    printf("dynamic scale from 2^40: %d steps skipped, final scale %g\n", skips,
           rows[n - 1].scale);
  }
  gs_trainer_destroy(t);
}

/* gs_sync_single on a hand-made buffer: the GradScaler rule step by step */
static void scaler_rule(void) {
  float params[4] = {1, 1, 1, 1}, grads[4];
  gs_bucket b = {0, 4};
  gs_sync_config c = {.rank = 0, .world = 1, .k = K, .params = params, .grads = grads, .n = 4,
                      .buckets = &b, .nbuckets = 1, .sgd = {0.5f, 0.9f, 0.0f}, .wire = GS_F16};
  gs_scaler_init(&c.scaler, 8.0f, true);
  c.scaler.interval = 3;
  gs_sync *s = NULL;
  gs_err e = {0};
  CHECK_OK(gs_sync_single(&c, &s, &e), &e);
  if (!s) return;
  float scale = 8.0f;
  /* step(g): gradients as backward would leave them, times the scale */
  #define STEP(g0, expect_skip, expect_scale)                                  \
    do {                                                                       \
      for (int i = 0; i < 4; i++) grads[i] = (g0) * scale;                     \
      gs_sync_stats st;                                                        \
      CHECK_OK(s->ops->begin_step(s, 0, &e), &e);                              \
      CHECK_OK(s->ops->bucket_ready(s, 0, &e), &e);                            \
      CHECK_OK(s->ops->end_step(s, &st, &e), &e);                              \
      CHECK(st.skipped == (expect_skip) && st.scale == (expect_scale),        \
             "skipped %d scale %g, expected %d %g", st.skipped, st.scale,      \
             (expect_skip), (double)(expect_scale));                           \
      scale = st.scale;                                                        \
    } while (0)
  STEP(INFINITY, true, 4.0f);  /* overflow: skip, halve; momentum untouched */
  CHECK(params[0] == 1.0f);
  STEP(1.0f, false, 4.0f);     /* first real step: buf = g = 1, p = 1 - 0.5 */
  CHECK(params[0] == 0.5f);
  STEP(1.0f, false, 4.0f);     /* buf = 0.9 + 1, p = 0.5 - 0.95 */
  CHECK(params[0] == 0.5f - 0.95f);
  STEP(1.0f, false, 8.0f);     /* third clean step in a row: grow */
  STEP(NAN, true, 4.0f);
  STEP(70000.0f / 4.0f, true, 2.0f);  /* finite in fp32, inf in fp16: the wire decides */
  STEP(0.0f, false, 2.0f);
  /* out of order and missing buckets are errors */
  gs_sync_stats st;
  CHECK_OK(s->ops->begin_step(s, 1, &e), &e);
  gs_err e2 = {0};
  CHECK(s->ops->end_step(s, &st, &e2) != 0 && strstr(e2.msg, "0 of 1 buckets"));
  s->ops->close(s, true, &e);
  #undef STEP
  c.world = 2;
  gs_err e3 = {0};
  CHECK(gs_sync_single(&c, &s, &e3) == GS_EINVAL && strstr(e3.msg, "world 1"));
}

static void buckets_handed_over(void) {
  static const char *models[] = {"mlp:100-300-300-10", "lenet"};
  for (int i = 0; i < 2; i++) {
    gs_train_opts o = small_opts();
    o.model = models[i];
    o.steps = 3;
    o.batch = 8;
    o.synthetic_samples = 50;
    o.bucket_mb = 0.1;
    o.first_bucket_mb = 0.01;
    gs_err e = {0};
    gs_trainer *t = NULL;
    CHECK_OK(gs_trainer_create(&o, K, &t, &e), &e);
    if (!t) continue;
    CHECK(gs_trainer_nbuckets(t) >= 3, "%s: %d buckets", models[i], gs_trainer_nbuckets(t));
    recorder *r = recorder_open(t);
    CHECK_OK(gs_trainer_run(t, &r->base, NULL, NULL, &e), &e);
    CHECK(r->steps == 3 && !r->bad_order && !r->changed);
    CHECK(r->t_first < r->t_last && r->t_last <= r->t_end);
    size_t ns;
    const gs_span *sp = gs_trainer_spans(t, &ns);
    int fwd = 0, bwd = 0, ready = 0;
    for (size_t j = 0; j < ns; j++) {
      CHECK(sp[j].t0 <= sp[j].t1 && fabs(sp[j].t0 - gs_wall()) < 600);
      fwd += !strcmp(sp[j].name, "forward");
      bwd += !strcmp(sp[j].name, "backward");
      ready += !strcmp(sp[j].name, "ready");
    }
    CHECK(fwd == 3 && bwd == 3 && ready == 3 * gs_trainer_nbuckets(t));
    r->base.ops->close(&r->base, true, &e);
    gs_trainer_destroy(t);
  }
}

static void epochs(void) {
  gs_train_opts o = small_opts();
  o.model = "mlp:784-16-10";
  o.synthetic_samples = 100;
  o.steps = 9;
  o.shuffle = false;
  gs_trainer *t = train(&o);
  if (!t) return;
  size_t n;
  const gs_step_row *r = gs_trainer_rows(t, &n);
  CHECK(n == 9);
  static const int samples[9] = {32, 32, 32, 4, 32, 32, 32, 4, 32};
  static const int epoch[9] = {0, 0, 0, 0, 1, 1, 1, 1, 2};
  for (size_t i = 0; i < n && i < 9; i++) {
    CHECK(r[i].samples == samples[i] && r[i].epoch == epoch[i], "step %zu: %d samples, epoch %d",
           i, r[i].samples, r[i].epoch);
    CHECK(r[i].step == (int64_t)i && r[i].step_s > 0 && r[i].forward_s > 0 &&
          r[i].backward_s > 0 && r[i].update_s > 0 && r[i].rss_bytes > 0 && isfinite(r[i].loss));
    CHECK(r[i].t_end > r[i].t_start && r[i].step_s >= r[i].forward_s + r[i].backward_s);
  }
  CHECK(gs_trainer_shard_size(t) == 100);
  gs_trainer_destroy(t);
}

static bool exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static void checkpoints(void) {
  char dir[64], path[256], cmd[128];
  snprintf(dir, sizeof dir, "/tmp/gs_test_ckpt_XXXXXX");
  if (!mkdtemp(dir)) return;
  gs_train_opts o = small_opts();
  o.model = "mlp:784-32-10";
  o.steps = 3;
  gs_trainer *t = train(&o);
  if (!t) return;
  gs_err e = {0};
  snprintf(path, sizeof path, "%s/ck", dir);
  CHECK_OK(gs_trainer_save(t, path, &e), &e);
  /* load into a fresh trainer: the same parameters */
  gs_train_opts lo = o;
  lo.load_params = path;
  lo.seed = 99;  /* the checkpoint wins over the seed */
  gs_trainer *u = NULL;
  CHECK_OK(gs_trainer_create(&lo, K, &u, &e), &e);
  if (u) {
    float *a = params_of(t), *b = params_of(u);
    CHECK(!memcmp(a, b, gs_trainer_nparams(t) * sizeof *a));
    free(a);
    free(b);
  }
  gs_trainer_destroy(u);
  /* another model cannot load it: the error names the file and the shapes */
  lo.model = "mlp:784-16-10";
  gs_err le = {0};
  u = NULL;
  CHECK(gs_trainer_create(&lo, K, &u, &le) != 0 && !u);
  CHECK(strstr(le.msg, "fc1.weight.npy") && strstr(le.msg, "(32, 784)") &&
         strstr(le.msg, "(16, 784)"), "message: %s", le.msg);
  lo.model = "lenet";
  gs_err le2 = {0};
  CHECK(gs_trainer_create(&lo, K, &u, &le2) != 0 && strstr(le2.msg, "conv1.weight.npy"));
  /* saving again replaces the old checkpoint atomically, leaving no temporaries */
  CHECK_OK(gs_trainer_save(t, path, &e), &e);
  snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c tmp", dir);
  FILE *p = popen(cmd, "r");
  int tmps = -1;
  if (p && fscanf(p, "%d", &tmps) != 1) tmps = -1;
  if (p) pclose(p);
  CHECK(tmps == 0);
  /* a directory with other files is never clobbered */
  char other[300];
  snprintf(other, sizeof other, "%s/notes.txt", path);
  FILE *f = fopen(other, "w");
  if (f) fclose(f);
  gs_err se = {0};
  CHECK(gs_trainer_save(t, path, &se) != 0 && strstr(se.msg, "notes.txt"));
  CHECK(exists(other));
  snprintf(other, sizeof other, "%s/fc1.weight.npy", path);
  CHECK(exists(other));
  gs_trainer_destroy(t);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static void bad_options(void) {
  gs_train_opts o = small_opts();
  gs_err e = {0};
  gs_trainer *t = NULL;
  o.batch = 0;
  CHECK(gs_trainer_create(&o, K, &t, &e) == GS_EINVAL && strstr(e.msg, "--batch"));
  o = small_opts();
  o.model = "resnet50";
  o.data = "idx:a,b";
  gs_err e2 = {0};
  CHECK(gs_trainer_create(&o, K, &t, &e2) == GS_EINVAL && strstr(e2.msg, "reads no data"));
  o = small_opts();
  o.model = "mlp:100-10";
  o.data = "cifar10:/nonexistent/file.bin";
  gs_err e3 = {0};
  CHECK(gs_trainer_create(&o, K, &t, &e3) != 0 && strstr(e3.msg, "3072"));
  o.model = "lenet";
  gs_err e4 = {0};
  CHECK(gs_trainer_create(&o, K, &t, &e4) == GS_EIO && strstr(e4.msg, "/nonexistent/file.bin"));
}

int main(void) {
  gs_err e = {0};
  K = gs_kernels_cpu(1, &e);
  if (!K) return 1;
  accuracy();
  determinism();
  overflow();
  scaler_rule();
  buckets_handed_over();
  epochs();
  checkpoints();
  bad_options();
  K->destroy(K);
  return check_done("test_train");
}
