/* server_join.c: how ranks join the ps server (see server.h): rank 0's
 * Init (checked field by field before anything is allocated), the other
 * ranks' hellos (kept until Init when they come first), the Welcome with
 * rank 0's parameters once every rank is in and agrees, and, when the job
 * fails before that, the same error to the ranks that say hello later, so
 * every rank's open() fails with the cause instead of a timeout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps/server_core.h"

static int send_welcome(gs_ps_server *s, gs_err *e) {
  const float *data = s->master;
  if (!s->cpu) {
    s->k->to_host(s->k, s->hout, s->master, s->n * sizeof(float));
    GS_TRY(gs_pss_kernel_check(s, "copying the initial parameters to the host", e));
    data = s->hout;
  }
  Gradsync__Envelope env;
  Gradsync__Welcome w = GRADSYNC__WELCOME__INIT;
  gs_wire_env(&env, s->o.job, GS_SERVER_RANK);
  w.world = (uint32_t)s->world;
  env.body_case = GRADSYNC__ENVELOPE__BODY_WELCOME;
  env.welcome = &w;
  for (int r = 0; r < s->world; r++) {
    gs_err se = {0};
    atomic_fetch_add(&s->inflight_welcome, 1);
    int rc = gs_wire_send(s->sock, s->peers[r].id, s->peers[r].idlen, &env, data,
                          s->n * sizeof(float), gs_pss_release_count, &s->inflight_welcome,
                          s->timeout_ms, NULL, &se);
    if (rc < 0)
      return FAIL(s, e, rc, "ps server: welcoming rank %d: %s", r, se.msg);
  }
  s->running = true;
  s->sent = s->recv = 0;
  return GS_OK;
}

static int check_init(const Gradsync__Init *in, size_t max_elems, char *why, size_t cap) {
  if (in->world < 1 || in->world > MAX_WORLD)
    return snprintf(why, cap, "world %u is outside 1..%d", in->world, MAX_WORLD), -1;
  if (in->count < 1 || in->count > max_elems)
    return snprintf(why, cap, "%llu parameters (this server accepts 1..%zu)",
                    (unsigned long long)in->count, max_elems), -1;
  if (in->n_bucket_offset != in->n_bucket_count || in->n_bucket_count < 1 ||
      in->n_bucket_count > in->count)
    return snprintf(why, cap, "%zu bucket offsets and %zu counts for %llu parameters",
                    in->n_bucket_offset, in->n_bucket_count, (unsigned long long)in->count), -1;
  if ((int)in->dtype < 0 || (int)in->dtype > 2)
    return snprintf(why, cap, "unknown wire dtype %d", (int)in->dtype), -1;
  if (!(in->scale > 0) || !isfinite(in->scale))
    return snprintf(why, cap, "loss scale %g", (double)in->scale), -1;
  if (!isfinite(in->lr) || !isfinite(in->momentum) || !isfinite(in->weight_decay))
    return snprintf(why, cap, "non-finite SGD settings"), -1;
  if (in->average_over > MAX_WORLD || (in->average_over && in->average_over < in->world))
    return snprintf(why, cap, "an average over %u ranks for %u pushes per bucket",
                    in->average_over, in->world), -1;
  if ((in->sync_model != 0 || in->backup) && in->average_over % in->world)
    return snprintf(why, cap, "ssp, async and backup workers average each push as %u / %u "
                    "ranks, which is not a whole number", in->average_over, in->world), -1;
  if (in->sync_model > 2 || in->staleness > 1000000 || in->backup > in->world)
    return snprintf(why, cap, "consistency model %u (staleness %u, backup %u) for world %u",
                    in->sync_model, in->staleness, in->backup, in->world), -1;
  if ((in->sync_model != 0 || in->backup) && in->sum_only)
    return snprintf(why, cap, "ssp, async and backup workers need the server's optimizer (not "
                    "sums only)"), -1;
  if (in->topk != 0 && (!(in->topk > 0) || in->topk > 1 || in->sync_model != 0 || in->backup ||
                        in->sum_only || in->dtype != GRADSYNC__DTYPE__F32 || in->scale != 1 ||
                        in->dynamic_scale))
    return snprintf(why, cap, "top-k pushes of a share %g (it must be in (0, 1], with bsp, "
                    "fp32 pushes, the optimizer and no loss scaling)", in->topk), -1;
  if (in->powersgd_rank &&
      (in->powersgd_rank > 1u << 16 || !(in->powersgd_min_rate >= 0) ||
       !isfinite(in->powersgd_min_rate) || in->sync_model != 0 || in->backup ||
       in->sum_only || in->dtype != GRADSYNC__DTYPE__F32 || in->scale != 1 ||
       in->dynamic_scale || in->topk != 0 || (in->average_over && in->average_over != in->world)))
    return snprintf(why, cap, "PowerSGD at rank %u (min rate %g): it needs a rank of 1..65536, "
                    "bsp, fp32 pushes of every rank, the optimizer and no loss scaling",
                    in->powersgd_rank, in->powersgd_min_rate), -1;
  if (in->n_tensor_offset != in->n_tensor_rows || in->n_tensor_offset != in->n_tensor_cols ||
      (in->powersgd_rank && (in->n_tensor_offset < 1 || in->n_tensor_offset > in->count)))
    return snprintf(why, cap, "%zu tensor offsets, %zu row and %zu column counts for %llu "
                    "parameters", in->n_tensor_offset, in->n_tensor_rows, in->n_tensor_cols,
                    (unsigned long long)in->count), -1;
  for (size_t i = 0; i < in->n_tensor_offset; i++) {
    uint64_t o = in->tensor_offset[i], r = in->tensor_rows[i], c = in->tensor_cols[i];
    if (o >= in->count || r < 1 || c < 1 || r > in->count || c > (in->count - o) / r)
      return snprintf(why, cap, "tensor %zu (%llu x %llu at %llu) lies outside the %llu "
                      "parameters", i, (unsigned long long)r, (unsigned long long)c,
                      (unsigned long long)o, (unsigned long long)in->count), -1;
  }
  if (!(in->scale_growth >= 0) || !(in->scale_backoff >= 0))
    return snprintf(why, cap, "scaler growth %g / backoff %g", (double)in->scale_growth,
                    (double)in->scale_backoff), -1;
  /* buckets: inside the buffer and disjoint (the sort is over a copy) */
  size_t nb = in->n_bucket_count;
  uint64_t *ends = malloc(nb * 2 * sizeof *ends);
  if (!ends) return snprintf(why, cap, "out of memory"), -1;
  for (size_t i = 0; i < nb; i++) {
    uint64_t o = in->bucket_offset[i], c = in->bucket_count[i];
    if (c < 1 || o > in->count || c > in->count - o) {
      free(ends);
      return snprintf(why, cap, "bucket %zu = [%llu, +%llu) is empty or outside the %llu "
                      "parameters", i, (unsigned long long)o, (unsigned long long)c,
                      (unsigned long long)in->count), -1;
    }
    ends[2 * i] = o;
    ends[2 * i + 1] = o + c;
  }
  /* insertion sort by offset: bucket counts are small */
  for (size_t i = 1; i < nb; i++)
    for (size_t j = i; j > 0 && ends[2 * (j - 1)] > ends[2 * j]; j--) {
      uint64_t t0 = ends[2 * j], t1 = ends[2 * j + 1];
      ends[2 * j] = ends[2 * (j - 1)];
      ends[2 * j + 1] = ends[2 * (j - 1) + 1];
      ends[2 * (j - 1)] = t0;
      ends[2 * (j - 1) + 1] = t1;
    }
  int bad = 0;
  for (size_t i = 1; i < nb && !bad; i++)
    if (ends[2 * i] < ends[2 * (i - 1) + 1]) {
      snprintf(why, cap, "buckets overlap at parameter %llu", (unsigned long long)ends[2 * i]);
      bad = -1;
    }
  free(ends);
  return bad;
}

