/* split.c: the keys of BytePS' summation servers (ps.h opts.summation):
 * the partitions every rank pushes, and which part of each goes to which
 * server.
 *
 * Partitions: each bucket is cut into the fewest pieces of at most
 * opts.partition_bytes (ps.h gs_ps_partition_bytes: BytePS' 4 MiB, or a
 * 32nd of a smaller model) of near-equal size; they are
 * numbered in priority order, the lowest offset (the earliest layer) first,
 * as ByteScheduler orders them: the next forward needs the first layers
 * first. Servers: opts.spare processes of their own (0 .. spare-1, their
 * addresses in opts.server_eps), then one in the first rank of each of the
 * n workers' hosts (ranks host-major) where BytePS' formula leaves them a
 * share (ps.h gs_ps_spare_shares; none at k = n). Every partition is split
 * over every server in those shares (the cut at floor(count x cumulative
 * share)), so that every server, and so every link, carries its share of
 * the split to the element, step by step, and all of them work on the
 * same partition at once, the earliest first.
 *
 * Server k sees its pieces as a job of its own: a compact buffer of its
 * elements (a view, ps_keys.vbuf), its pieces as that job's buckets in
 * priority order. flat.c copies a partition's gradients into the views just
 * before it pushes it (sched.c), and the sums land in the parameter view,
 * which the optimizer reads (sched.c); rank 0's view carries its
 * parameters to every server's Welcome, and every rank copies them out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"

static int cmp_part(const void *a, const void *b) {
  const ps_part *x = a, *y = b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Partitions of every bucket, in priority order. */
static int cut(ps_split *sp, const gs_sync_config *c, size_t most, gs_err *e) {
  size_t elems = most / sizeof(float) ? most / sizeof(float) : 1;
  int n = 0;
  for (int b = 0; b < c->nbuckets; b++) n += (int)((c->buckets[b].count + elems - 1) / elems);
  sp->part_bytes = elems * sizeof(float);
  if (!(sp->part = calloc((size_t)n, sizeof *sp->part)))
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  sp->nparts = 0;
  for (int b = 0; b < c->nbuckets; b++) {
    const gs_bucket *x = &c->buckets[b];
    size_t m = (x->count + elems - 1) / elems;
    for (size_t i = 0; i < m; i++) {
      size_t lo = x->count * i / m, hi = x->count * (i + 1) / m;
      sp->part[sp->nparts++] = (ps_part){.offset = x->offset + lo, .count = hi - lo, .bucket = b};
    }
  }
  qsort(sp->part, (size_t)sp->nparts, sizeof *sp->part, cmp_part);
  return GS_OK;
}

/* Every partition's pieces, one per server with a non-empty share of it,
 * and each server's compact view. */
static int pieces(ps_keys *ks, ps_split *sp, const double *share, const gs_sync_config *c,
                  gs_err *e) {
  int K = ks->K;
  sp->piece = calloc((size_t)sp->nparts * (size_t)K, sizeof *sp->piece);
  if (!sp->piece) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  for (int p = 0; p < sp->nparts; p++) {
    ps_part *x = &sp->part[p];
    x->first = sp->npieces;
    double cum = 0;
    size_t at = 0;
    for (int k = 0; k < K; k++) {
      cum += share[k];
      size_t to = k == K - 1 ? x->count : (size_t)floor((double)x->count * cum);
      if (to > x->count) to = x->count;
      if (to <= at) continue;
      sp->piece[sp->npieces++] = (ps_piece){.server = k, .index = ks->nsub[k],
                                            .offset = x->offset + at, .count = to - at,
                                            .at = ks->vn[k]};
      ks->nsub[k]++;
      ks->vn[k] += to - at;
      at = to;
    }
    x->npieces = sp->npieces - x->first;
  }
  for (int k = 0; k < K; k++) {
    if (ks->nsub[k] == 0)
      return GS_FAIL(e, GS_EINVAL, "ps rank %d: summation server %d of %d would sum no "
                     "parameter (%zu parameters in %d partitions): fewer spare hosts, or a "
                     "larger model", c->rank, k, K, c->n, sp->nparts);
    if (!(ks->sub[k] = malloc((size_t)ks->nsub[k] * sizeof *ks->sub[k])))
      return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  }
  for (int i = 0; i < sp->npieces; i++) {
    const ps_piece *q = &sp->piece[i];
    ks->sub[q->server][q->index] = (gs_bucket){.offset = q->at, .count = q->count};
  }
  return GS_OK;
}

