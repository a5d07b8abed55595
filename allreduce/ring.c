/* ring.c: ring all-reduce over ZeroMQ (allreduce.h), of float32 buffers
 * (the collective benchmark's fp64 and int32 too, and its other ops).
 *
 * Every rank PULLs from its left neighbour (rank - 1) on a socket it bound
 * in gs_ring_prepare, and PUSHes to its right neighbour (rank + 1). The
 * buffer is cut into N segments (s0 .. s3 below) and every segment into C
 * chunks; a segment first leaves the rank with its number and is added to
 * at every hop, so segment j is summed in the fixed order
 * ((g_j + g_j+1) + g_j+2) + ... whatever the timing (determinism).
 *
 *                     rank 0
 *                   ^        \
 *                  /          v
 *             rank 3          rank 1     each rank sends to its right
 *                  ^          /
 *                   \        v
 *                     rank 2
 *
 *   N = 4       rank 0        rank 1        rank 2        rank 3
 *   RS 0  send  s0            s1            s2            s3
 *         recv  s3 +=         s0 +=         s1 +=         s2 +=
 *   RS 1  send  s3            s0            s1            s2
 *         recv  s2 +=         s3 +=         s0 +=         s1 +=
 *   RS 2  send  s2            s3            s0            s1
 *         recv  s1 += (done)  s2 += (done)  s3 += (done)  s0 += (done)
 *   AG 0  send  s1            s2            s3            s0
 *         recv  s0 =          s1 =          s2 =          s3 =
 *   AG 1  send  s0 (fwd)      s1 (fwd)      s2 (fwd)      s3 (fwd)
 *         recv  s3 =          s0 =          s1 =          s2 =
 *   AG 2  send  s3 (fwd)      s0 (fwd)      s1 (fwd)      s2 (fwd)
 *         recv  s2 =          s3 =          s0 =          s1 =
 *
 * Reduce-scatter step k: rank r sends segment r-k and adds what it receives
 * into segment r-k-1; after N-1 steps rank r holds the complete sum of
 * segment r+1. All-gather step k: rank r sends segment r+1-k and copies
 * what it receives into segment r-k; from step 1 on, what it sends is what
 * it has just received, so it forwards the received ZeroMQ message itself.
 *
 * Chunks make it a pipeline (Gloo's ring_chunked, with more in flight).
 * The stream on each link is RS0.c0 RS0.c1 .. RS0.c(C-1) RS1.c0 .. AG(N-2).c(C-1);
 * message k depends only on message k - C (the same chunk one ring step
 * earlier) having been received and added. Message k leaves once message
 * k - W has been handled (W = inflight <= C), so W chunks are in flight on
 * every link: the ZeroMQ I/O thread moves one while this thread adds the
 * previous one, and what leaves was written a moment ago (still in cache,
 * which a whole segment in flight would not be). On loopback TCP the
 * kernel's two copies per byte are most of the cost, so the defaults (512
 * KiB chunks, 2 in flight, the kernel's own socket buffer sizing) keep
 * both cores busy without pushing chunks out of cache.
 *
 * Zero copies of our own: chunks leave from the caller's buffer (or the
 * wire-dtype staging buffer) by zmq_msg_init_data; a release callback
 * clears the chunk's in-flight flag, and a region still held by ZeroMQ is
 * never overwritten (the all-gather writes where reduce-scatter sent) nor
 * handed back to the caller (a collective returns when every flag is
 * clear). Received chunks are added straight out of the zmq_msg. Nothing is
 * allocated per collective: flags, staging, the header arena and scratch
 * are sized in prepare.
 *
 * Every chunk carries a gradsync Envelope with a Chunk header (step,
 * bucket, phase, ring step, segment, chunk, offset, count, dtype, total),
 * compared with what this rank expects; anything else is an error naming
 * the neighbour. The sockets, every wait's timeout, the checked receive
 * and the relay of a failure around the ring (so every rank stops with the
 * cause) are proto/'s gs_link; the handshake is ring_hello.c's.
 *
 * Other reductions (prod, min, max) and types (fp64, int32: the wire is
 * the buffer's own type) take the same paths; only the per-chunk math is
 * gs_ring_combine's other branch, so the order, and the bits, stay fixed.
 *
 * Mixed precision: chunks travel in the wire dtype. Each hop adds the
 * received fp16/bf16 partial sum into its own fp32 values and rounds once
 * to the wire dtype for the next hop; the owner keeps the rounded value, so
 * every rank ends with the same bits.
 *
 * Small collectives (<= small_bytes): the ring's 2(N-1) dependent hops are
 * pure latency, so every rank instead sends its whole vector around the
 * ring (N-1 hops) and sums the N vectors locally in rank order, which again
 * gives every rank the same bits. Recursive doubling and direct exchange,
 * over a socket to every rank, are small.c's (gs_ring_opts.algo). */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/ring_internal.h"

