/* sched.c: the worker side of BytePS' summation servers (ps.h
 * opts.summation) over split.c's partitions: which partition leaves next,
 * and what a rank does with the sums.
 *
 * Priority and credit (ByteScheduler, Peng et al., SOSP 2019; BytePS):
 * a partition may leave once backward has written its bucket; of those
 * ready, the earliest layer's (the lowest offset) leaves first, and it
 * leaves only while the partitions ZeroMQ still holds (pushed, not yet
 * written into the kernel's socket buffers, GS_PS_SUM_SOCKBUF small)
 * hold fewer than opts.credit_bytes, so that a later, earlier-layer
 * partition can overtake those still waiting: what is on the wire is what
 * the next forward needs first. The credit comes back as the bytes leave
 * this rank, never as another rank's push arrives (BytePS acknowledges a
 * push on receipt for the same reason): ranks whose backward makes
 * partitions ready in different orders cannot wait on each other. A push
 * to the server beside this rank crosses no wire and takes no credit.
 * The default credit is two partitions: measured on 4 workers' hosts and
 * 2 spare hosts at 100 Mbit/s, without one the pushes to the workers'
 * hosts' servers (the smaller pieces) ran ahead of those to the spare
 * hosts, whose links then had the partitions' tails to themselves while
 * the workers' links idled (the links busy 80% of the step, 1.2 t_opt);
 * with it the pieces of a partition leave together and every link stays
 * busy (docs/byteps.md). The queue moves whenever the rank is in the
 * backend: at every bucket_ready and while end_step waits (flat.c calls
 * gs_ps_sum_pump as messages arrive, and every millisecond while the
 * credit holds partitions back: ZeroMQ letting go of a push wakes no
 * poll).
 *
 * A partition leaves as its pieces: each copied from the gradients into
 * its server's view, then pushed (client.c, zero-copy from the view). Its
 * sums come back into the parameter views. Once every partition is back,
 * this rank applies the step with gs_update_apply (kernels.h), as the
 * all-reduce's ranks do: x 1/world (average_over with hosts that sum
 * first), SGD with this rank's momentum. Every rank holds the same sums,
 * so every rank's parameters stay bitwise the same; and the sum of element
 * i is the one its server made in rank order ((g_0 + g_1) + g_2) + ...,
 * the flat ps' order, so the parameters are the flat ps' bits.
 *
 * The timeline's backend strip shows the partitions: each answered
 * partition a span "partition P" (of its bucket) on track 1, from its push (or
 * the end of the span before it) to its sums' arrival, so the spans tile
 * the time some partition was in flight without overlapping, and the
 * report's hidden communication (summary.c) is that time under compute. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"

struct ps_sum {
  gs_sync_config c;        /* the session's (opts: NULL) */
  const ps_keys *ks;
  const ps_split *sp;
  ps_worker **w;
  size_t credit;           /* bytes */
  gs_update u;
  bool have_u;
  gs_update_range *ranges; /* one per piece: where its sums are */
  uint8_t *ready, *pushed, *back, *left;
  double *t_push;
  int *sent;               /* [K]: pieces pushed to server k this step */
  int *ord;                /* [npieces]: a pushed piece's place among them */
  int next;                /* the first partition not pushed, in priority order */
  int nback;
  size_t inflight;         /* bytes pushed that ZeroMQ still holds (the credit's) */
  double last_end;         /* where the last partition span ended */
  int64_t step;
};

int gs_ps_sum_open(const gs_sync_config *c, const ps_keys *ks, const ps_split *sp,
                   ps_worker **w, ps_sum **out, gs_err *e) {
  *out = NULL;
  ps_sum *s = calloc(1, sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  const gs_ps_opts o = gs_ps_opts_of(c);
  s->c = *c;
  s->c.opts = NULL;
  s->ks = ks;
  s->sp = sp;
  s->w = w;
  s->credit = o.credit_bytes ? o.credit_bytes : 2 * sp->part_bytes;
  int np = sp->nparts;
  s->ranges = calloc((size_t)sp->npieces, sizeof *s->ranges);
  s->ready = calloc((size_t)np, 1);
  s->pushed = calloc((size_t)np, 1);
  s->back = calloc((size_t)np, 1);
  s->left = calloc((size_t)np, 1);
  s->t_push = calloc((size_t)np, sizeof *s->t_push);
  s->sent = calloc((size_t)ks->K, sizeof *s->sent);
  s->ord = calloc((size_t)sp->npieces, sizeof *s->ord);
  int rc = !s->ranges || !s->ready || !s->pushed || !s->back || !s->left || !s->t_push ||
                   !s->sent || !s->ord
               ? GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank) : GS_OK;
  for (int i = 0; rc == GS_OK && i < sp->npieces; i++) {
    const ps_piece *q = &sp->piece[i];
    s->ranges[i] = (gs_update_range){.offset = q->offset, .count = q->count,
                                     .grad = ks->vbuf[q->server] + q->at};
  }
  int over = o.average_over > 0 ? o.average_over : c->world;
  if (rc == GS_OK && (rc = gs_update_init(&s->u, c->k, c->n, over, c->sgd, GS_F32, c->scaler,
                                          e)) < 0)
    gs_err_prefix(e, "ps rank %d: ", c->rank);
  s->have_u = rc == GS_OK;
  if (rc < 0) {
    gs_ps_sum_free(s);
    return rc;
  }
  *out = s;
  return GS_OK;
}

void gs_ps_sum_free(ps_sum *s) {
  if (!s) return;
  if (s->have_u) gs_update_free(&s->u);
  free(s->ranges);
  free(s->ready);
  free(s->pushed);
  free(s->back);
  free(s->left);
  free(s->t_push);
  free(s->sent);
  free(s->ord);
  free(s);
}

