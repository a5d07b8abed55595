/* powersgd.c: PowerSGD with error feedback and warm start, one bucket at a
 * time, as compress.h states it (PyTorch 1.13's powerSGD_hook).
 *
 * A bucket's state is made on its first compressed step, as the hook makes
 * it on first sight of a bucket index: which tensors are compressed, the
 * error (zero the first time), and P / Q for every compressed tensor, laid
 * end to end so each travels as one all-reduce. Q's first draw comes from
 * the run's seed, one stream per tensor (rng.h), so every rank draws the
 * same Q and a test can draw it again outside C. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress.h"
#include "kernels/rng.h"

typedef struct pbucket {
  bool built;
  int *comp, ncomp;        /* tensor indices sent as P, Q */
  int *plain, nplain;      /* tensor indices sent as they are */
  size_t *poff, *qoff;     /* each compressed tensor's P and Q in p, q */
  int *r;                  /* its rank: min(R, rows, cols) */
  float *p, *q, *u, *err;  /* P's, Q's, the uncompressed tensors end to end, the error */
  size_t np, nq, nu, count, off;
  bool q_drawn;
} pbucket;

struct gs_powersgd {
  gs_compress c;
  gs_kernels *k;
  gs_compress_tensor *t;
  int nt, nb, world;
  pbucket *b;
};

int gs_powersgd_create(const gs_compress *c, gs_kernels *k, const gs_compress_tensor *tensors,
                       int ntensors, int nbuckets, int world, gs_powersgd **out, gs_err *e) {
  *out = NULL;
  if (c->kind != GS_COMPRESS_POWERSGD || c->rank < 1 || !(c->min_rate >= 0) || world < 1 ||
      ntensors < 0 || nbuckets < 1 || !k || (ntensors > 0 && !tensors))
    return GS_FAIL(e, GS_EINVAL, "powersgd: bad configuration (rank %d, min rate %g, world %d, "
                   "%d tensors, %d buckets)", c->rank, c->min_rate, world, ntensors, nbuckets);
  if (c->start < 0)
    return GS_FAIL(e, GS_EINVAL, "--powersgd-start %lld: must be >= 0", (long long)c->start);
  if (k->device != GS_DEV_CPU)
    return GS_FAIL(e, GS_EINVAL, "powersgd: needs a CPU kernels table, got '%s'", k->name);
  gs_powersgd *p = calloc(1, sizeof *p);
  if (!p) return GS_FAIL(e, GS_ENOMEM, "powersgd: out of memory");
  p->c = *c;
  p->k = k;
  p->nt = ntensors;
  p->nb = nbuckets;
  p->world = world;
  p->t = malloc((size_t)(ntensors > 0 ? ntensors : 1) * sizeof *p->t);
  p->b = calloc((size_t)nbuckets, sizeof *p->b);
  if (!p->t || !p->b) {
    gs_powersgd_destroy(p);
    return GS_FAIL(e, GS_ENOMEM, "powersgd: out of memory");
  }
  if (ntensors > 0) memcpy(p->t, tensors, (size_t)ntensors * sizeof *p->t);
  *out = p;
  return GS_OK;
}

static void free_bucket(pbucket *b) {
  free(b->comp);
  free(b->plain);
  free(b->poff);
  free(b->qoff);
  free(b->r);
  free(b->p);
  free(b->q);
  free(b->u);
  free(b->err);
}

void gs_powersgd_destroy(gs_powersgd *p) {
  if (!p) return;
  for (int i = 0; p->b && i < p->nb; i++) free_bucket(&p->b[i]);
  free(p->b);
  free(p->t);
  free(p);
}

bool gs_powersgd_active(const gs_powersgd *p, int64_t step) {
  return p && step >= p->c.start;
}