#define DEFAULT_CHUNK ((size_t)512 << 10)
#define DEFAULT_SMALL ((size_t)64 << 10)
#define DEFAULT_SOCKBUF 0 /* the kernel's autotuning: less system time than 4 MiB */
#define DEFAULT_INFLIGHT 2
/* Before sleeping on a receive, poll this long (yielding the core), but only
 * in collectives of at most SPIN_MAX_BYTES: there a wake-up is a large
 * share of a hop; above it spinning only burns a core the other threads
 * need. */
#define DEFAULT_SPIN_US 100
#define SPIN_MAX_BYTES ((size_t)4 << 20)

size_t gs_ring_env_size(const char *name, size_t fallback) {
  const char *s = getenv(name);
  if (!s || !*s) return fallback;
  if (!strcmp(s, "never") || !strcmp(s, "none")) return GS_RING_NO_SMALL;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return fallback;
  switch (*end) {
  case 'k': case 'K': v <<= 10; break;
  case 'm': case 'M': v <<= 20; break;
  case 'g': case 'G': v <<= 30; break;
  default: break;
  }
  return (size_t)v;
}

void gs_ring_seg_range(size_t n, int N, int j, size_t *off, size_t *len) {
  size_t q = n / (size_t)N, rem = n % (size_t)N, uj = (size_t)j;
  *len = q + (uj < rem);
  *off = uj * q + (uj < rem ? uj : rem);
}

static void chunk_range(size_t seglen, size_t C, size_t c, size_t *off, size_t *len) {
  size_t q = seglen / C, rem = seglen % C;
  *len = q + (c < rem);
  *off = c * q + (c < rem ? c : rem);
}

static size_t chunks_per_segment(const gs_ring *r, size_t n) {
  size_t ce = r->chunk_bytes / gs_dtype_size(r->o.wire);
  if (ce == 0) ce = 1;
  size_t segmax = (n + (size_t)r->o.world - 1) / (size_t)r->o.world;
  return segmax ? (segmax + ce - 1) / ce : 1;
}

size_t gs_ring_chunks(const gs_ring *r, size_t n) { return chunks_per_segment(r, n); }

static void ring_free(gs_ring *r, bool abort) {
  if (!r) return;
  if (r->held) {
    for (int i = 0; i < r->o.world; i++) zmq_msg_close(&r->held[i]);
    free(r->held);
  }
  if (r->hold) {
    for (size_t i = 0; i < r->nhold; i++) zmq_msg_close(&r->hold[i]);
    free(r->hold);
  }
  gs_small_free(r, abort);
  gs_shm_free(r);
  gs_link_close(r->link, abort); /* releases whatever ZeroMQ still held */
  gs_kernels *k = r->o.k;
  if (k) {
    if (r->stage) k->release(k, r->stage);
    if (r->scratch) k->release(k, r->scratch);
  }
  free(r->flags);
  free(r->sent_seq);
  free(r->cfgs);
  free(r);
}

