/* stale.c: the ps server's ssp, async and backup-worker models (sync.h
 * gs_ps_sync), beside server.c's bsp rounds.
 *
 * Every push is copied out of its message at once into a slot of its rank
 * (the worker may go on computing, and rank 0's inproc push is its own
 * gradient buffer). A slot holds one step of one rank: every bucket, and
 * the version (updates applied) of the parameters it was computed on.
 *
 *   ssp:K    update s waits for every rank's step s (slot s mod K+2), sums
 *            them in rank order (the bits of bsp's sum), averages, runs SGD,
 *            and sends version s+1 to every rank; a worker waits only when
 *            it would otherwise start a step more than K updates behind.
 *            Each gradient's staleness s - base is checked against K here:
 *            a violation fails the job, naming the rank and the step.
 *   async    a rank's complete push is applied alone (averaged over 1) and
 *            answered with the new version; staleness updates - base.
 *   backup B an update takes the first world-B pushes computed on the
 *            current version (fewer once ranks left: every one still
 *            training), sums them in rank order, averages over them; a push
 *            computed on an older version is dropped and answered with the
 *            current parameters (staleness -1).
 *
 * Parameters go out as copies (not zero-copy as bsp's): a rank may be
 * several versions behind, and nothing it has not read yet may pin the
 * master copy.
 *
 * fp16 / bf16 traffic and loss scaling. Gradients come in the wire dtype
 * and are held as fp32; parameters go out in the wire dtype, as bsp's do.
 * Every version carries the loss scale of the server's scaler, a worker
 * computes with the scale of the version it holds, and each push says
 * which scale its gradient carries. An update first brings every gradient
 * it sums to the scaler's current scale (x current / its own: exact for the
 * power-of-two scales a dynamic scaler makes), then gs_update_apply checks
 * the sum as bsp's: an inf/NaN skips the update (the parameters and the
 * momentum stay, the scaler backs off), and the update still counts as a
 * version, so ssp's clock and the workers' bases go on. ssp:0 thus keeps
 * bsp's bits in fp16 too; in async and backup, gradients computed before
 * a back-off are rescaled rather than dropped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/server_core.h"

struct stale_slot {
  bool used;
  int64_t step;
  uint64_t base;
  float scale;   /* the loss scale the gradient carries */
  int ngot;
  uint8_t *got;  /* [nb] */
};

static struct stale_slot *slot_at(gs_ps_server *s, int r, int i) {
  return &s->slots[(size_t)r * s->depth + i];
}
static float *grad_at(gs_ps_server *s, int r, int i) {
  return s->held + ((size_t)r * s->depth + i) * s->n;
}

int gs_pss_stale_init(gs_ps_server *s, gs_err *e) {
  s->depth = s->cons.model == GS_PS_SSP ? s->cons.staleness + 2 : 1;
  size_t nslots = (size_t)s->world * s->depth;
  s->slots = calloc(nslots, sizeof *s->slots);
  uint8_t *got = calloc(nslots * s->nb, 1);
  if (!s->slots || !got) {
    free(got);
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory for %zu held pushes", nslots);
  }
  for (size_t i = 0; i < nslots; i++) s->slots[i].got = got + i * s->nb;
  s->held = gs_pss_dev_alloc(s, nslots * s->n * sizeof(float));
  s->acc = gs_pss_dev_alloc(s, s->n * sizeof(float));
  if (!s->held || !s->acc)
    return GS_FAIL(e, GS_ENOMEM, "ps server: cannot hold %zu pushes of %zu parameters (%s)",
                   nslots, s->n,
                   s->cons.model == GS_PS_SSP ? "ssp: K + 2 per rank" : "one per rank");
  s->alive = s->world;
  return GS_OK;
}

void gs_pss_stale_free(gs_ps_server *s) {
  if (s->slots) free(s->slots[0].got);
  free(s->slots);
  if (s->held) s->k->release(s->k, s->held);
  if (s->acc) s->k->release(s->k, s->acc);
}

