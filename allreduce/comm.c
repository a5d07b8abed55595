/* comm.c: the communicator's life (comm.h): prepare (options, tuning, the
 * neighbours' sockets, then the state of each row the ring's algorithm
 * prepares), the begin and end of every collective, the relay of a
 * failure to every algorithm's peers, interrupt and close; and the
 * per-chunk math every algorithm shares (combine, take, round). It calls
 * the algorithms only through the rows of its table, by number, and names
 * none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/comm.h"

/* Spin before sleeping on a receive only in collectives of at most this
 * many float32 bytes: there a wake-up is a large share of a hop; above it
 * spinning only burns a core the other threads need. */
#define SPIN_MAX_BYTES ((size_t)4 << 20)

void gs_comm_part(size_t count, int world, int rank, size_t *off, size_t *len) {
  gs_part_range(count, world, rank, off, len);
}

static void comm_free(gs_comm *r, bool abort) {
  if (!r) return;
  for (int a = 0; r->state && a < r->nrows; a++)
    if (r->state[a] && r->rows[a].ops->close) r->rows[a].ops->close(r, r->state[a], abort);
  gs_pair_close(r->pair, abort); /* releases whatever ZeroMQ still held */
  for (int a = 0; r->state && a < r->nrows; a++)
    if (r->state[a] && r->rows[a].ops->release) r->rows[a].ops->release(r, r->state[a]);
  free(r->state);
  if (r->stage) r->o.k->release(r->o.k, r->stage);
  free(r->cfgs);
  free(r);
}

bool gs_comm_ready(const gs_comm *r, gs_algo a) {
  void *s = gs_comm_state(r, a);
  return s && (!r->rows[a].ops->ready || r->rows[a].ops->ready(s));
}

const char *gs_comm_phase_name(const gs_comm *r, uint32_t wire) {
  for (int a = 0; a < r->nrows; a++)
    for (int i = 0; i < GS_ALGO_PHASES && r->rows[a].phase[i].name; i++)
      if (r->rows[a].phase[i].wire == wire) return r->rows[a].phase[i].name;
  return "unknown-phase";
}

int gs_comm_fail(gs_comm *r, gs_err *e, int code) {
  r->broken = true;
  if (!e || code == GS_EINTR) return code;
  if (r->pair) gs_pair_tell_once(r->pair, "ring", e->msg);
  for (int a = 0; a < r->nrows; a++)
    if (r->state[a] && r->rows[a].ops->tell) r->rows[a].ops->tell(r->state[a], e->msg);
  return code;
}

void gs_comm_span(const gs_comm *r, const char *name, double t0, double t1) {
  if (r->o.span) r->o.span(r->o.span_ctx, name, r->cur_bucket, t0, t1, 1);
}