int gs_ring_fail(gs_ring *r, gs_err *e, int code) {
  r->broken = true;
  if (e && code != GS_EINTR && r->link) gs_link_tell_once(r->link, "ring", e->msg);
  if (e && code != GS_EINTR) gs_mesh_tell(r->mesh, e->msg);
  if (e && code != GS_EINTR) gs_shm_abort(r, e->msg);
  return code;
}

static void span(gs_ring *r, const char *name, double t0, double t1) {
  if (r->o.span) r->o.span(r->o.span_ctx, name, r->cur_bucket, t0, t1, 1);
}

int gs_ring_prepare(const gs_ring_opts *o, gs_ring **out, char endpoint[GS_ENDPOINT_MAX],
                    gs_err *e) {
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
  gs_ring *r = calloc(1, sizeof *r);
  if (!r) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", o->rank);
  r->o = *o;
  snprintf(r->host, sizeof r->host, "%s", o->host && *o->host ? o->host : "127.0.0.1");
  r->o.host = r->host;
  if (r->o.timeout_ms <= 0) r->o.timeout_ms = 30000;
  r->left = gs_ring_mod(o->rank - 1, o->world);
  r->right = gs_ring_mod(o->rank + 1, o->world);
  r->chunk_bytes = o->chunk_bytes ? o->chunk_bytes
                                   : gs_ring_env_size("GS_RING_CHUNK", DEFAULT_CHUNK);
  r->small_bytes = o->small_bytes ? o->small_bytes
                                  : gs_ring_env_size("GS_RING_SMALL", DEFAULT_SMALL);
  int io_threads = o->io_threads > 0 ? o->io_threads
                                     : (int)gs_ring_env_size("GS_RING_IO_THREADS", 1);
  int sockbuf = o->sockbuf != 0 ? o->sockbuf
                                : (int)gs_ring_env_size("GS_RING_SOCKBUF", DEFAULT_SOCKBUF);
  r->spin_us = o->spin_us > 0 ? o->spin_us
                              : (int)gs_ring_env_size("GS_RING_SPIN_US", DEFAULT_SPIN_US);
  /* With more ranks than cores a polling rank takes the core from the
   * thread that would bring its message. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const char *spin_env = getenv("GS_RING_SPIN_US");
  if (o->spin_us <= 0 && !(spin_env && *spin_env) && cores > 0 && o->local_ranks > cores)
    r->spin_us = 0;
  r->inflight = o->inflight > 0 ? o->inflight
                                 : (int)gs_ring_env_size("GS_RING_INFLIGHT", DEFAULT_INFLIGHT);
  size_t ws = gs_dtype_size(o->wire);
  if (r->chunk_bytes < ws) r->chunk_bytes = ws;
  if (r->chunk_bytes > ((size_t)1 << 30)) r->chunk_bytes = (size_t)1 << 30;
  int rc = GS_OK;
  gs_kernels *k = o->k;

  r->cfgs = calloc((size_t)o->world, sizeof *r->cfgs);
  r->held = calloc((size_t)o->world, sizeof *r->held);
  if (!r->cfgs || !r->held) {
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", o->rank);
    goto out;
  }
  for (int i = 0; i < o->world; i++) zmq_msg_init(&r->held[i]);
  if (o->world == 1) goto out; /* nothing to talk to */

  /* flags for every chunk sent zero-copy in one collective of max_count */
  size_t C = chunks_per_segment(r, o->max_count);
  r->nflags = (size_t)o->world * C;
  r->flags = calloc(r->nflags, sizeof *r->flags);
  r->sent_seq = calloc(r->nflags, sizeof *r->sent_seq);
  r->nhold = C;
  r->hold = calloc(C, sizeof *r->hold);
  if (r->hold)
    for (size_t i = 0; i < C; i++) zmq_msg_init(&r->hold[i]);
  size_t small_elems = r->small_bytes == GS_RING_NO_SMALL ? 0 : r->small_bytes / sizeof(float);
  if (small_elems > o->max_count) small_elems = o->max_count;
  const bool lp = gs_dtype_lp(o->wire);
  r->scratch = k->alloc(k, small_elems * gs_ring_es(r) + 64);
  if (lp) r->stage = k->alloc(k, o->max_count * ws + 64);
  if (!r->flags || !r->sent_seq || !r->hold || !r->scratch || (lp && !r->stage)) {
    k->sync(k, e);
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the ring's buffers (%zu elements)",
                 o->rank, o->max_count);
    goto out;
  }

  /* the largest payload: a chunk, or a whole vector on the small path */
  size_t max_payload = r->chunk_bytes;
  if (r->small_bytes != GS_RING_NO_SMALL && r->small_bytes > max_payload)
    max_payload = r->small_bytes;
  if (max_payload > o->max_count * ws) max_payload = o->max_count * ws;
  gs_link_cfg lc = {.rank = o->rank, .world = o->world, .left = r->left, .right = r->right,
                    .job = o->job, .timeout_ms = r->o.timeout_ms, .spin_us = r->spin_us,
                    .sockbuf = sockbuf, .io_threads = io_threads, .host = r->host,
                    .max_payload = max_payload, .cred = o->cred,
                    .no_resend = o->no_resend};
  rc = gs_link_open(&lc, &r->link, endpoint, e);
  if (rc == GS_OK) rc = gs_small_prepare(r, e);
  if (rc == GS_OK) rc = gs_shm_prepare(r, e);
