/* trainer.c: the training loop of worker.h.
 *
 * One step, as gs_trainer_run does it:
 *
 *   data      next `batch` indices of this rank's shard (sampler.c; a new
 *             epoch's order when the shard is used up, and a smaller last
 *             batch when the shard is not a multiple of the batch, as
 *             PyTorch's DataLoader(drop_last=False)), bytes -> floats, to
 *             the device
 *   begin_step(step)
 *   forward   model->forward: logits, mean loss, argmax hits
 *   backward  model->backward with the loss scale; every tensor it finishes
 *             calls grad_ready(), which counts down the tensor's bucket and
 *             hands over (bucket_ready) every bucket that is complete, in
 *             bucket order
 *   end_step  the backend reduces, runs the optimizer (or skips the step on
 *             inf/NaN) and reports its share of the time
 *   record    a gs_step_row, spans, the step callback
 *
 * Spans from the backend's threads arrive through trainer_span() under a
 * mutex; times are converted from gs_now() to gs_wall() with an offset
 * taken once, so ranks on one host share a timeline. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "worker/data.h"
#include "worker/model.h"
#include "worker/sampler.h"
#include "worker/trainer.h"
#include "worker/worker.h"

#define MiB (1024.0 * 1024.0)

void gs_train_opts_default(gs_train_opts *o) {
  *o = (gs_train_opts){
      .model = "mlp:784-1024-1024-10",
      .data = "synthetic",
      .batch = 128,
      .steps = 30,
      .lr = 0.01f,
      .momentum = 0.9f,
      .weight_decay = 0.0f,
      .seed = 1,
      .shuffle = true,
      .drop_last = false,
      .precision = GS_F32,
      .loss_scale = 0.0f,
      .dynamic_scale = false,
      .compute_ms = 20.0,
      .rank = 0,
      .world = 1,
      .bucket_mb = 25.0,
      .first_bucket_mb = 1.0,
      .load_params = NULL,
      .synthetic_samples = 60000,
  };
  gs_compress_default(&o->compress);
}

/* ---- spans ---- */

static void add_span(gs_trainer *t, const char *name, int bucket, double t0, double t1,
                     int track) {
  pthread_mutex_lock(&t->span_lock);
  if (t->nspans == t->capspans) {
    size_t cap = t->capspans ? 2 * t->capspans : 1024;
    gs_span *s = realloc(t->spans, cap * sizeof *s);
    if (!s) {  /* a lost span is not worth failing a run over */
      pthread_mutex_unlock(&t->span_lock);
      return;
    }
    t->spans = s;
    t->capspans = cap;
  }
  gs_span *s = &t->spans[t->nspans++];
  s->t0 = t0 + t->wall_offset;
  s->t1 = t1 + t->wall_offset;
  s->track = track;
  s->bucket = bucket;
  snprintf(s->name, sizeof s->name, "%s", name);
  pthread_mutex_unlock(&t->span_lock);
}

static void trainer_span(void *ctx, const char *name, int bucket, double t0, double t1,
                         int track) {
  add_span(ctx, name, bucket, t0, t1, track);
}

/* ---- creation ---- */

