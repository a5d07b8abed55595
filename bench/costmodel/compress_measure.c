/* compress_measure.c: the compression's own work, measured on this machine
 * for the cost model (costmodel.h, gs_cm_compress_measure). It takes the
 * model's tensors and buckets from a throwaway trainer, so the shapes are
 * the run's, fills the gradients with a fixed pattern, and runs PowerSGD's
 * arithmetic on each bucket over an all-reduce that does nothing: every
 * rank of any world does exactly this work around its all-reduces (the
 * sums it receives change the numbers, not the operations). The first step
 * builds the state and draws Q, which later steps do not: it is not timed.
 * Top-k's selection and error feedback are timed the same way. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"

static int nothing(void *ctx, float *buf, size_t count, int part, gs_err *e) {
  (void)ctx, (void)buf, (void)count, (void)part, (void)e;
  return GS_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* the median over reps timed steps of each bucket's work, into c */
static int time_powersgd(gs_kernels *k, const gs_sync_config *cfg, int reps,
                         gs_cm_compressed *c, gs_err *e) {
  gs_powersgd *p = NULL;
  gs_compress cc = cfg->compress;
  cc.start = 0;
  double *t = malloc((size_t)reps * (size_t)cfg->nbuckets * sizeof *t);
  int rc = t ? gs_powersgd_create(&cc, k, cfg->tensors, cfg->ntensors, cfg->nbuckets, 1, &p, e)
             : GS_FAIL(e, GS_ENOMEM, "cost model, compression: out of memory");
  for (int s = -1; s < reps && rc == GS_OK; s++) {
    /* a pattern of full rank, new each step, as gradients are */
    for (size_t i = 0; i < cfg->n; i++)
      cfg->grads[i] = (float)((double)((i * 2654435761u + (size_t)(s + 2) * 40503u) % 2003) /
                              2003.0 - 0.5) * 1e-2f;
    for (int b = 0; b < cfg->nbuckets && rc == GS_OK; b++) {
      gs_powersgd_stats st = {0};
      rc = gs_powersgd_bucket(p, b, cfg->grads, cfg->buckets[b].offset, cfg->buckets[b].count,
                              nothing, NULL, &st, e);
      if (s >= 0) t[(size_t)b * (size_t)reps + (size_t)s] = st.compute_s;
    }
  }
  for (int b = 0; b < cfg->nbuckets && rc == GS_OK; b++) {
    double *x = t + (size_t)b * (size_t)reps;
    qsort(x, (size_t)reps, sizeof *x, cmp_double);
    c->compute_s[b] = x[reps / 2];
  }
  gs_powersgd_destroy(p);
  free(t);
  return rc;
}

/* top-k: the median over reps of each bucket's selection and error
 * feedback, on the same pattern */
static int time_topk(const gs_sync_config *cfg, int reps, gs_cm_compressed *c, gs_err *e) {
  size_t max = 0;
  for (int b = 0; b < cfg->nbuckets; b++)
    if (cfg->buckets[b].count > max) max = cfg->buckets[b].count;
  gs_topk *tk = NULL;
  double *t = malloc((size_t)reps * (size_t)cfg->nbuckets * sizeof *t);
  void *out = malloc(max * sizeof(float) * 2 + 8);
  int rc = t && out ? gs_topk_create(cfg->compress.fraction, cfg->n, max, &tk, e)
                    : GS_FAIL(e, GS_ENOMEM, "cost model, compression: out of memory");
  for (int s = 0; s < reps && rc == GS_OK; s++) {
    for (size_t i = 0; i < cfg->n; i++)
      cfg->grads[i] = (float)((double)((i * 2654435761u + (size_t)(s + 2) * 40503u) % 2003) /
                              2003.0 - 0.5) * 1e-2f;
    for (int b = 0; b < cfg->nbuckets; b++) {
      double t0 = gs_now();
      gs_topk_select(tk, cfg->grads, cfg->buckets[b].offset, cfg->buckets[b].count, out);
      t[(size_t)b * (size_t)reps + (size_t)s] = gs_now() - t0;
    }
  }
  for (int b = 0; b < cfg->nbuckets && rc == GS_OK; b++) {
    double *x = t + (size_t)b * (size_t)reps;
    qsort(x, (size_t)reps, sizeof *x, cmp_double);
    c->compute_s[b] = x[reps / 2];
  }
  gs_topk_destroy(tk);
  free(out);
  free(t);
  return rc;
}

int gs_cm_compress_measure(const gs_train_opts *train, int threads, int reps,
                           gs_cm_compressed *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  if (reps < 1)
    return GS_FAIL(e, GS_EINVAL, "cost model, compression: %d timed steps: need at least 1", reps);
  gs_kernels *k = gs_kernels_cpu(threads > 0 ? threads : 1, e);
  if (!k) return e->code ? e->code : GS_EDEVICE;
  gs_train_opts to = *train;
  to.rank = 0;
  to.world = 1;
  gs_trainer *t = NULL;
  int rc = gs_trainer_create(&to, k, &t, e);
  if (rc < 0) gs_err_prefix(e, "--model %s: ", to.model);
  gs_sync_config cfg;
  memset(&cfg, 0, sizeof cfg);
  if (rc == GS_OK) {
    gs_trainer_sync_config(t, &cfg);
    rc = gs_cm_compress_plan(&cfg.compress, to.precision, cfg.tensors, cfg.ntensors, cfg.buckets,
                             cfg.nbuckets, cfg.n, out, e);
  }
  if (rc == GS_OK && cfg.compress.kind == GS_COMPRESS_POWERSGD)
    rc = time_powersgd(k, &cfg, reps, out, e);
  if (rc == GS_OK && cfg.compress.kind == GS_COMPRESS_TOPK) rc = time_topk(&cfg, reps, out, e);
  if (rc < 0) gs_cm_compressed_free(out);
  gs_trainer_destroy(t);
  k->destroy(k);
  return rc;
}