out:
  if (rc < 0) {
    ring_free(r, true);
    return rc;
  }
  *out = r;
  return GS_OK;
}

static int small_path(gs_ring *r, const void *src, void *dst, size_t n, gs_ring_stats *st,
                      gs_err *e) {
  gs_kernels *k = r->o.k;
  const int N = r->o.world, me = r->o.rank;
  const gs_dtype w = r->o.wire;
  const bool lp = gs_dtype_lp(w);
  const size_t es = gs_ring_es(r);
  const double t0 = gs_now();
  double red = 0;
  const void *own = src;
  if (lp) {
    double a = gs_now();
    k->convert(k, w, r->stage, GS_F32, src, n);
    red += gs_now() - a;
    own = r->stage;
  }
  gs_ring_want wt = {.phase = PH_SMALL, .ring_step = 0, .segment = me, .chunk = 0, .offset = 0,
             .count = n};
  int rc = gs_ring_send_chunk(r, &wt, own, NULL, NULL, &st->bytes_sent, e);
  if (rc < 0) return rc;
  for (int s = 0; s < N - 1; s++) {
    int origin = gs_ring_mod(me - 1 - s, N);
    gs_ring_want wr = {.phase = PH_SMALL, .ring_step = s, .segment = origin, .chunk = 0, .offset = 0,
               .count = n};
    zmq_msg_close(&r->held[origin]);
    rc = gs_ring_recv_chunk(r, &wr, &r->held[origin], &st->bytes_recv, e);
    if (rc < 0) return rc;
    if (s < N - 2) {
      zmq_msg_t fwd;
      zmq_msg_init(&fwd);
      zmq_msg_copy(&fwd, &r->held[origin]);
      wr.ring_step = s + 1;
      rc = gs_ring_send_chunk(r, &wr, NULL, NULL, &fwd, &st->bytes_sent, e);
      zmq_msg_close(&fwd);
      if (rc < 0) return rc;
    }
  }
  /* Sum in rank order on every rank: the same bits everywhere. */
  double a = gs_now();
  if (!lp) {
    if (src == dst && me != 0) {
      k->copy(k, r->scratch, dst, n * es);
      own = r->scratch;
    }
    for (int i = 0; i < N; i++) {
      const void *v = i == me ? own : zmq_msg_data(&r->held[i]);
      if (i == 0) {
        if (v != dst) k->copy(k, dst, v, n * es);
      } else {
        gs_ring_combine(r, n, dst, v);
      }
    }
  } else {
    for (int i = 0; i < N; i++) {
      const void *v = i == me ? own : zmq_msg_data(&r->held[i]);
      if (i == 0) k->convert(k, GS_F32, dst, w, v, n);
      else gs_ring_combine(r, n, dst, v);
    }
    /* the sum travels no further, but round it as the ring's owner does */
    k->convert(k, w, r->stage, GS_F32, dst, n);
    k->convert(k, GS_F32, dst, w, r->stage, n);
  }
  red += gs_now() - a;
  for (int i = 0; i < N; i++) {
    zmq_msg_close(&r->held[i]);
    zmq_msg_init(&r->held[i]);
  }
  st->reduce_s += red;
  double t1 = gs_now();
  span(r, "all-gather", t0, t1);
  return GS_OK;
}