static int check_opts(const gs_train_opts *o, gs_err *e) {
  if (o->batch <= 0) return GS_FAIL(e, GS_EINVAL, "--batch %d: must be positive", o->batch);
  if (o->steps < 0) return GS_FAIL(e, GS_EINVAL, "--steps %lld: must be >= 0", (long long)o->steps);
  if (o->world <= 0 || o->rank < 0 || o->rank >= o->world)
    return GS_FAIL(e, GS_EINVAL, "rank %d is outside world %d", o->rank, o->world);
  if (!isfinite(o->lr) || o->lr < 0) return GS_FAIL(e, GS_EINVAL, "--lr %g: must be >= 0", o->lr);
  if (!isfinite(o->momentum) || o->momentum < 0)
    return GS_FAIL(e, GS_EINVAL, "--momentum %g: must be >= 0", o->momentum);
  if (!isfinite(o->weight_decay) || o->weight_decay < 0)
    return GS_FAIL(e, GS_EINVAL, "--weight-decay %g: must be >= 0", o->weight_decay);
  if (o->precision != GS_F32 && o->precision != GS_F16 && o->precision != GS_BF16)
    return GS_FAIL(e, GS_EINVAL, "--precision: unknown dtype %d", (int)o->precision);
  if (!(o->bucket_mb >= 0) || !(o->first_bucket_mb >= 0) || o->bucket_mb > 1e6 ||
      o->first_bucket_mb > 1e6)
    return GS_FAIL(e, GS_EINVAL, "--bucket-mb %g / --first-bucket-mb %g: must be between 0 and 1e6",
                   o->bucket_mb, o->first_bucket_mb);
  if (o->compress.kind != GS_COMPRESS_NONE && o->precision != GS_F32)
    return GS_FAIL(e, GS_EINVAL, "--compress %s with --precision %s: compression works on fp32 "
                   "gradients (fp16 and bf16 already travel in 16 bits); give --precision fp32",
                   gs_compress_spec(&o->compress, (char[32]){0}, 32),
                   gs_dtype_name(o->precision));
  if (!isfinite(o->loss_scale))
    return GS_FAIL(e, GS_EINVAL, "--loss-scale %g: must be finite", o->loss_scale);
  const gs_straggle *g = &o->straggle;
  if (g->nslow < 0 || g->nslow > GS_SLOW_MAX ||
      (g->nslow > 0 && !(g->factor >= 1 && g->factor <= 1000)))
    return GS_FAIL(e, GS_EINVAL, "--slow: %d ranks with factor %g (want at most %d ranks, a "
                   "factor in [1, 1000])", g->nslow, g->factor, GS_SLOW_MAX);
  if (!(g->jitter_cv >= 0 && g->jitter_cv <= 10))
    return GS_FAIL(e, GS_EINVAL, "--jitter %g: must be in [0, 10]", g->jitter_cv);
  return GS_OK;
}

/* The dataset where the kernels run (see dpixels): a GPU gets a copy of
 * the pixels (one byte each) and labels, and room for the indices. */
static int place_data(gs_trainer *t, gs_err *e) {
  gs_kernels *k = t->k;
  const gs_dataset *d = t->d;
  if (k->device == GS_DEV_CPU) {
    t->dpixels = d->pixels;
    t->dlabels = d->labels;
    t->dshard = t->shard;
    return GS_OK;
  }
  size_t npix = (size_t)d->n * d->dim, nlab = (size_t)d->n * sizeof(int32_t);
  uint8_t *pix = k->alloc(k, npix ? npix : 1);
  int32_t *lab = k->alloc(k, nlab ? nlab : 1);
  t->dshard = k->alloc(k, ((size_t)t->sampler.num_samples + 1) * sizeof(int64_t));
  t->didx = k->alloc(k, (size_t)t->o.batch * sizeof(int64_t));
  t->dpixels = pix;
  t->dlabels = lab;
  t->device_data = true;
  if (pix && lab) {
    k->to_device(k, pix, d->pixels, npix);
    k->to_device(k, lab, d->labels, nlab);
  }
  int rc = k->sync(k, e);
  if (rc || !pix || !lab || !t->dshard || !t->didx)
    return GS_FAIL(e, rc ? rc : GS_ENOMEM, "out of device memory for the dataset (%zu bytes of "
                   "pixels and labels, %s)", npix + nlab, d->desc);
  return GS_OK;
}

/* The model's data: the dataset its input asks for and this rank's shard
 * of it (the sampler), placed where the kernels run; a profile without
 * input (its compute emulated) reads none. */