int gs_comm_prepare_table(const gs_comm_opts *o, const gs_algo_row *rows, int n, gs_comm **out,
                          char endpoint[GS_ENDPOINT_MAX], gs_err *e) {
  *out = NULL;
  if (endpoint) endpoint[0] = '\0';
  if (!o || !o->k)
    return GS_FAIL(e, GS_EINVAL, "ring: no options or no kernels table");
  if (o->world < 1 || o->rank < 0 || o->rank >= o->world)
    return GS_FAIL(e, GS_EINVAL, "ring: rank %d of world %d is impossible (0 <= rank < world)",
                   o->rank, o->world);
  if (o->wire != GS_F32 && o->wire != GS_F16 && o->wire != GS_BF16 && o->wire != GS_F64 &&
      o->wire != GS_I32)
    return GS_FAIL(e, GS_EINVAL, "rank %d: ring: unknown wire dtype %d", o->rank, (int)o->wire);
  if (!gs_dtype_lp(o->wire) && o->wire != GS_F32 && o->k->device != GS_DEV_CPU)
    return GS_FAIL(e, GS_EINVAL, "rank %d: ring: a %s wire needs host buffers and a CPU "
                   "kernels table, not '%s'", o->rank, gs_dtype_name(o->wire), o->k->name);
  gs_comm *r = calloc(1, sizeof *r);
  if (!r) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", o->rank);
  r->o = *o;
  r->rows = rows;
  r->nrows = n;
  snprintf(r->host, sizeof r->host, "%s", o->host && *o->host ? o->host : "127.0.0.1");
  r->o.host = r->host;
  if (r->o.timeout_ms <= 0) r->o.timeout_ms = 30000;
  r->left = gs_comm_mod(o->rank - 1, o->world);
  r->right = gs_comm_mod(o->rank + 1, o->world);
  gs_comm_tuning(o, r);
  int rc = GS_OK;
  gs_kernels *k = o->k;
  size_t ws = gs_dtype_size(o->wire);

  r->cfgs = calloc((size_t)o->world, sizeof *r->cfgs);
  r->state = calloc((size_t)n, sizeof *r->state);
  if (!r->cfgs || !r->state) {
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", o->rank);
    goto out;
  }
  if (o->world == 1) goto out; /* nothing to talk to */
  if (o->algo < 0 || o->algo >= n) {
    rc = GS_FAIL(e, GS_EINVAL, "rank %d: ring: unknown algorithm %d", o->rank, (int)o->algo);
    goto out;
  }

  if (gs_dtype_lp(o->wire) && !(r->stage = k->alloc(k, o->max_count * ws + 64))) {
    k->sync(k, e);
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the ring's buffers (%zu elements)",
                 o->rank, o->max_count);
    goto out;
  }
  /* the largest payload: a chunk, or a whole vector on the small path */
  size_t max_payload = r->chunk_bytes;
  if (r->small_bytes != GS_COMM_NO_SMALL && r->small_bytes > max_payload)
    max_payload = r->small_bytes;
  if (max_payload > o->max_count * ws) max_payload = o->max_count * ws;
  gs_pair_cfg lc = {.rank = o->rank, .world = o->world, .left = r->left, .right = r->right,
                    .job = o->job, .timeout_ms = r->o.timeout_ms, .spin_us = r->spin_us,
                    .sockbuf = r->sockbuf, .io_threads = r->io_threads, .host = r->host,
                    .max_payload = max_payload, .cred = o->cred,
                    .no_resend = o->no_resend};
  rc = gs_pair_open(&lc, &r->pair, endpoint, e);
  for (int a = 0; rc == GS_OK && a < n; a++) {
    const gs_algo_row *row = &rows[a];
    if (row->ops && (row->under & GS_ALGO_BIT(o->algo)))
      rc = row->ops->prepare(r, row, &r->state[a], e);
  }
out:
  if (rc < 0) {
    comm_free(r, true);
    return rc;
  }
  *out = r;
  return GS_OK;
}

int gs_comm_enter(gs_comm *r, gs_redop op, const void *src, const void *dst, size_t count,
                  int64_t step, int bucket, bool settles, const char *what, gs_err *e) {
  if (!r) return GS_FAIL(e, GS_EINVAL, "ring: %s on no ring", what);
  if (op != GS_REDOP_SUM && op != GS_REDOP_PROD && op != GS_REDOP_MIN && op != GS_REDOP_MAX)
    return GS_FAIL(e, GS_EINVAL, "rank %d: %s with reduction %d: sum, prod, min or max (avg is "
                   "the sum, then the caller's post-division)", r->o.rank, what, (int)op);
  if (op != GS_REDOP_SUM && r->o.k->device != GS_DEV_CPU)
    return GS_FAIL(e, GS_EINVAL, "rank %d: %s: reductions other than the sum run on a CPU "
                   "kernels table, not '%s'", r->o.rank, what, r->o.k->name);
  int ok = gs_reduce_host(op, r->o.wire, 0, NULL, NULL, e);
  if (ok < 0) {
    gs_err_prefix(e, "rank %d: %s: ", r->o.rank, what);
    return ok;
  }
  if (r->broken)
    return GS_FAIL(e, GS_EPEER, "rank %d: the ring failed earlier; close it", r->o.rank);
  if (!r->connected)
    return GS_FAIL(e, GS_EINVAL, "rank %d: %s before gs_comm_connect", r->o.rank, what);
  if (count > r->o.max_count)
    return GS_FAIL(e, GS_EINVAL, "rank %d: %s of %zu elements on a ring prepared for at most "
                   "%zu", r->o.rank, what, count, r->o.max_count);
  if (count > 0 && (!src || !dst))
    return GS_FAIL(e, GS_EINVAL, "rank %d: %s with a NULL buffer", r->o.rank, what);
  if (r->o.world == 1) return 1;
  r->cur_op = op;
  r->cur_step = step;
  r->cur_bucket = bucket;
  r->cur_total = count;
  r->spin_now = count * sizeof(float) <= SPIN_MAX_BYTES;
  gs_pair_begin(r->pair, settles);
  return 0;
}