uint64_t gs_ps_sum_bytes(const ps_sum *s) { return s && s->have_u ? gs_update_bytes(&s->u) : 0; }

void gs_ps_sum_begin(ps_sum *s, int64_t step) {
  int np = s->sp->nparts;
  memset(s->ready, 0, (size_t)np);
  memset(s->pushed, 0, (size_t)np);
  memset(s->back, 0, (size_t)np);
  memset(s->left, 0, (size_t)np);
  memset(s->sent, 0, (size_t)s->ks->K * sizeof *s->sent);
  s->next = s->nback = 0;
  s->inflight = 0;
  s->last_end = 0;
  s->step = step;
}

static size_t part_bytes(const ps_part *x) { return x->count * sizeof(float); }

/* partition p out: its pieces into the views, then pushed */
static int push_part(ps_sum *s, int p, gs_err *e) {
  const ps_part *x = &s->sp->part[p];
  gs_kernels *k = s->c.k;
  for (int i = x->first; i < x->first + x->npieces; i++) {
    const ps_piece *q = &s->sp->piece[i];
    k->copy(k, s->ks->vbuf[s->ks->K + q->server] + q->at, s->c.grads + q->offset,
            q->count * sizeof(float));
  }
  for (int i = x->first; i < x->first + x->npieces; i++) {
    const ps_piece *q = &s->sp->piece[i];
    s->ord[i] = s->sent[q->server]++;
    int rc = gs_ps_ready(s->w[q->server], q->index, e);
    if (rc < 0) {
      gs_err_prefix(e, "partition %d (bucket %d): ", p, x->bucket);
      return rc;
    }
  }
  s->pushed[p] = 1;
  s->t_push[p] = gs_now();
  s->inflight += part_bytes(x);
  return GS_OK;
}

/* Whether ZeroMQ let go of piece i: a worker's pushes leave in the order
 * it sent them, so the first (sent - still held) of them are out. */
static bool released(const ps_sum *s, int i) {
  const ps_piece *q = &s->sp->piece[i];
  const ps_worker *w = s->w[q->server];
  return w->inproc || s->sent[q->server] - atomic_load(&w->inflight) > s->ord[i];
}

/* partitions whose pushes left this rank (the credit back), and those whose
 * every piece's sums arrived: their spans */
static void collect(ps_sum *s) {
  const ps_split *sp = s->sp;
  for (int p = 0; p < sp->nparts; p++) {
    if (!s->pushed[p] || s->back[p]) continue;
    const ps_part *x = &sp->part[p];
    bool out = true, all = true;
    for (int i = x->first; i < x->first + x->npieces && (out || all); i++) {
      out = out && released(s, i);
      all = all && s->w[sp->piece[i].server]->got[sp->piece[i].index];
    }
    if ((out || all) && !s->left[p]) {
      s->left[p] = 1;
      s->inflight -= part_bytes(x);
    }
    if (!all) continue;
    s->back[p] = 1;
    s->nback++;
    double now = gs_now(), t0 = s->t_push[p] > s->last_end ? s->t_push[p] : s->last_end;
    if (s->c.span && now > t0) {
      char name[24];
      snprintf(name, sizeof name, "partition %d", p);
      s->c.span(s->c.span_ctx, name, x->bucket, t0, now, 1);
    }
    if (now > s->last_end) s->last_end = now;
  }
}

int gs_ps_sum_pump(ps_sum *s, gs_err *e) {
  collect(s);
  const ps_split *sp = s->sp;
  for (;;) {
    while (s->next < sp->nparts && s->pushed[s->next]) s->next++;
    int p = s->next;
    while (p < sp->nparts && (s->pushed[p] || !s->ready[p])) p++;
    if (p >= sp->nparts) return GS_OK;
    if (s->inflight > 0 && s->inflight + part_bytes(&sp->part[p]) > s->credit)
      return GS_OK;
    GS_TRY(push_part(s, p, e));
  }
}

bool gs_ps_sum_held(const ps_sum *s) {
  for (int p = s->next; p < s->sp->nparts; p++)
    if (s->ready[p] && !s->pushed[p]) return true;
  return false;
}

int gs_ps_sum_ready(ps_sum *s, int bucket, gs_err *e) {
  for (int p = 0; p < s->sp->nparts; p++)
    if (s->sp->part[p].bucket == bucket) s->ready[p] = 1;
  return gs_ps_sum_pump(s, e);
}

int gs_ps_sum_ready_all(ps_sum *s, gs_err *e) {
  memset(s->ready, 1, (size_t)s->sp->nparts);
  return gs_ps_sum_pump(s, e);
}

int gs_ps_sum_update(ps_sum *s, gs_sync_stats *st, gs_err *e) {
  collect(s);
  if (s->nback != s->sp->nparts)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d, step %lld: %d of %d partitions' sums are in",
                   s->c.rank, (long long)s->step, s->nback, s->sp->nparts);
  gs_update_result res;
  double a = gs_now();
  int rc = gs_update_apply(&s->u, s->c.params, s->ranges, s->sp->npieces, true, true, &res, e);
  if (rc < 0) {
    gs_err_prefix(e, "ps rank %d: ", s->c.rank);
    return rc;
  }
  st->reduce_s += res.check_s;
  st->update_s += res.update_s;
  st->skipped = res.skipped;
  st->scale = res.scale;
  if (s->c.span && !res.skipped)
    s->c.span(s->c.span_ctx, "optimizer", -1, a + res.check_s, gs_now(), 0);
  return GS_OK;
}