/* The k-th message of a collective's stream, as this rank sends it
 * (send) or receives it (!send). */
typedef struct ring_geom {
  int N, me;
  size_t n, C, per;
  int rot;   /* data segment = ring segment - rot (a phase alone: rank r owns segment r) */
} ring_geom;

static void geom(const ring_geom *g, size_t k, bool send, gs_ring_want *w) {
  w->phase = k < g->per ? PH_RS : PH_AG;
  w->ring_step = (int)((k % g->per) / g->C);
  w->chunk = (int)(k % g->C);
  int s = w->ring_step;
  w->segment = w->phase == PH_RS ? gs_ring_mod(g->me - s - !send, g->N) : gs_ring_mod(g->me + send - s, g->N);
  size_t so, sl, co, cl;
  gs_ring_seg_range(g->n, g->N, gs_ring_mod(w->segment - g->rot, g->N), &so, &sl);
  chunk_range(sl, g->C, (size_t)w->chunk, &co, &cl);
  w->offset = so + co;
  w->count = cl;
}

int gs_ring_phases(gs_ring *r, const void *src, void *dst, size_t n, int phases,
                   gs_ring_stats *st, gs_err *e) {
  gs_kernels *k = r->o.k;
  const int N = r->o.world, me = r->o.rank;
  const gs_dtype w = r->o.wire;
  const size_t ws = gs_dtype_size(w), es = gs_ring_es(r);
  const bool lp = gs_dtype_lp(w);
  const size_t C = chunks_per_segment(r, n);
  const size_t per = (size_t)(N - 1) * C; /* messages per phase */
  /* the messages [k0, M) of the all-reduce's stream; send k of them */
  const size_t k0 = phases & GS_RING_RS ? 0 : per, M = phases & GS_RING_AG ? 2 * per : per;
  const size_t W = r->inflight > 0 && (size_t)r->inflight < C ? (size_t)r->inflight : C;
  const ring_geom g = {N, me, n, C, per, phases == (GS_RING_RS | GS_RING_AG) ? 0 : 1};
  uint8_t *stage = r->stage;
  const double t0 = gs_now();
  double t_rs = t0, red = 0;
  int rc = GS_OK;
  if (phases == GS_RING_AG && lp) {
    /* own segment to the wire dtype, kept as the others will hold it */
    size_t so, sl;
    gs_ring_seg_range(n, N, me, &so, &sl);
    k->convert(k, w, stage + so * ws, GS_F32, gs_ring_at(r, dst, so), sl);
    k->convert(k, GS_F32, gs_ring_at(r, dst, so), w, stage + so * ws, sl);
  }

  /* Message k leaves once message k - W has been received and handled,
   * so W chunks are in flight on every link; k >= C also needs message
   * k - C (the same chunk one ring step earlier), which W <= C ensures. */
  for (size_t kk = k0; kk < M + W; kk++) {
    if (kk >= k0 + W) { /* receive and handle message kk - W */
      size_t kr = kk - W;
      gs_ring_want wr;
      geom(&g, kr, false, &wr);
      zmq_msg_t msg;
      rc = gs_ring_recv_chunk(r, &wr, &msg, &st->bytes_recv, e);
      if (rc < 0) {
        zmq_msg_close(&msg);
        return rc;
      }
      void *d = gs_ring_at(r, dst, wr.offset);
      if (wr.phase == PH_RS) {
        double a = gs_now();
        const void *p = zmq_msg_data(&msg);
        if (src != dst) k->copy(k, d, gs_ring_at(r, src, wr.offset), wr.count * es);
        gs_ring_combine(r, wr.count, d, p);
        if (lp) {
          /* what the next hop gets; the owner keeps exactly that */
          k->convert(k, w, stage + wr.offset * ws, GS_F32, d, wr.count);
          if (wr.ring_step == N - 2)
            k->convert(k, GS_F32, d, w, stage + wr.offset * ws, wr.count);
        }
        red += gs_now() - a;
        zmq_msg_close(&msg);
        if (kr + 1 == per) t_rs = gs_now();
      } else {
        /* The final value of this chunk holds what this rank sent for it
         * in reduce-scatter step s, so the right neighbour had that
         * message, and every one before: the resend log lets them go
         * before the region they were borrowed from is written. */
        const size_t rs_slot = (size_t)wr.ring_step * C + (size_t)wr.chunk;
        if (g.rot == 0) gs_link_acked(r->link, r->sent_seq[rs_slot]);
        /* reduce-scatter step s sent this very region; ZeroMQ must be done */
        if (!lp) {
          rc = gs_link_wait_released(r->link, &r->flags[rs_slot], "the all-gather", e);
          if (rc < 0) {
            zmq_msg_close(&msg);
            return rc;
          }
        }
        gs_ring_take(r, wr.count, d, zmq_msg_data(&msg));
        if (wr.ring_step < N - 2) zmq_msg_move(&r->hold[wr.chunk], &msg); /* to forward */
        zmq_msg_close(&msg);
      }
    }
    if (kk < M) { /* send message kk */
      gs_ring_want wn;
      geom(&g, kk, true, &wn);
      const void *data = NULL;
      atomic_uint *flag = NULL;
      zmq_msg_t *fwd = NULL;
      if (wn.phase == PH_AG && wn.ring_step > 0) {
        fwd = &r->hold[wn.chunk]; /* forward what came in one step earlier */
      } else {
        size_t slot = wn.phase == PH_RS ? kk : per + (size_t)wn.chunk;
        flag = &r->flags[slot];
        if (kk < C && lp) { /* our own segment, rounded to the wire dtype */
          double a = gs_now();
          k->convert(k, w, stage + wn.offset * ws, GS_F32, gs_ring_at(r, src, wn.offset),
                     wn.count);
          red += gs_now() - a;
        }
        data = lp ? (const void *)(stage + wn.offset * ws)
                  : gs_ring_at(r, kk < C ? src : dst, wn.offset);
      }
      rc = gs_ring_send_chunk(r, &wn, fwd ? NULL : data, flag, fwd, &st->bytes_sent, e);
      if (rc < 0) return rc;
      if (wn.phase == PH_RS) r->sent_seq[kk] = gs_link_last_seq(r->link);
    }
  }
  /* Hand the buffers back only when ZeroMQ holds none of them. */
  GS_TRY(gs_ring_wait_flags(r, per + C, e));
  st->reduce_s += red;
  double t1 = gs_now();
  if (phases & GS_RING_RS) span(r, "reduce-scatter", t0, t_rs);
  if (phases & GS_RING_AG) span(r, "all-gather", phases & GS_RING_RS ? t_rs : t0, t1);
  return GS_OK;
}