/* Version `updates` to rank only (>= 0) or to every rank still there;
 * staleness: the answered push's. holds_prev: the rank(s) hold the version
 * before it; a skipped update then goes without parameters, as bsp's
 * skipped step does, and they keep theirs (the bits of bsp). */
static int send_version(gs_ps_server *s, int only, int64_t staleness, bool holds_prev,
                        gs_err *e) {
  bool bare = s->version_skipped && holds_prev;
  size_t esz = s->wsize;
  const void *dev = s->master;
  if (s->wire != GS_F32) {
    s->k->convert(s->k, s->wire, s->wout, GS_F32, s->master, s->n);
    dev = s->wout;
  }
  const char *src = dev;
  if (!s->cpu) {
    s->k->to_host(s->k, s->hout, dev, s->n * esz);
    src = (const char *)s->hout;
  }
  GS_TRY(gs_pss_kernel_check(s, "making the parameters that go out", e));
  for (int b = 0; b < s->nb; b++) {
    Gradsync__Envelope env;
    Gradsync__Params p = GRADSYNC__PARAMS__INIT;
    gs_wire_env(&env, s->o.job, GS_SERVER_RANK);
    p.step = s->updates - 1;
    p.bucket = (uint32_t)b;
    p.offset = s->off[b];
    p.count = s->cnt[b];
    p.scale = s->u.scaler.scale;
    p.skipped = s->version_skipped; /* with the parameters, which stayed as they were */
    p.dtype = gs_wire_pbdtype(s->wire);
    p.staleness = staleness;
    if (b == s->nb - 1) {
      p.reduce_s = s->reduce_s;
      p.update_s = s->update_s;
      p.bytes_recv = s->recv;
      p.bytes_sent = s->sent;
    }
    env.body_case = GRADSYNC__ENVELOPE__BODY_PARAMS;
    env.params = &p;
    for (int r = only >= 0 ? only : 0; r < (only >= 0 ? only + 1 : s->world); r++) {
      peer *pr = &s->peers[r];
      if (pr->bye) continue;
      gs_err se = {0};
      int rc = gs_wire_send(s->sock, pr->id, pr->idlen, &env,
                            bare ? NULL : src + s->off[b] * esz, bare ? 0 : s->cnt[b] * esz,
                            NULL, NULL, s->timeout_ms,
                            pr->inproc ? NULL : &s->sent, &se);
      if (rc < 0)
        return FAIL(s, e, rc, "ps server: sending update %llu bucket %d to rank %d: %s",
                    (unsigned long long)p.step, b, r, se.msg);
    }
  }
  s->reduce_s = s->update_s = 0;
  s->sent = s->recv = 0;
  return GS_OK;
}

/* The apply-order hook (sync.h gs_applied): update s->updates from the
 * pushes of ranks[0..nr) in slots idx[], and the parameters after it. */
static int tell_applied(gs_ps_server *s, const int *ranks, const int *idx, int nr, gs_err *e) {
  int64_t steps[nr];
  uint64_t bases[nr];
  for (int i = 0; i < nr; i++) {
    steps[i] = slot_at(s, ranks[i], idx[i])->step;
    bases[i] = slot_at(s, ranks[i], idx[i])->base;
  }
  const float *p = s->master;
  if (!s->cpu) {
    s->k->to_host(s->k, s->hout, s->master, s->n * sizeof(float));
    GS_TRY(gs_pss_kernel_check(s, "copying parameters for the apply-order log", e));
    p = s->hout;
  }
  gs_applied a = {.version = s->updates, .n = nr, .ranks = ranks, .steps = steps,
                  .bases = bases, .params = p, .count = s->n};
  s->o.applied.fn(s->o.applied.ctx, &a);
  return GS_OK;
}

/* One update from the held pushes of ranks[0..nr) (slots idx[]), summed in
 * that (rank) order and averaged over nr. */