static int build(gs_powersgd *p, pbucket *b, size_t off, size_t count, gs_err *e) {
  size_t n = (size_t)(p->nt > 0 ? p->nt : 1);
  b->comp = malloc(n * sizeof *b->comp);
  b->plain = malloc(n * sizeof *b->plain);
  b->poff = malloc(n * sizeof *b->poff);
  b->qoff = malloc(n * sizeof *b->qoff);
  b->r = malloc(n * sizeof *b->r);
  if (!b->comp || !b->plain || !b->poff || !b->qoff || !b->r)
    return GS_FAIL(e, GS_ENOMEM, "powersgd: out of memory");
  for (int i = 0; i < p->nt; i++) {
    const gs_compress_tensor *t = &p->t[i];
    if (t->offset < off || t->offset >= off + count) continue;
    if (t->offset + t->rows * t->cols > off + count)
      return GS_FAIL(e, GS_EINVAL, "powersgd: tensor %d (%zu x %zu at %zu) crosses the end of "
                     "its bucket [%zu, %zu)", i, t->rows, t->cols, t->offset, off, off + count);
    if (gs_powersgd_compresses(&p->c, t)) {
      int r = p->c.rank;
      if ((size_t)r > t->rows) r = (int)t->rows;
      if ((size_t)r > t->cols) r = (int)t->cols;
      b->poff[b->ncomp] = b->np;
      b->qoff[b->ncomp] = b->nq;
      b->r[b->ncomp] = r;
      b->np += t->rows * (size_t)r;
      b->nq += t->cols * (size_t)r;
      b->comp[b->ncomp++] = i;
    } else {
      b->nu += t->rows * t->cols;
      b->plain[b->nplain++] = i;
    }
  }
  size_t covered = b->nu;
  for (int c = 0; c < b->ncomp; c++) covered += p->t[b->comp[c]].rows * p->t[b->comp[c]].cols;
  if (covered != count)
    return GS_FAIL(e, GS_EINVAL, "powersgd: the tensors of bucket [%zu, %zu) cover %zu of its "
                   "%zu elements; every element must belong to one tensor", off, off + count,
                   covered, count);
  b->p = malloc((b->np ? b->np : 1) * sizeof *b->p);
  b->q = malloc((b->nq ? b->nq : 1) * sizeof *b->q);
  b->u = malloc((b->nu ? b->nu : 1) * sizeof *b->u);
  if (!b->p || !b->q || !b->u) return GS_FAIL(e, GS_ENOMEM, "powersgd: out of memory");
  b->count = count;
  b->built = true;
  return GS_OK;
}

/* Gram-Schmidt on the r columns of a (n x r, row-major), in place, as
 * PyTorch's _orthogonalize_gram_schmidt with epsilon 0; norms and dot
 * products summed in double. */
static void orthogonalize(float *a, size_t n, int r) {
  for (int i = 0; i < r; i++) {
    double ss = 0;
    for (size_t j = 0; j < n; j++) ss += (double)a[j * r + i] * a[j * r + i];
    float norm = (float)sqrt(ss);
    for (size_t j = 0; j < n; j++) a[j * r + i] = norm > 0 ? a[j * r + i] / norm : 0.0f;
    for (int c = i + 1; c < r; c++) {
      double dot = 0;
      for (size_t j = 0; j < n; j++) dot += (double)a[j * r + i] * a[j * r + c];
      float d = (float)dot;
      for (size_t j = 0; j < n; j++) a[j * r + c] -= d * a[j * r + i];
    }
  }
}

/* bucket bi, built on first sight (its tensors must cover it) */
static int bucket(gs_powersgd *p, int bi, size_t off, size_t count, pbucket **out, gs_err *e) {
  if (!p || bi < 0 || bi >= p->nb)
    return GS_FAIL(e, GS_EINVAL, "powersgd: bucket %d of %d", bi, p ? p->nb : 0);
  pbucket *b = &p->b[bi];
  if (!b->built) GS_TRY(build(p, b, off, count, e));
  if (b->count != count)
    return GS_FAIL(e, GS_EINVAL, "powersgd: bucket %d has %zu elements, was %zu", bi, count,
                   b->count);
  *out = b;
  return GS_OK;
}