/* The views: server k's parameters (vbuf[k]) and gradients (vbuf[K + k]). */
static int views(ps_keys *ks, const gs_sync_config *c, gs_err *e) {
  int K = ks->K;
  ks->vk = c->k;
  if (!(ks->vbuf = calloc(2 * (size_t)K, sizeof *ks->vbuf)))
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  for (int i = 0; i < 2 * K; i++)
    if (!(ks->vbuf[i] = c->k->alloc(c->k, ks->vn[i % K] * sizeof(float)))) {
      c->k->sync(c->k, NULL);
      return GS_FAIL(e, GS_ENOMEM, "ps rank %d: cannot allocate %zu bytes for summation "
                     "server %d's view", c->rank, ks->vn[i % K] * sizeof(float), i % K);
    }
  return GS_OK;
}

int gs_ps_split_plan(ps_keys *ks, ps_split *sp, const gs_sync_config *c, gs_err *e) {
  const gs_ps_opts o = gs_ps_opts_of(c);
  memset(ks, 0, sizeof *ks);
  memset(sp, 0, sizeof *sp);
  /* the workers' hosts: as said, else every rank a machine of its own */
  int n = o.hosts > 0 ? o.hosts : c->world;
  double ys, yc;
  if (n < 1 || c->world % n || gs_ps_spare_shares(n, o.spare, o.spare_share, &ys, &yc) < 0)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: summation servers on %d spare hosts beside %d "
                   "workers' hosts of a world of %d (--ps-spare-hosts %d, --ps-spare-share %g): "
                   "the formula needs at most as many spare hosts as workers' hosts, hosts of "
                   "equal ranks, and a share of at most 1/%d", c->rank, o.spare, n, c->world,
                   o.spare, o.spare_share, o.spare > 0 ? o.spare : 1);
  int colo = yc > 0 ? n : 0, K = o.spare + colo;
  if (K < 1)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: no summation server has a share", c->rank);
  ks->K = K;
  ks->nb = c->nbuckets;
  double share[K];
  ks->rank_of = malloc((size_t)K * sizeof *ks->rank_of);
  ks->vn = calloc((size_t)K, sizeof *ks->vn);
  ks->sub = calloc((size_t)K, sizeof *ks->sub);
  ks->nsub = calloc((size_t)K, sizeof *ks->nsub);
  if (!ks->rank_of || !ks->vn || !ks->sub || !ks->nsub)
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  for (int k = 0; k < K; k++) {
    bool spare = k < o.spare;
    share[k] = spare ? ys : yc;
    ks->rank_of[k] = spare ? -1 : (int)((int64_t)(k - o.spare) * c->world / n);
  }
  GS_TRY(cut(sp, c, gs_ps_partition_bytes(o.partition_bytes, (double)c->n * sizeof(float)), e));
  GS_TRY(pieces(ks, sp, share, c, e));
  return views(ks, c, e);
}

void gs_ps_split_free(ps_split *sp) {
  free(sp->part);
  free(sp->piece);
  memset(sp, 0, sizeof *sp);
}

/* from the flat buffers into the views (params: vbuf[k]) or back */
void gs_ps_split_copy(const ps_keys *ks, const ps_split *sp, float *params, bool out) {
  gs_kernels *k = ks->vk;
  for (int i = 0; i < sp->npieces; i++) {
    const ps_piece *q = &sp->piece[i];
    float *v = ks->vbuf[q->server] + q->at, *f = params + q->offset;
    if (out) k->copy(k, f, v, q->count * sizeof(float));
    else k->copy(k, v, f, q->count * sizeof(float));
  }
}