static int apply(gs_ps_server *s, const int *ranks, const int *idx, int nr, gs_err *e) {
  gs_kernels *k = s->k;
  double t0 = gs_now();
  for (int i = 0; s->u.scaling && i < nr; i++) {
    float f = (float)((double)s->u.scaler.scale / slot_at(s, ranks[i], idx[i])->scale);
    if (f != 1.0f) k->scale(k, s->n, f, grad_at(s, ranks[i], idx[i]));
  }
  float *sum = grad_at(s, ranks[0], idx[0]);
  if (nr > 1) {
    k->copy(k, s->acc, sum, s->n * sizeof(float));
    for (int i = 1; i < nr; i++) k->add(k, s->n, s->acc, grad_at(s, ranks[i], idx[i]));
    sum = s->acc;
  }
  GS_TRY(gs_pss_kernel_check(s, "summing held gradients", e));
  s->reduce_s += gs_now() - t0;
  /* the Welcome went out zero-copy from the master copy: a rank that has not
   * been sent all of it yet must not get a part of this update instead */
  GS_TRY(gs_pss_wait_inflight(s, 0, e));
  gs_update_range rg = {.offset = 0, .count = s->n, .grad = sum};
  gs_update_result res;
  gs_err ue = {0};
  s->u.world = nr * (s->average_over / s->world); /* a host's push holds its ranks' */
  double t1 = gs_now();
  if (gs_update_apply(&s->u, s->master, &rg, 1, false, true, &res, &ue) < 0)
    return FAIL(s, e, ue.code, "ps server (%s kernels): %s", k->name, ue.msg);
  s->reduce_s += res.check_s;
  s->update_s += res.update_s;
  s->version_skipped = res.skipped;
  if (s->o.span) s->o.span(s->o.span_ctx, "optimizer", -1, t1, gs_now(), 1);
  s->updates++;
  s->round_t0 = gs_now(); /* progress: the deadline runs from here */
  if (s->o.applied.fn) GS_TRY(tell_applied(s, ranks, idx, nr, e));
  for (int i = 0; i < nr; i++) slot_at(s, ranks[i], idx[i])->used = false;
  return GS_OK;
}

/* the round's deadline (server.c) runs while some push waits for others */
static void mark_round(gs_ps_server *s, int r, int64_t step) {
  bool waiting = false;
  for (size_t i = 0; i < (size_t)s->world * s->depth && !waiting; i++)
    waiting = s->slots[i].used;
  if (waiting && !s->in_round) {
    s->in_round = true;
    s->round_t0 = gs_now();
    s->round_rank = r;
    s->step = (uint64_t)step;
  }
  if (!waiting) s->in_round = false;
}

static int ssp_try(gs_ps_server *s, gs_err *e) {
  int K = s->cons.staleness;
  for (;;) {
    int64_t u = (int64_t)s->updates;
    int i = (int)(u % s->depth), ranks[s->world], idx[s->world];
    for (int r = 0; r < s->world; r++) {
      struct stale_slot *sl = slot_at(s, r, i);
      if (!sl->used || sl->step != u || sl->ngot < s->nb) return GS_OK;
      if (u - (int64_t)sl->base > K)
        return FAIL(s, e, GS_EPROTO, "ps server: ssp:%d violated: rank %d's gradient of step "
                    "%lld was computed on parameters of update %llu, %lld updates stale", K, r,
                    (long long)u, (unsigned long long)sl->base, (long long)(u - (int64_t)sl->base));
      ranks[r] = r;
      idx[r] = i;
    }
    GS_TRY(apply(s, ranks, idx, s->world, e));
    GS_TRY(send_version(s, -1, 0, true, e)); /* every rank gets every version */
  }
}

static int backup_try(gs_ps_server *s, gs_err *e) {
  int need = s->world - s->cons.backup;
  if (need > s->alive) need = s->alive;
  if (need < 1) need = 1;
  int ranks[s->world], idx[s->world], n = 0;
  for (int r = 0; r < s->world; r++) {
    struct stale_slot *sl = slot_at(s, r, 0);
    if (sl->used && sl->ngot == s->nb && sl->base == s->updates) {
      ranks[n] = r;
      idx[n++] = 0;
    }
  }
  if (n < need) return GS_OK;
  GS_TRY(apply(s, ranks, idx, n, e));
  for (int i = 0; i < n; i++) GS_TRY(send_version(s, ranks[i], 0, true, e));
  return GS_OK;
}