int gs_ring_wait_flags(gs_ring *r, size_t n, gs_err *e) {
  for (size_t i = 0; i < n; i++)
    GS_TRY(gs_link_wait_released(r->link, &r->flags[i], "the end of a collective", e));
  return GS_OK;
}

int gs_ring_enter(gs_ring *r, gs_redop op, const void *src, const void *dst, size_t count,
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
    return GS_FAIL(e, GS_EINVAL, "rank %d: %s before gs_ring_connect", r->o.rank, what);
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
  gs_link_begin(r->link, settles);
  return 0;
}

void gs_ring_combine(gs_ring *r, size_t n, void *dst, const void *src) {
  gs_kernels *k = r->o.k;
  const gs_dtype w = r->o.wire;
  if (r->cur_op == GS_REDOP_SUM && (w == GS_F32 || gs_dtype_lp(w))) {
    k->add_lp(k, w, n, dst, src);
    return;
  }
  /* on a CPU table only (prepare, enter), whose memory is the host's; the
   * (op, type) pair passed gs_ring_enter's check, so this cannot fail */
  (void)gs_reduce_host(r->cur_op, w, n, dst, src, NULL);
}

void gs_ring_take(gs_ring *r, size_t n, void *dst, const void *src) {
  gs_kernels *k = r->o.k;
  if (gs_dtype_lp(r->o.wire)) k->convert(k, GS_F32, dst, r->o.wire, src, n);
  else k->copy(k, dst, src, n * gs_ring_es(r));
}