static int open_data(gs_trainer *t, const gs_train_opts *o, gs_err *e) {
  if (t->m->in_size == 0) {
    if (strcmp(t->data_spec, "synthetic") != 0)
      return GS_FAIL(e, GS_EINVAL, "--data %s: the %s profile reads no data (its compute is "
                     "emulated); leave --data at synthetic", t->data_spec, t->model_spec);
    return GS_OK;
  }
  gs_data_want want = {.c = t->m->in_c, .h = t->m->in_h, .w = t->m->in_w,
                       .flat = t->m->flat, .classes = t->m->classes,
                       .synthetic_n = o->synthetic_samples, .seed = o->seed};
  int rc = gs_data_open(t->data_spec, &want, &t->d, e);
  if (rc == 0)
    rc = gs_sampler_init(&t->sampler, t->d->n, o->rank, o->world, o->shuffle, o->drop_last,
                         o->seed, e);
  if (rc == 0) {
    t->shard = gs_alloc((size_t)t->sampler.num_samples * sizeof *t->shard, e);
    if (!t->shard) rc = GS_ENOMEM;
  }
  if (rc == 0) rc = place_data(t, e);
  return rc;
}

/* The parameters and their gradients where the kernels run: PyTorch's
 * init from the seed, or a checkpoint (--load-params). */
static int init_params(gs_trainer *t, const gs_train_opts *o, gs_err *e) {
  gs_kernels *k = t->k;
  size_t bytes = t->m->nparams * sizeof(float);
  float *host = malloc(bytes);
  t->params = k->alloc(k, bytes);
  t->grads = k->alloc(k, bytes);
  int rc = GS_OK;
  if (!host || !t->params || !t->grads) {
    k->sync(k, e);
    rc = GS_FAIL(e, GS_ENOMEM, "out of memory for %zu parameters", t->m->nparams);
  }
  if (rc == 0) {
    if (o->load_params) rc = gs_ckpt_load(o->load_params, t->m->tensors, t->m->ntensors, host, e);
    else gs_model_init_params(t->m, o->seed, host);
  }
  if (rc == 0) {
    k->to_device(k, t->params, host, t->m->nparams * sizeof(float));
    rc = k->sync(k, e);
  }
  free(host);
  return rc;
}

/* Where tensor i starts in the buffers the backend is given: the model's,
 * or the compact copy of the parameters that train (--freeze). */
static size_t sync_offset(const gs_trainer *t, int i) {
  return t->toff ? t->toff[i] : t->m->tensors[i].offset;
}
static bool trains(const gs_trainer *t, int i) { return !t->frozen || !t->frozen[i]; }

/* What compression sees of each tensor that trains: PyTorch's
 * view(shape[0], -1); t->nctensors of them. */
static int compress_views(gs_trainer *t, gs_err *e) {
  t->ctensors = malloc((size_t)t->m->ntensors * sizeof *t->ctensors);
  if (!t->ctensors) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  t->nctensors = 0;
  for (int i = 0; i < t->m->ntensors; i++) {
    const gs_tensor *x = &t->m->tensors[i];
    if (!trains(t, i)) continue;
    size_t rows = x->ndim > 0 && x->shape[0] > 0 ? (size_t)x->shape[0] : x->count;
    if (rows == 0 || x->count % rows) rows = x->count;
    t->ctensors[t->nctensors++] = (gs_compress_tensor){
        .offset = sync_offset(t, i), .rows = rows, .cols = rows ? x->count / rows : 0};
  }
  return GS_OK;
}

/* Each tensor's bucket: the one its first element is in; an empty tensor at
 * a bucket's end, the bucket that ends there; else the last; none (-1) for
 * a frozen one. */