int gs_pss_stale_push(gs_ps_server *s, int r, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Push *p = m->env->push;
  int b = (int)p->bucket, K = s->cons.staleness;
  int64_t step = (int64_t)p->step;
  if (s->nbye > 0) s->bye_t0 = gs_now(); /* ranks that finished wait for those still going */
  if ((s->cons.model == GS_PS_SSP && p->base_version > p->step) ||
      p->base_version > s->updates)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu computed on update %llu "
                "(the server has applied %llu)", r, (unsigned long long)p->step,
                (unsigned long long)p->base_version, (unsigned long long)s->updates);
  float scale = s->u.scaling ? p->scale : 1.0f;
  if (!(scale > 0) || !isfinite(scale))
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu with loss scale %g; this "
                "job scales its loss, and a push must say by how much (> 0)", r,
                (unsigned long long)p->step, (double)p->scale);
  int i = 0;
  if (s->cons.model == GS_PS_SSP) {
    if (step < (int64_t)s->updates)
      return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %lld, whose update is "
                  "already applied", r, (long long)step);
    if (step >= (int64_t)s->updates + s->depth)
      return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %lld while update %llu "
                  "waits for the slowest rank: more than ssp:%d allows", r, (long long)step,
                  (unsigned long long)s->updates, K);
    i = (int)(step % s->depth);
  }
  struct stale_slot *sl = slot_at(s, r, i);
  if (sl->used && (sl->step != step || sl->base != p->base_version || sl->scale != scale))
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %lld (on update %llu) before "
                "its step %lld was complete", r, (long long)step,
                (unsigned long long)p->base_version, (long long)sl->step);
  if (!sl->used) {
    *sl = (struct stale_slot){.used = true, .step = step, .base = p->base_version,
                              .scale = scale, .got = sl->got};
    memset(sl->got, 0, (size_t)s->nb);
  }
  if (sl->got[b]) {
    if (p->again) return GS_OK;
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %lld bucket %d twice", r,
                (long long)step, b);
  }
  float *dst = grad_at(s, r, i) + s->off[b];
  const void *src = zmq_msg_data(&m->payload);
  if (s->wire == GS_F32) {
    s->k->to_device(s->k, dst, src, s->cnt[b] * sizeof(float));
  } else if (s->cpu) {
    s->k->convert(s->k, GS_F32, dst, s->wire, src, s->cnt[b]);
  } else { /* through the wire-dtype copy of the parameters, free between versions */
    char *stage = (char *)s->wout + s->off[b] * s->wsize;
    s->k->to_device(s->k, stage, src, s->cnt[b] * s->wsize);
    s->k->convert(s->k, GS_F32, dst, s->wire, stage, s->cnt[b]);
  }
  GS_TRY(gs_pss_kernel_check(s, "holding a push", e));
  sl->got[b] = 1;
  sl->ngot++;
  if (!s->peers[r].inproc) s->recv += m->bytes;
  int rc = GS_OK;
  if (sl->ngot == s->nb) {
    if (s->cons.model == GS_PS_SSP) {
      rc = ssp_try(s, e);
    } else if (s->cons.model == GS_PS_ASYNC) {
      int64_t stale = (int64_t)(s->updates - sl->base);
      int rk[1] = {r}, ix[1] = {0};
      rc = apply(s, rk, ix, 1, e);
      /* the rank waits for this answer, holding its base */
      if (rc == GS_OK) rc = send_version(s, r, stale, sl->base + 1 == s->updates, e);
    } else if (sl->base < s->updates) {  /* backup: computed on an old version */
      sl->used = false;
      rc = send_version(s, r, -1, sl->base + 1 == s->updates, e);
    } else {
      rc = backup_try(s, e);
    }
  }
  mark_round(s, r, step);
  return rc;
}

int gs_pss_stale_bye(gs_ps_server *s, int r, gs_err *e) {
  (void)r;
  s->alive--;
  if (s->cons.model == GS_PS_BSP && s->alive > 0) GS_TRY(backup_try(s, e));
  return GS_OK;
}