static int alloc_state(gs_ps_server *s, gs_scaler scaler, gs_err *e) {
  size_t w = (size_t)s->world, nb = (size_t)s->nb;
  s->peers = calloc(w, sizeof *s->peers);
  s->got = calloc(w * nb, 1);
  s->inflight = calloc(nb * w, sizeof *s->inflight);
  if (!s->peers || !s->got || !s->inflight)
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory for %d ranks x %d buckets",
                   s->world, s->nb);
  for (int r = 0; r < s->world; r++) s->peers[r].last_step = -1;
  gs_ps_reduce_cfg rc = {
    .k = s->k, .world = s->world, .nb = s->nb, .off = s->off, .cnt = s->cnt, .n = s->n,
    .wire = s->wire, .inproc = s->o.inproc, .inproc_rank = s->o.inproc_rank,
    .pair_start = s->o.inproc && s->o.inproc_rank == 0 && s->world >= 2 && s->cpu &&
                  s->wire == GS_F32,
    .span = s->o.span, .span_ctx = s->o.span_ctx,
  };
  GS_TRY(gs_ps_reduce_create(&rc, &s->red, e));
  gs_sgd sgd = s->sgd;
  if (s->sum_only) sgd.momentum = 0.0f;
  GS_TRY(gs_update_init(&s->u, s->k, s->n, s->average_over, sgd, s->wire, scaler, e));
  if (s->stale) GS_TRY(gs_pss_stale_init(s, e));
  size_t bytes = s->n * sizeof(float);
  s->master = gs_pss_dev_alloc(s, bytes);
  if (s->wire != GS_F32 && !s->sum_only) {
    s->wout = gs_pss_dev_alloc(s, s->n * s->wsize);
    if (!s->wout)
      return GS_FAIL(e, GS_ENOMEM, "ps server: cannot allocate %zu bytes for %s parameters",
                     s->n * s->wsize, gs_dtype_name(s->wire));
  }
  if (!s->cpu) {
    s->hout = s->k->alloc_host(s->k, bytes);
    if (s->hout) atomic_fetch_add(&s->host_bytes, bytes);
  }
  gs_err ke = {0};
  if (!s->master || (!s->cpu && !s->hout) || s->k->sync(s->k, &ke) < 0)
    return GS_FAIL(e, GS_ENOMEM, "ps server: cannot allocate the master copy of %zu "
                   "parameters on %s%s%s", s->n, s->k->name, ke.code ? ": " : "", ke.msg);
  return GS_OK;
}