static void bucket_of_tensors(gs_trainer *t) {
  for (int i = 0; i < t->m->ntensors; i++) {
    size_t off = sync_offset(t, i);
    t->tensor_bucket[i] = -1;
    if (!trains(t, i)) continue;
    for (int b = 0; b < t->nbuckets; b++)
      if (off >= t->buckets[b].offset && off < t->buckets[b].offset + t->buckets[b].count)
        t->tensor_bucket[i] = b;
    if (t->tensor_bucket[i] < 0) {
      for (int b = 0; b < t->nbuckets; b++)
        if (off == t->buckets[b].offset + t->buckets[b].count) t->tensor_bucket[i] = b;
    }
    if (t->tensor_bucket[i] < 0) t->tensor_bucket[i] = t->nbuckets - 1;
  }
}

/* Buckets over the gradient buffer of the parameters that train, in the
 * wire dtype's bytes (DDP's rule: the first closes past first_bucket_mb,
 * the others past bucket_mb), and the tensors' countdown to each. */
static int plan_buckets(gs_trainer *t, const gs_train_opts *o, gs_err *e) {
  size_t *sizes = malloc((size_t)t->m->ntensors * sizeof *sizes);
  t->tensor_bucket = malloc((size_t)t->m->ntensors * sizeof *t->tensor_bucket);
  int rc = !sizes || !t->tensor_bucket ? GS_FAIL(e, GS_ENOMEM, "out of memory") : GS_OK;
  int n = 0;
  if (rc == 0) {
    for (int i = 0; i < t->m->ntensors; i++)
      if (trains(t, i)) sizes[n++] = t->m->tensors[i].count;
    rc = gs_plan_buckets(sizes, n, gs_dtype_size(o->precision),
                         (size_t)(o->first_bucket_mb * MiB), (size_t)(o->bucket_mb * MiB),
                         &t->buckets, &t->nbuckets, e);
  }
  free(sizes);
  if (rc == 0) {
    t->bucket_left = calloc((size_t)t->nbuckets, sizeof *t->bucket_left);
    if (!t->bucket_left) rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  if (rc == 0) bucket_of_tensors(t);
  return rc;
}

/* Loss scaling: --loss-scale, else GradScaler's dynamic 65536 for fp16 and
 * none (1, static) otherwise. */
static void init_scaler(gs_trainer *t, const gs_train_opts *o) {
  float s = o->loss_scale;
  bool dyn = o->dynamic_scale;
  if (s <= 0) {
    dyn = o->precision == GS_F16;
    s = dyn ? 65536.0f : 1.0f;
  }
  gs_scaler_init(&t->scaler, s, dyn);
  t->scale = s;
}

/* The line that names the model, its tensors and buckets, and the data. */
static void describe(gs_trainer *t) {
  int n = snprintf(t->desc, sizeof t->desc, "%s: %zu parameters in %d tensors, %d bucket%s",
                   t->m->desc, t->m->nparams, t->m->ntensors, t->nbuckets,
                   t->nbuckets == 1 ? "" : "s");
  if (t->frozen && n > 0 && (size_t)n < sizeof t->desc)
    n += snprintf(t->desc + n, sizeof t->desc - (size_t)n, " over %zu parameters that train "
                  "(--freeze %s)", t->ntrain, t->o.freeze);
  if (t->d && n > 0 && (size_t)n < sizeof t->desc)
    snprintf(t->desc + n, sizeof t->desc - (size_t)n, "; %s", t->d->desc);
}

int gs_trainer_create(const gs_train_opts *o, gs_kernels *k, gs_trainer **out, gs_err *e) {
  *out = NULL;
  GS_TRY(check_opts(o, e));
  gs_trainer *t = calloc(1, sizeof *t);
  if (!t) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  pthread_mutex_init(&t->span_lock, NULL);
  t->o = *o;
  t->k = k;
  t->model_spec = strdup(o->model ? o->model : "");
  t->data_spec = strdup(o->data ? o->data : "synthetic");
  t->freeze_spec = o->freeze && *o->freeze ? strdup(o->freeze) : NULL;
  t->o.model = t->model_spec;
  t->o.data = t->data_spec;
  t->o.freeze = t->freeze_spec;
  t->o.load_params = NULL;  /* only used here, not kept */
  t->wall_offset = gs_wall() - gs_now();
  int rc = (!t->model_spec || !t->data_spec || (o->freeze && *o->freeze && !t->freeze_spec))
               ? GS_FAIL(e, GS_ENOMEM, "out of memory") : GS_OK;
  if (rc == 0)
    rc = gs_profile_known(t->model_spec)
             ? gs_model_create_scaled(t->model_spec, k, o->batch, o->precision, o->compute_ms,
                                      o->compute_scale, o->seed, &t->m, e)
             : gs_model_create(t->model_spec, k, o->batch, o->precision, o->compute_ms, o->seed,
                               &t->m, e);
  if (rc == 0) {
    t->m->rank = o->rank;
    rc = open_data(t, o, e);
  }
  if (rc == 0) rc = init_params(t, o, e);
  if (rc == 0) rc = gs_freeze_setup(t, t->freeze_spec, e);
  if (rc == 0) rc = compress_views(t, e);
  if (rc == 0) rc = plan_buckets(t, o, e);
  if (rc) {
    gs_trainer_destroy(t);
    return rc;
  }
  init_scaler(t, o);
  describe(t);
  *out = t;
  return GS_OK;
}

void gs_trainer_destroy(gs_trainer *t) {
  if (!t) return;
  if (t->k) {
    t->k->release(t->k, t->params);
    t->k->release(t->k, t->grads);
  }
  gs_freeze_free(t);
  gs_model_destroy(t->m);
  gs_data_free(t->d);
  gs_sampler_free(&t->sampler);
  if (t->device_data) {
    t->k->release(t->k, (void *)t->dpixels);
    t->k->release(t->k, (void *)t->dlabels);
    t->k->release(t->k, t->dshard);
    t->k->release(t->k, t->didx);
  }
  gs_free(t->shard);
  free(t->buckets);
  free(t->tensor_bucket);
  free(t->ctensors);
  free(t->bucket_left);
  free(t->rows);
  free(t->spans);
  free(t->model_spec);
  free(t->data_spec);
  free(t->freeze_spec);
  pthread_mutex_destroy(&t->span_lock);
  free(t);
}

void gs_trainer_sync_config(gs_trainer *t, gs_sync_config *c) {
  c->k = t->k;
  c->params = t->tparams ? t->tparams : t->params;
  c->grads = t->tgrads ? t->tgrads : t->grads;
  c->n = t->tparams ? t->ntrain : t->m->nparams;
  c->buckets = t->buckets;
  c->nbuckets = t->nbuckets;
  c->sgd = (gs_sgd){t->o.lr, t->o.momentum, t->o.weight_decay};
  c->wire = gs_compress_wire(&t->o.compress, t->o.precision);
  c->compress = t->o.compress;
  c->compress.seed = t->o.seed;
  c->tensors = t->ctensors;
  c->ntensors = t->nctensors;
  c->scaler = t->scaler;
  c->span = trainer_span;
  c->span_ctx = t;
}

/* ---- the loop ---- */

/* backward's notice: tensor i's gradient is final */
static int grad_ready(void *ctx, int tensor, gs_err *e) {
  gs_trainer *t = ctx;
  int b = t->tensor_bucket[tensor];
  if (b < 0) return GS_OK; /* frozen: its gradient goes nowhere */
  if (t->tgrads) gs_freeze_grad(t, tensor);
  if (t->bucket_left[b] == 0)
    return GS_FAIL(e, GS_EINVAL, "backward reported tensor %s twice", t->m->tensors[tensor].name);
  t->bucket_left[b]--;
  while (t->next_ready < t->nbuckets && t->bucket_left[t->next_ready] == 0) {
    double now = gs_now();
    add_span(t, "ready", t->next_ready, now, now, 0);
    int rc = t->sync->ops->bucket_ready(t->sync, t->next_ready, e);
    if (rc) {
      gs_err_prefix(e, "bucket %d: ", t->next_ready);
      return rc;
    }
    t->next_ready++;
  }
  return GS_OK;
}

static uint64_t peak_rss(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)ru.ru_maxrss * 1024u;  /* Linux reports KiB */
}