int gs_comm_leave(gs_comm *r, int rc, gs_err *e) {
  if (rc == GS_OK) rc = r->o.k->sync(r->o.k, e);
  if (rc == GS_OK) rc = gs_pair_end(r->pair, e);
  if (rc < 0) return gs_comm_fail(r, e, rc);
  return GS_OK;
}

int gs_comm_run(gs_comm *r, gs_algo a, gs_redop op, const void *src, void *dst, size_t count,
                int64_t step, int bucket, gs_comm_stats *st, gs_err *e) {
  gs_comm_stats local = {0};
  if (!st) st = &local;
  int in = gs_comm_enter(r, op, src, dst, count, step, bucket, true, "all-reduce", e);
  if (in < 0) return in;
  gs_kernels *k = r->o.k;
  if (in == 1) {
    if (src != dst && count) k->copy(k, dst, src, count * gs_comm_es(r));
    return k->sync(k, e);
  }
  void *s = gs_comm_state(r, a);
  if (!s)
    return GS_FAIL(e, GS_EINVAL, "rank %d: the ring was not prepared for %s", r->o.rank,
                   r->rows[a].name);
  return gs_comm_leave(r, r->rows[a].ops->allreduce(r, s, src, dst, count, st, e), e);
}

void gs_comm_combine(gs_comm *r, size_t n, void *dst, const void *src) {
  gs_kernels *k = r->o.k;
  const gs_dtype w = r->o.wire;
  if (r->cur_op == GS_REDOP_SUM && (w == GS_F32 || gs_dtype_lp(w))) {
    k->add_lp(k, w, n, dst, src);
    return;
  }
  /* on a CPU table only (prepare, enter), whose memory is the host's; the
   * (op, type) pair passed gs_comm_enter's check, so this cannot fail */
  (void)gs_reduce_host(r->cur_op, w, n, dst, src, NULL);
}

void gs_comm_take(gs_comm *r, size_t n, void *dst, const void *src) {
  gs_kernels *k = r->o.k;
  if (gs_dtype_lp(r->o.wire)) k->convert(k, GS_F32, dst, r->o.wire, src, n);
  else k->copy(k, dst, src, n * gs_comm_es(r));
}

void gs_comm_round(gs_comm *r, void *dst, size_t n) {
  gs_kernels *k = r->o.k;
  k->convert(k, r->o.wire, r->stage, GS_F32, dst, n);
  k->convert(k, GS_F32, dst, r->o.wire, r->stage, n);
}

void gs_comm_set_job(gs_comm *r, uint64_t job) {
  if (r && !r->connected) {
    r->o.job = job;
    if (r->pair) gs_pair_set_job(r->pair, job);
  }
}

void gs_comm_interrupt(gs_comm *r) {
  if (!r) return;
  gs_pair_interrupt(r->pair);
  for (int a = 0; a < r->nrows; a++)
    if (r->state[a] && r->rows[a].ops->interrupt) r->rows[a].ops->interrupt(r->state[a]);
}

size_t gs_comm_chunk_bytes(const gs_comm *r) { return r ? r->chunk_bytes : 0; }
size_t gs_comm_small_bytes(const gs_comm *r) { return r ? r->small_bytes : 0; }

void gs_comm_close(gs_comm *r, bool ok, const char *why) {
  if (!r) return;
  if (!ok && r->pair) {
    char msg[512];
    snprintf(msg, sizeof msg, "rank %d aborted%s%s", r->o.rank, why ? ": " : "", why ? why : "");
    gs_pair_tell_once(r->pair, "abort", msg);
    for (int a = 0; a < r->nrows; a++)
      if (r->state[a] && r->rows[a].ops->tell) r->rows[a].ops->tell(r->state[a], msg);
  }
  comm_free(r, !ok);
}