static int welcome_if_ready(gs_ps_server *s, gs_err *e) {
  if (s->nknown == s->world) return send_welcome(s, e);
  return GS_OK;
}

static int accept_hello(gs_ps_server *s, const uint8_t *id, size_t idlen, uint32_t rank,
                        uint64_t count, uint32_t nbuckets, gs_err *e) {
  if (rank == 0 || rank >= (uint32_t)s->world)
    return FAIL(s, e, GS_EMISMATCH, "ps server: a worker of this job said hello as rank %u, "
                "but the job has world %d (ranks disagree on the world size)", rank, s->world);
  peer *p = &s->peers[rank];
  if (p->known) {
    if (p->idlen == idlen && memcmp(p->id, id, idlen) == 0)
      return FAIL(s, e, GS_EPROTO, "ps server: rank %u said hello twice", rank);
    gs_pss_warn(s, "a second worker claims rank %u; ignored (are two jobs sharing a job token?)", rank);
    return GS_OK;
  }
  memcpy(p->id, id, idlen);
  p->idlen = idlen;
  p->known = true;
  p->inproc = s->o.inproc && s->o.inproc_rank == (int)rank;
  s->nknown++;
  if (count != s->n || nbuckets != (uint32_t)s->nb)
    return FAIL(s, e, GS_EMISMATCH, "ps server: rank %u holds %llu parameters in %u buckets, "
                "but rank 0 holds %zu in %d: the ranks run different models or bucket sizes",
                rank, (unsigned long long)count, nbuckets, s->n, s->nb);
  return welcome_if_ready(s, e);
}