static int append_row(gs_trainer *t, const gs_step_row *r, gs_err *e) {
  if (t->nrows == t->caprows) {
    size_t cap = t->caprows ? 2 * t->caprows : 256;
    gs_step_row *p = realloc(t->rows, cap * sizeof *p);
    if (!p) return GS_FAIL(e, GS_ENOMEM, "out of memory recording step rows");
    t->rows = p;
    t->caprows = cap;
  }
  t->rows[t->nrows++] = *r;
  return GS_OK;
}

/* The next batch of this rank's shard into the model's input. */
static int next_batch(gs_trainer *t, int *count, gs_err *e) {
  if (!t->d) {
    *count = t->o.batch;
    return GS_OK;
  }
  gs_kernels *k = t->k;
  bool fresh = false;
  if (t->epoch == 0 && t->pos == 0 && t->sampler.epoch < 0) {
    gs_sampler_epoch(&t->sampler, 0, t->shard);
    fresh = true;
  }
  if (t->pos >= t->sampler.num_samples) {
    t->epoch++;
    t->pos = 0;
    gs_sampler_epoch(&t->sampler, t->epoch, t->shard);
    fresh = true;
  }
  if (fresh && t->device_data)
    k->to_device(k, t->dshard, t->shard, (size_t)t->sampler.num_samples * sizeof *t->shard);
  int64_t left = t->sampler.num_samples - t->pos;
  int n = left < t->o.batch ? (int)left : t->o.batch;
  /* queued, not waited for: forward's sync reports a failure */
  k->gather_batch(k, n, t->d->dim, t->dpixels, t->dlabels, t->dshard + t->pos, t->m->input,
                  t->m->labels);
  t->pos += n;
  *count = n;
  return GS_OK;
}