int gs_ring_allreduce(gs_ring *r, const void *src, void *dst, size_t count, int64_t step,
                      int bucket, gs_ring_stats *st, gs_err *e) {
  return gs_ring_allreduce_op(r, GS_REDOP_SUM, src, dst, count, step, bucket, st, e);
}

int gs_ring_allreduce_op(gs_ring *r, gs_redop op, const void *src, void *dst, size_t count,
                         int64_t step, int bucket, gs_ring_stats *st, gs_err *e) {
  gs_ring_stats local = {0};
  if (!st) st = &local;
  int in = gs_ring_enter(r, op, src, dst, count, step, bucket, true, "all-reduce", e);
  if (in < 0) return in;
  gs_kernels *k = r->o.k;
  if (in == 1) {
    if (src != dst && count) k->copy(k, dst, src, count * gs_ring_es(r));
    return k->sync(k, e);
  }
  /* by float32 size, so fp16 and fp32 pick the same algorithm (and half
   * the bytes) */
  bool small = r->small_bytes != GS_RING_NO_SMALL && count * sizeof(float) <= r->small_bytes;
  int rc;
  switch (gs_ring_algo(r, count)) {
  case GS_ALGO_SHM: rc = gs_shm_allreduce(r, src, dst, count, st, e); break;
  case GS_ALGO_RD: rc = gs_small_rd(r, src, dst, count, st, e); break;
  case GS_ALGO_DIRECT: rc = gs_small_direct(r, src, dst, count, st, e); break;
  default: rc = small ? small_path(r, src, dst, count, st, e)
              : gs_ring_phases(r, src, dst, count, GS_RING_RS | GS_RING_AG, st, e);
  }
  if (rc == GS_OK) rc = k->sync(k, e);
  if (rc == GS_OK) rc = gs_link_end(r->link, e);
  if (rc < 0) return gs_ring_fail(r, e, rc);
  return GS_OK;
}

void gs_ring_tune_malloc(void) {
  const char *s = getenv("GS_RING_MALLOPT");
  if (s && !strcmp(s, "0")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  /* glibc's largest */
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

void gs_ring_set_job(gs_ring *r, uint64_t job) {
  if (r && !r->connected) {
    r->o.job = job;
    if (r->link) gs_link_set_job(r->link, job);
  }
}

void gs_ring_interrupt(gs_ring *r) {
  if (r) {
    gs_link_interrupt(r->link);
    gs_mesh_interrupt(r->mesh);
    gs_shm_interrupt(r);
  }
}

size_t gs_ring_chunk_bytes(const gs_ring *r) { return r ? r->chunk_bytes : 0; }
size_t gs_ring_small_bytes(const gs_ring *r) { return r ? r->small_bytes : 0; }

void gs_ring_close(gs_ring *r, bool ok, const char *why) {
  if (!r) return;
  if (!ok && r->link) {
    char msg[512];
    snprintf(msg, sizeof msg, "rank %d aborted%s%s", r->o.rank, why ? ": " : "", why ? why : "");
    gs_link_tell_once(r->link, "abort", msg);
    gs_mesh_tell(r->mesh, msg);
    gs_shm_abort(r, msg);
  }
  ring_free(r, !ok);
}