int gs_pss_on_init(gs_ps_server *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Init *in = m->env->init;
  if (s->have_init) {
    if (s->peers[0].idlen == zmq_msg_size(&m->id) &&
        memcmp(s->peers[0].id, zmq_msg_data(&m->id), s->peers[0].idlen) == 0)
      return FAIL(s, e, GS_EPROTO, "ps server: rank 0 sent Init twice");
    gs_pss_warn(s, "a second Init (claiming rank %u) from another sender; ignored", m->env->rank);
    return GS_OK;
  }
  if (m->env->rank != 0) {
    gs_pss_warn(s, "an Init from a sender claiming rank %u (only rank 0 initialises the server); "
         "ignored", m->env->rank);
    return GS_OK;
  }
  if (s->o.learn_job && !s->o.job) s->o.job = m->env->job;
  char why[sizeof(gs_err){0}.msg];
  gs_err pe = {0};
  int bad = check_init(in, s->o.max_elems, why, sizeof why);
  if (!bad && gs_wire_expect_payload(m, in->count, GS_F32, &pe) < 0) {
    memcpy(why, pe.msg, sizeof why);
    bad = -1;
  }
  if (bad) {
    /* Answer the sender before giving up: it is rank 0 waiting in open(). */
    s->world = 1;
    s->peers = calloc(1, sizeof *s->peers);
    if (s->peers) {
      gs_pss_set_id(s->peers[0].id, &s->peers[0].idlen, &m->id);
      s->peers[0].known = true;
    }
    return FAIL(s, e, GS_EPROTO, "ps server: rank 0's Init is invalid: %s", why);
  }
  s->have_init = true;
  s->world = (int)in->world;
  s->average_over = in->average_over ? (int)in->average_over : s->world;
  /* hosts push their ranks' sums (ps/hostagg.c): a record of those pushes
   * could not be replayed rank by rank, so none is kept */
  if (s->average_over != s->world) memset(&s->o.applied, 0, sizeof s->o.applied);
  s->n = in->count;
  s->nb = (int)in->n_bucket_count;
  s->wire = gs_wire_dtype(in->dtype);
  s->wsize = gs_dtype_size(s->wire);
  s->sgd = (gs_sgd){in->lr, in->momentum, in->weight_decay};
  s->sum_only = in->sum_only;
  s->topk = in->topk;
  gs_scaler scaler;
  gs_scaler_init(&scaler, in->scale, in->dynamic_scale);
  /* 0: the sender left GradScaler's defaults */
  if (in->scale_interval > 0) scaler.interval = (int)in->scale_interval;
  if (in->scale_growth > 0) scaler.growth = in->scale_growth;
  if (in->scale_backoff > 0) scaler.backoff = in->scale_backoff;
  if (in->timeout_ms > 0) s->timeout_ms = (int)in->timeout_ms;
  s->cons = (gs_ps_sync){.model = (gs_ps_model)in->sync_model, .staleness = (int)in->staleness,
                         .backup_on = in->backup > 0, .backup = (int)in->backup - 1};
  s->stale = gs_ps_sync_stale(&s->cons);
  s->off = malloc((size_t)s->nb * sizeof *s->off);
  s->cnt = malloc((size_t)s->nb * sizeof *s->cnt);
  if (!s->off || !s->cnt) return FAIL(s, e, GS_ENOMEM, "ps server: out of memory");
  for (int b = 0; b < s->nb; b++) {
    s->off[b] = in->bucket_offset[b];
    s->cnt[b] = in->bucket_count[b];
    if (s->cnt[b] > s->maxcnt) s->maxcnt = s->cnt[b];
  }
  int rc = alloc_state(s, scaler, e);
  if (!s->peers) return rc;
  if (rc == GS_OK) rc = gs_pss_psgd_init(s, in, e);
  gs_pss_set_id(s->peers[0].id, &s->peers[0].idlen, &m->id);
  s->peers[0].known = true;
  s->peers[0].inproc = s->o.inproc && s->o.inproc_rank == 0;
  s->nknown = 1;
  if (rc < 0) {
    gs_pss_broadcast_error(s, e);
    return rc;
  }
  s->k->to_device(s->k, s->master, zmq_msg_data(&m->payload), s->n * sizeof(float));
  GS_TRY(gs_pss_kernel_check(s, "uploading the initial parameters", e));
  for (int i = 0; i < s->npend; i++) {
    pending_hello *h = &s->pend[i];
    GS_TRY(accept_hello(s, h->id, h->idlen, h->rank, h->count, h->nbuckets, e));
  }
  free(s->pend);
  s->pend = NULL;
  s->npend = 0;
  return s->running ? GS_OK : welcome_if_ready(s, e);
}