static int one_step(gs_trainer *t, gs_sync *s, gs_step_row *row, gs_err *e) {
  gs_kernels *k = t->k;
  double t0 = gs_now();
  *row = (gs_step_row){.step = t->step, .rank = t->o.rank, .scale = t->scale};
  row->t_start = t0 + t->wall_offset;
  int n = 0;
  GS_TRY(next_batch(t, &n, e));
  row->epoch = (int32_t)t->epoch;
  double t1 = gs_now();
  add_span(t, "data", -1, t0, t1, 0);
  t->m->step = t->step;
  int rc = s->ops->begin_step(s, t->step, e);
  if (rc) {
    gs_err_prefix(e, "begin_step: ");
    return rc;
  }
  gs_freeze_params_out(t); /* a stale ps may have brought parameters */
  float loss = 0.0f;
  int correct = 0;
  double t2 = gs_now();
  GS_TRY(t->m->ops->forward(t->m, t->params, n, &loss, &correct, e));
  double t3 = gs_now();
  add_span(t, "forward", -1, t2, t3, 0);
  /* a straggler: the step's compute stretched before backward hands over
   * any bucket; it counts as forward time (the row's compute) */
  double m = gs_straggle_multiplier(&t->o.straggle, t->o.seed, t->o.rank, t->step);
  if (m > 1) {
    double base = (t3 - t2) + (t->step > 0 && t->last_backward_s > 0 ? t->last_backward_s
                                                                      : 2 * (t3 - t2));
    gs_busy_work((m - 1) * base);
    double t3b = gs_now();
    add_span(t, "straggle", -1, t3, t3b, 0);
    t3 = t3b;
  }
  for (int b = 0; b < t->nbuckets; b++) t->bucket_left[b] = 0;
  for (int i = 0; i < t->m->ntensors; i++)
    if (t->tensor_bucket[i] >= 0) t->bucket_left[t->tensor_bucket[i]]++;
  t->next_ready = 0;
  GS_TRY(t->m->ops->backward(t->m, t->params, t->grads, n, t->scale, grad_ready, t, e));
  if (t->next_ready != t->nbuckets)
    return GS_FAIL(e, GS_EINVAL, "backward finished with %d of %d buckets ready", t->next_ready,
                   t->nbuckets);
  double t4 = gs_now();
  add_span(t, "backward", -1, t3, t4, 0);
  t->last_backward_s = t4 - t3;
  gs_sync_stats st = {0};
  rc = s->ops->end_step(s, &st, e);
  if (rc) {
    gs_err_prefix(e, "end_step: ");
    return rc;
  }
  gs_freeze_params_out(t);
  GS_TRY(k->sync(k, e));
  double t5 = gs_now();
  row->t_end = t5 + t->wall_offset;
  row->step_s = t5 - t0;
  row->data_s = t1 - t0;
  row->forward_s = t3 - t2;
  row->backward_s = t4 - t3;
  row->wait_s = st.wait_s;
  row->reduce_s = st.reduce_s;
  row->update_s = st.update_s;
  row->bytes_sent = st.bytes_sent;
  row->bytes_recv = st.bytes_recv;
  row->loss = loss;
  row->skipped = st.skipped;
  row->staleness = st.staleness;
  row->correct = correct;
  row->samples = n;
  row->rss_bytes = peak_rss();
  row->has_server = st.has_server;
  row->server_reduce_s = st.server_reduce_s;
  row->server_update_s = st.server_update_s;
  row->server_bytes_sent = st.server_bytes_sent;
  row->server_bytes_recv = st.server_bytes_recv;
  if (st.scale > 0) t->scale = st.scale;
  return GS_OK;
}