/* a bucket already built (the phases after the first) */
static pbucket *built(gs_powersgd *p, int bi, gs_err *e) {
  if (!p || bi < 0 || bi >= p->nb || !p->b[bi].built) {
    GS_FAIL(e, GS_EINVAL, "powersgd: bucket %d of %d has not been encoded", bi, p ? p->nb : 0);
    return NULL;
  }
  return &p->b[bi];
}

int gs_powersgd_parts(gs_powersgd *p, int bi, size_t off, size_t count, size_t n[3], gs_err *e) {
  pbucket *b;
  GS_TRY(bucket(p, bi, off, count, &b, e));
  n[0] = b->nu;
  n[1] = b->np;
  n[2] = b->nq;
  return GS_OK;
}

float *gs_powersgd_part(gs_powersgd *p, int bi, int part) {
  if (!p || bi < 0 || bi >= p->nb || !p->b[bi].built) return NULL;
  pbucket *b = &p->b[bi];
  return part == 0 ? b->u : part == 1 ? b->p : part == 2 ? b->q : NULL;
}

int gs_powersgd_encode(gs_powersgd *p, int bi, float *grads, size_t off, size_t count,
                       gs_powersgd_stats *st, gs_err *e) {
  pbucket *b;
  GS_TRY(bucket(p, bi, off, count, &b, e));
  if (!grads) return GS_FAIL(e, GS_EINVAL, "powersgd: bucket %d without a buffer", bi);
  double t0 = gs_now();
  gs_kernels *k = p->k;
  float *g = grads + off;
  b->off = off;
  /* error feedback: send g + error, remember what was meant (the error
   * only where a bucket is encoded: a ps server rebuilds, never encodes) */
  if (!b->err && !(b->err = calloc(count ? count : 1, sizeof *b->err)))
    return GS_FAIL(e, GS_ENOMEM, "powersgd: out of memory for bucket %d's error", bi);
  for (size_t i = 0; i < count; i++) g[i] += b->err[i];
  memcpy(b->err, g, count * sizeof *g);
  if (!b->q_drawn) {
    for (int c = 0; c < b->ncomp; c++) {
      const gs_compress_tensor *t = &p->t[b->comp[c]];
      gs_rng rng;
      gs_rng_seed(&rng, p->c.seed, GS_STREAM_POWERSGD + (uint64_t)b->comp[c]);
      float *q = b->q + b->qoff[c];
      for (size_t j = 0; j < t->cols * (size_t)b->r[c]; j++) q[j] = gs_rng_normal(&rng);
    }
    b->q_drawn = true;
  }
  for (int c = 0; c < b->ncomp; c++) {
    const gs_compress_tensor *t = &p->t[b->comp[c]];
    int r = b->r[c];
    float *q = b->q + b->qoff[c], *pp = b->p + b->poff[c];
    orthogonalize(q, t->cols, r);
    k->gemm(k, false, false, (int)t->rows, r, (int)t->cols, 1.0f, grads + t->offset,
            (int)t->cols, q, r, 0.0f, pp, r);
  }
  size_t u = 0;
  for (int c = 0; c < b->nplain; c++) {
    const gs_compress_tensor *t = &p->t[b->plain[c]];
    memcpy(b->u + u, grads + t->offset, t->rows * t->cols * sizeof(float));
    u += t->rows * t->cols;
  }
  GS_TRY(k->sync(k, e));
  if (st) {
    st->elems_before += count;
    st->elems_after += b->nu + b->np;
    st->compute_s += gs_now() - t0;
  }
  return GS_OK;
}