int gs_pss_on_hello(gs_ps_server *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Hello *h = m->env->hello;
  if (s->have_init) {
    if (s->running) {
      int r = gs_pss_find_peer(s, &m->id);
      if (r >= 0) return FAIL(s, e, GS_EPROTO, "ps server: rank %d said hello twice", r);
      gs_pss_warn(s, "a hello claiming rank %u after every rank joined; ignored", m->env->rank);
      return GS_OK;
    }
    return accept_hello(s, zmq_msg_data(&m->id), zmq_msg_size(&m->id), m->env->rank, h->count,
                        h->nbuckets, e);
  }
  for (int i = 0; i < s->npend; i++)
    if (s->pend[i].rank == m->env->rank) {
      gs_pss_warn(s, "a second hello claiming rank %u before Init; ignored", m->env->rank);
      return GS_OK;
    }
  if (s->npend == MAX_PENDING) {
    gs_pss_warn(s, "more than %d hellos before rank 0's Init; ignored", MAX_PENDING);
    return GS_OK;
  }
  if (!s->pend && !(s->pend = calloc(MAX_PENDING, sizeof *s->pend)))
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory");
  pending_hello *p = &s->pend[s->npend++];
  gs_pss_set_id(p->id, &p->idlen, &m->id);
  p->rank = m->env->rank;
  p->count = h->count;
  p->nbuckets = h->nbuckets;
  return GS_OK;
}

/* The job failed before every rank joined: answer the ranks that say
 * hello later with the same error, so that every rank's open() fails with
 * the cause instead of a timeout. Bounded by the hello deadline. */
static void tell(gs_ps_server *s, const gs_err *e, uint32_t rank, const void *id, size_t idlen,
                 int *told) {
  if (rank >= (uint32_t)s->world || s->peers[rank].known) return;
  peer *p = &s->peers[rank];
  memcpy(p->id, id, idlen);
  p->idlen = idlen;
  p->known = true;
  (*told)++;
  gs_pss_send_error(s, p, e);
}

void gs_pss_tell_latecomers(gs_ps_server *s, const gs_err *e) {
  double deadline = (s->contact_t0 > 0 ? s->contact_t0 : gs_now()) + s->timeout_ms / 1000.0;
  int told = s->nknown;
  /* hellos that came before Init and were not looked at yet */
  for (int i = 0; i < s->npend; i++)
    tell(s, e, s->pend[i].rank, s->pend[i].id, s->pend[i].idlen, &told);
  while (told < s->world && gs_now() < deadline) {
    gs_wire_msg m;
    gs_err me = {0};
    int rc = gs_wire_recv(s->sock, true, SLICE_MS, s->o.job, s->o.max_elems * sizeof(float), &m,
                          &me);
    if (rc == GS_OK && gs_pss_id_fits(&m) && m.env->body_case == GRADSYNC__ENVELOPE__BODY_HELLO)
      tell(s, e, m.env->rank, zmq_msg_data(&m.id), zmq_msg_size(&m.id), &told);
    gs_wire_msg_close(&m);
    if (rc == GS_EINTR) return;
  }
}