int gs_trainer_run(gs_trainer *t, gs_sync *s, gs_step_cb cb, void *ctx, gs_err *e) {
  if (!s) return GS_FAIL(e, GS_EINVAL, "gs_trainer_run: no backend");
  t->sync = s;
  int rc = GS_OK;
  for (int64_t i = 0; i < t->o.steps; i++) {
    if (gs_interrupted) {
      rc = GS_FAIL(e, GS_EINTR, "rank %d: interrupted at step %lld", t->o.rank,
                   (long long)t->step);
      break;
    }
    gs_step_row row;
    rc = one_step(t, s, &row, e);
    if (rc) {
      gs_err_prefix(e, "rank %d, step %lld: ", t->o.rank, (long long)t->step);
      break;
    }
    t->step++;
    rc = append_row(t, &row, e);
    if (rc) break;
    if (cb && (rc = cb(ctx, &row)) != 0) {
      GS_FAIL(e, rc, "rank %d: stopped by the step callback after step %lld (code %d)",
              t->o.rank, (long long)row.step, rc);
      break;
    }
  }
  t->sync = NULL;
  return rc;
}

/* backward's notice without a backend: nothing to hand over (a gradient
 * that trains still goes to the compact copy, where the caller reads it) */
static int no_handover(void *ctx, int tensor, gs_err *e) {
  gs_trainer *t = ctx;
  (void)e;
  if (t->tgrads && !t->frozen[tensor]) gs_freeze_grad(t, tensor);
  return GS_OK;
}