int gs_powersgd_project(gs_powersgd *p, int bi, const float *grads, gs_powersgd_stats *st,
                        gs_err *e) {
  pbucket *b = built(p, bi, e);
  if (!b) return e ? e->code : GS_EINVAL;
  double t0 = gs_now();
  gs_kernels *k = p->k;
  for (int c = 0; c < b->ncomp; c++) {
    const gs_compress_tensor *t = &p->t[b->comp[c]];
    int r = b->r[c];
    float *q = b->q + b->qoff[c], *pp = b->p + b->poff[c];
    orthogonalize(pp, t->rows, r);
    k->gemm(k, true, false, (int)t->cols, r, (int)t->rows, 1.0f, grads + t->offset,
            (int)t->cols, pp, r, 0.0f, q, r);
  }
  GS_TRY(k->sync(k, e));
  if (st) {
    st->elems_after += b->nq;
    st->compute_s += gs_now() - t0;
  }
  return GS_OK;
}

/* out (the bucket's place in a flat buffer): the uncompressed tensors'
 * sums where they belong, P Q^T for the others */
static int expand(gs_powersgd *p, pbucket *b, float *out, gs_err *e) {
  gs_kernels *k = p->k;
  size_t u = 0;
  for (int c = 0; c < b->nplain; c++) {
    const gs_compress_tensor *t = &p->t[b->plain[c]];
    memcpy(out + t->offset, b->u + u, t->rows * t->cols * sizeof(float));
    u += t->rows * t->cols;
  }
  for (int c = 0; c < b->ncomp; c++) {
    const gs_compress_tensor *t = &p->t[b->comp[c]];
    int r = b->r[c];
    k->gemm(k, false, true, (int)t->rows, (int)t->cols, r, 1.0f, b->p + b->poff[c], r,
            b->q + b->qoff[c], r, 0.0f, out + t->offset, (int)t->cols);
  }
  return k->sync(k, e);
}

int gs_powersgd_decode(gs_powersgd *p, int bi, float *grads, gs_powersgd_stats *st, gs_err *e) {
  pbucket *b = built(p, bi, e);
  if (!b) return e ? e->code : GS_EINVAL;
  double t0 = gs_now();
  GS_TRY(expand(p, b, grads, e));
  /* the error against this rank's share of the mean: what it meant minus
   * what the bucket now says (the sum) over the world */
  float w = (float)p->world, *g = grads + b->off;
  if (!b->err)
    return GS_FAIL(e, GS_EINVAL, "powersgd: bucket %d decoded before it was encoded", bi);
  for (size_t i = 0; i < b->count; i++) b->err[i] -= g[i] / w;
  if (st) st->compute_s += gs_now() - t0;
  return GS_OK;
}

int gs_powersgd_rebuild(gs_powersgd *p, int bi, float *out, gs_err *e) {
  pbucket *b = built(p, bi, e);
  if (!b) return e ? e->code : GS_EINVAL;
  for (int c = 0; c < b->ncomp; c++)
    orthogonalize(b->p + b->poff[c], p->t[b->comp[c]].rows, b->r[c]);
  return expand(p, b, out, e);
}

static int reduce(gs_allreduce_fn ar, void *ctx, float *buf, size_t count, int part, gs_err *e) {
  if (count == 0) return GS_OK;
  return ar(ctx, buf, count, part, e);
}

int gs_powersgd_bucket(gs_powersgd *p, int bi, float *grads, size_t off, size_t count,
                       gs_allreduce_fn allreduce, void *ctx, gs_powersgd_stats *st, gs_err *e) {
  if (!allreduce) return GS_FAIL(e, GS_EINVAL, "powersgd: bucket %d without an all-reduce", bi);
  GS_TRY(gs_powersgd_encode(p, bi, grads, off, count, st, e));
  pbucket *b = &p->b[bi];
  GS_TRY(reduce(allreduce, ctx, b->u, b->nu, 0, e));
  GS_TRY(reduce(allreduce, ctx, b->p, b->np, 1, e));
  GS_TRY(gs_powersgd_project(p, bi, grads, st, e));
  GS_TRY(reduce(allreduce, ctx, b->q, b->nq, 2, e));
  return gs_powersgd_decode(p, bi, grads, st, e);
}