int gs_trainer_gradient(gs_trainer *t, int64_t step, gs_err *e) {
  if (step < 0) return GS_FAIL(e, GS_EINVAL, "rank %d: no step %lld", t->o.rank, (long long)step);
  if (t->d) { /* where next_batch would be at this step: batch-sized steps, epochs rolling */
    int64_t per = (t->sampler.num_samples + t->o.batch - 1) / t->o.batch;
    if (per < 1) return GS_FAIL(e, GS_EINVAL, "rank %d: an empty shard", t->o.rank);
    int64_t epoch = step / per;
    if (t->sampler.epoch != epoch) {
      gs_sampler_epoch(&t->sampler, epoch, t->shard);
      if (t->device_data)
        t->k->to_device(t->k, t->dshard, t->shard,
                        (size_t)t->sampler.num_samples * sizeof *t->shard);
    }
    t->epoch = epoch;
    t->pos = (step % per) * t->o.batch;
  }
  t->step = step;
  gs_freeze_params_out(t); /* the caller set the parameters the backend's way */
  int n = 0;
  GS_TRY(next_batch(t, &n, e));
  t->m->step = step;
  float loss = 0.0f;
  int correct = 0;
  GS_TRY(t->m->ops->forward(t->m, t->params, n, &loss, &correct, e));
  GS_TRY(t->m->ops->backward(t->m, t->params, t->grads, n, t->scale, no_handover, t, e));
  return t->k->sync(t->k, e);
}

const gs_step_row *gs_trainer_rows(const gs_trainer *t, size_t *n) {
  *n = t->nrows;
  return t->rows;
}

const gs_span *gs_trainer_spans(const gs_trainer *t, size_t *n) {
  *n = t->nspans;
  return t->spans;
}

/* ---- checkpoints ---- */

int gs_trainer_save(gs_trainer *t, const char *dir, gs_err *e) {
  size_t bytes = t->m->nparams * sizeof(float);
  float *host = malloc(bytes ? bytes : 1);
  if (!host) return GS_FAIL(e, GS_ENOMEM, "out of memory saving parameters");
  int rc = gs_trainer_copy_params(t, host, e);
  if (rc == GS_OK) rc = gs_ckpt_save(dir, t->m->tensors, t->m->ntensors, host, e);
  free(host);
  return rc;
}

/* ---- facts ---- */

int gs_trainer_copy_params(const gs_trainer *t, float *host, gs_err *e) {
  gs_freeze_params_out(t);
  t->k->to_host(t->k, host, t->params, t->m->nparams * sizeof(float));
  return t->k->sync(t->k, e);
}

size_t gs_trainer_nparams(const gs_trainer *t) { return t->m->nparams; }
const float *gs_trainer_params(const gs_trainer *t) { return t->params; }
int gs_trainer_ntensors(const gs_trainer *t) { return t->m->ntensors; }
const char *gs_trainer_tensor_name(const gs_trainer *t, int i) {
  return i >= 0 && i < t->m->ntensors ? t->m->tensors[i].name : NULL;
}
size_t gs_trainer_tensor_offset(const gs_trainer *t, int i) {
  return i >= 0 && i < t->m->ntensors ? t->m->tensors[i].offset : 0;
}
double gs_trainer_tensor_macs(const gs_trainer *t, int i) {
  return i >= 0 && i < t->m->ntensors ? t->m->tensors[i].macs : 0;
}
double gs_trainer_tensor_backward_s(const gs_trainer *t, int i) {
  return i >= 0 && i < t->m->ntensors ? t->m->tensors[i].bwd_s : 0;
}
bool gs_trainer_profile_compute(const gs_trainer *t, double *fwd_s, double *bwd_s) {
  *fwd_s = t->m->prof_fwd_s;
  *bwd_s = t->m->prof_bwd_s;
  return t->m->prof_batch > 0;
}
int gs_trainer_nbuckets(const gs_trainer *t) { return t->nbuckets; }
int gs_trainer_tensor_bucket(const gs_trainer *t, int i) {
  return i >= 0 && i < t->m->ntensors ? t->tensor_bucket[i] : -1;
}
const char *gs_trainer_describe(const gs_trainer *t) { return t->desc; }
int64_t gs_trainer_shard_size(const gs_trainer *t) { return t->d ? t->sampler.num_samples : 0; }
