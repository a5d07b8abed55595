/* ring.c: ring all-reduce of float32 buffers over ZeroMQ (allreduce.h).
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
 * previous one, and what leaves was written a moment ago (still in cache;
 * a whole segment in flight measured slower). On loopback TCP the kernel's
 * two copies per byte are most of the cost; 512 KiB chunks, 2 in flight
 * and the kernel's own socket buffer sizing measured best on 2 cores.
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
 * unpacked into a fixed arena and compared with what this rank expects;
 * anything else is an error naming the neighbour. Every wait has the
 * timeout; a failure is sent to the right neighbour as an Error message so
 * it travels around the ring and every rank stops with the cause.
 *
 * Mixed precision: chunks travel in the wire dtype. Each hop adds the
 * received fp16/bf16 partial sum into its own fp32 values and rounds once
 * to the wire dtype for the next hop; the owner keeps the rounded value, so
 * every rank ends with the same bits.
 *
 * Small collectives (<= small_bytes): the ring's 2(N-1) dependent hops are
 * pure latency, so every rank instead sends its whole vector around the
 * ring (N-1 hops) and sums the N vectors locally in rank order, which again
 * gives every rank the same bits. */
#include "allreduce/allreduce.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "proto/wire.h"

#define DEFAULT_CHUNK ((size_t)512 << 10)
#define DEFAULT_SMALL ((size_t)64 << 10)
#define DEFAULT_SOCKBUF 0 /* the kernel's autotuning: less system time than 4 MiB */
#define DEFAULT_INFLIGHT 2
/* Before sleeping on a receive, poll this long (yielding the core), but only
 * in collectives of at most SPIN_MAX_BYTES: there a wake-up (~20 us on a VM)
 * is a large share of a hop (1 MiB, 2 ranks: 1.9 -> 2.4 GB/s measured);
 * above it spinning only burns a core the other threads need. */
#define DEFAULT_SPIN_US 100
#define SPIN_MAX_BYTES ((size_t)4 << 20)
#define SLICE_MS 50
#define GONE_GRACE_S 0.25      /* after the left neighbour disconnects */
#define HDR_MAX 4096           /* a chunk header is ~50 bytes; an Error ~1 KiB */
#define ARENA_BYTES (64 << 10) /* protobuf-c unpack of one header of HDR_MAX */

enum { PH_RS = 0, PH_AG = 1, PH_SMALL = 2 };
static const char *phase_name[] = {"reduce-scatter", "all-gather", "all-gather of whole vectors"};

typedef struct hello_cfg {
  bool have;
  uint32_t world, nbuckets, dtype;
  uint64_t count, chunk_bytes, small_bytes, plan_hash;
  bool sum_only;
} hello_cfg;

struct gs_ring {
  gs_ring_opts o;
  char host[256];
  char endpoint[GS_ENDPOINT_MAX];
  int left, right;
  size_t chunk_bytes, small_bytes;
  int sockbuf, io_threads, spin_us;
  bool spin_now;             /* this collective is small enough to spin for */
  void *ctx, *pull, *push, *mon;
  bool connected, broken, told_right;
  int errors_sent;
  double left_gone_at;       /* > 0: the left neighbour closed its connection */
  uint32_t peer_fd[32];      /* open connections on the PULL socket */
  int npeers;

  void *stage;               /* max_count elements of the wire dtype (wire != F32) */
  float *scratch;            /* small path: own fp32 vector when src == dst */
  atomic_uint *flags;        /* per chunk sent zero-copy: ZeroMQ still holds it */
  size_t nflags;
  zmq_msg_t *held;           /* small path: the N vectors */
  zmq_msg_t *hold;           /* all-gather: a received chunk until it is forwarded */
  size_t nhold;
  int inflight;              /* chunks in flight per link (0: a whole segment) */
  hello_cfg *cfgs;           /* handshake: every rank's configuration */
  atomic_int stop;

  /* what is being done, for error messages */
  int64_t cur_step;
  int cur_bucket;
  size_t cur_total;

  ProtobufCAllocator alloc;  /* bump allocator over arena */
  size_t arena_used;
  uint8_t *arena;
  uint8_t hbuf[HDR_MAX];
};

/* ------------------------------------------------------------------ */
/* small helpers */

static int mod(int a, int n) { return ((a % n) + n) % n; }

static void *arena_alloc(void *data, size_t size) {
  gs_ring *r = data;
  size = (size + 15) & ~(size_t)15;
  if (size > ARENA_BYTES - r->arena_used) return NULL;
  void *p = r->arena + r->arena_used;
  r->arena_used += size;
  return p;
}
static void arena_free(void *data, void *p) {}

/* "256K", "4M", "1G" or plain bytes; returns fallback when unset/invalid. */
static size_t env_size(const char *name, size_t fallback) {
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

static void seg_range(size_t n, int N, int j, size_t *off, size_t *len) {
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

static void released(void *data, void *hint) {
  atomic_store_explicit((atomic_uint *)hint, 0u, memory_order_release);
}

/* ------------------------------------------------------------------ */
/* errors */

/* "reduce-scatter step 2/3 of bucket 3, step 14" */
static void where(const gs_ring *r, int phase, int ring_step, char *buf, size_t cap) {
  snprintf(buf, cap, "%s step %d/%d of bucket %d, step %" PRId64, phase_name[phase],
           ring_step + 1, r->o.world - 1, r->cur_bucket, r->cur_step);
}

static void send_error(gs_ring *r, const char *phase, const char *msg);

/* Best effort: tell the right neighbour why we stop, once. */
static void tell_right(gs_ring *r, const char *phase, const char *msg) {
  if (!r->told_right) send_error(r, phase, msg);
}

static int fail(gs_ring *r, gs_err *e, int code) {
  r->broken = true;
  if (e && code != GS_EINTR) tell_right(r, "ring", e->msg);
  return code;
}

/* ------------------------------------------------------------------ */
/* receiving */

/* Monitor events of the PULL socket: the open TCP connections (the left
 * neighbour's, and any stranger's), by file descriptor. When the last of
 * them closes, the left neighbour is gone. */
static void watch_left(gs_ring *r) {
  for (;;) {
    zmq_msg_t ev;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, r->mon, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&ev);
      return;
    }
    uint16_t id = 0;
    uint32_t fd = 0;
    if (zmq_msg_size(&ev) >= 6) {
      memcpy(&id, zmq_msg_data(&ev), 2);
      memcpy(&fd, (const uint8_t *)zmq_msg_data(&ev) + 2, 4);
    }
    bool more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    while (more) { /* the endpoint frame */
      zmq_msg_init(&ev);
      if (zmq_msg_recv(&ev, r->mon, ZMQ_DONTWAIT) < 0) more = false;
      else more = zmq_msg_more(&ev);
      zmq_msg_close(&ev);
    }
    if (id == ZMQ_EVENT_ACCEPTED) {
      if (r->npeers < (int)(sizeof r->peer_fd / sizeof *r->peer_fd)) r->peer_fd[r->npeers++] = fd;
      r->left_gone_at = 0;
    } else if (id == ZMQ_EVENT_DISCONNECTED) {
      for (int i = 0; i < r->npeers; i++) {
        if (r->peer_fd[i] != fd) continue;
        r->peer_fd[i] = r->peer_fd[--r->npeers];
        if (r->npeers == 0 && r->left_gone_at == 0) r->left_gone_at = gs_now();
        break;
      }
    }
  }
}

/* Wait until the PULL socket has a message: 1, or 0 when the deadline (or
 * the grace after the left neighbour disconnected) passed. */
static int wait_in(gs_ring *r, double deadline, gs_err *e) {
  for (;;) {
    if (atomic_load(&r->stop)) return GS_FAIL(e, GS_EINTR, "rank %d: ring interrupted", r->o.rank);
    if (gs_interrupted) return GS_FAIL(e, GS_EINTR, "rank %d: interrupted", r->o.rank);
    double now = gs_now();
    double end = deadline;
    if (r->left_gone_at > 0 && r->left_gone_at + GONE_GRACE_S < end)
      end = r->left_gone_at + GONE_GRACE_S;
    double left = end - now;
    int slice = left <= 0 ? 0 : (int)(left * 1000.0) + 1;
    if (slice > SLICE_MS) slice = SLICE_MS;
    zmq_pollitem_t it[2] = {{.socket = r->pull, .events = ZMQ_POLLIN},
                            {.socket = r->mon, .events = ZMQ_POLLIN}};
    int rc = zmq_poll(it, r->mon ? 2 : 1, slice);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return GS_FAIL(e, GS_EIO, "rank %d: zmq_poll: %s", r->o.rank, zmq_strerror(errno));
    }
    if (it[0].revents & ZMQ_POLLIN) return 1;
    if (r->mon && (it[1].revents & ZMQ_POLLIN)) watch_left(r);
    if (left <= 0) return 0;
  }
}

typedef struct want {
  int phase, ring_step, segment, chunk;
  size_t offset, count;
} want;

/* Where a message belongs, put in words only when an error needs it. */
typedef struct where_ctx {
  const want *w;
  const char *text;
  char buf[160];
} where_ctx;

static const char *wtext(const gs_ring *r, where_ctx *c) {
  if (c->text) return c->text;
  if (!c->buf[0]) where(r, c->w->phase, c->w->ring_step, c->buf, sizeof c->buf);
  return c->buf;
}

/* Pass an error on to the right neighbour (best effort, never blocks). The
 * first one also stops fail() from sending another. */
static void send_error(gs_ring *r, const char *phase, const char *msg) {
  if (!r->push || r->errors_sent > 4 * r->o.world) return;
  r->errors_sent++;
  r->told_right = true;
  Gradsync__Envelope env;
  Gradsync__Error err = GRADSYNC__ERROR__INIT;
  gs_wire_env(&env, r->o.job, (uint32_t)r->o.rank);
  err.phase = (char *)phase;
  err.message = (char *)msg;
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &err;
  size_t len = gradsync__envelope__get_packed_size(&env);
  if (len > sizeof r->hbuf) return;
  gradsync__envelope__pack(&env, r->hbuf);
  zmq_send(r->push, r->hbuf, len, ZMQ_DONTWAIT);
}

/* How long a rank that gave up listens for news from further up the ring. */
static double grace_s(const gs_ring *r) {
  double g = r->o.timeout_ms / 4000.0;
  return g < 0.5 ? g : 0.5;
}

/* This rank stops because of its left neighbour: a timeout or a closed
 * connection (mine: this rank's sentence) or an Error the neighbour sent
 * (upstream: its text). When one rank stalls, every rank behind it waits
 * and times out at about the same moment, so the first news to reach a rank
 * may be a neighbour's own timeout rather than the cause. So: tell the
 * right neighbour what we know, then listen a moment (grace_s) for Errors
 * from the left, passing each one on; each later one started one hop
 * further up the ring, and the last is the cause. */
static int settle(gs_ring *r, int code, const char *mine, const char *upstream,
                  where_ctx *wc, gs_err *e) {
  char cause[900] = "";
  if (upstream) snprintf(cause, sizeof cause, "%s", upstream);
  send_error(r, "ring", upstream ? cause : mine);
  double end = gs_now() + grace_s(r);
  gs_err ignore = {0};
  while (wait_in(r, end, &ignore) == 1) {
    zmq_msg_t h;
    zmq_msg_init(&h);
    if (zmq_msg_recv(&h, r->pull, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&h);
      continue;
    }
    size_t hlen = zmq_msg_size(&h);
    bool more = zmq_msg_more(&h);
    r->arena_used = 0;
    Gradsync__Envelope *env = hlen > 0 && hlen <= HDR_MAX
                                  ? gradsync__envelope__unpack(&r->alloc, hlen, zmq_msg_data(&h))
                                  : NULL;
    zmq_msg_close(&h);
    while (more) {
      zmq_msg_t x;
      zmq_msg_init(&x);
      more = zmq_msg_recv(&x, r->pull, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&x);
      zmq_msg_close(&x);
    }
    if (env && env->version == GS_PROTO_VERSION && env->job == r->o.job &&
        env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR && env->error &&
        env->error->message) {
      snprintf(cause, sizeof cause, "%s", env->error->message);
      send_error(r, "ring", cause);
    }
  }
  if (cause[0])
    return GS_FAIL(e, GS_EPEER, "rank %d: rank %d (left) stopped in %s: %s", r->o.rank, r->left,
                   wtext(r, wc), cause);
  return GS_FAIL(e, code, "%s", mine);
}


/* Receive one message from the left neighbour. what names it in errors
 * ("chunk", "handshake"). On success *env points into the arena (valid until
 * the next receive) and payload holds the raw frame (initialised in every
 * case; the caller closes it). */
static int recv_env(gs_ring *r, const char *what, where_ctx *wc, Gradsync__Envelope **envp,
                    zmq_msg_t *payload, uint64_t *bytes, gs_err *e) {
  zmq_msg_init(payload);
  *envp = NULL;
  zmq_msg_t h;
  zmq_msg_init(&h);
  double t0 = gs_now();
  /* the grace to learn the cause comes out of the timeout */
  double waited = r->o.timeout_ms / 1000.0 - grace_s(r);
  double deadline = t0 + waited;
  bool spun = !r->spin_now || r->spin_us <= 0;
  for (;;) {
    if (zmq_msg_recv(&h, r->pull, ZMQ_DONTWAIT) >= 0) break;
    if (errno != EAGAIN && errno != EINTR) {
      int err = errno;
      zmq_msg_close(&h);
      return GS_FAIL(e, GS_EIO, "rank %d: receiving from rank %d (left) in %s: %s", r->o.rank,
                     r->left, wtext(r, wc), zmq_strerror(err));
    }
    if (!spun) {
      /* Latency: polling a little, yielding the core to the ZeroMQ thread
       * that brings the message, saves a wake-up of this one. */
      spun = true;
      double until = gs_now() + r->spin_us * 1e-6;
      bool got = false;
      while (!got && gs_now() < until) {
        sched_yield();
        got = zmq_msg_recv(&h, r->pull, ZMQ_DONTWAIT) >= 0;
      }
      if (got) break;
      continue;
    }
    int w = wait_in(r, deadline, e);
    if (w < 0) {
      zmq_msg_close(&h);
      return w;
    }
    if (w == 0) {
      zmq_msg_close(&h);
      char mine[600];
      if (r->left_gone_at > 0) {
        snprintf(mine, sizeof mine, "rank %d: rank %d (left) closed its connection (it exited, "
                 "aborted or was killed) while rank %d waited for a %s in %s", r->o.rank,
                 r->left, r->o.rank, what, wtext(r, wc));
        return settle(r, GS_EPEER, mine, NULL, wc, e);
      }
      snprintf(mine, sizeof mine, "rank %d: no %s from rank %d (left) in %s, for %.1f s (rank "
               "%d died, stalled, or runs something else)", r->o.rank, what, r->left, wtext(r, wc),
               gs_now() - t0, r->left);
      return settle(r, GS_ETIMEOUT, mine, NULL, wc, e);
    }
  }
  size_t hlen = zmq_msg_size(&h);
  bool more = zmq_msg_more(&h);
  r->arena_used = 0;
  Gradsync__Envelope *env = NULL;
  if (hlen > 0 && hlen <= HDR_MAX)
    env = gradsync__envelope__unpack(&r->alloc, hlen, zmq_msg_data(&h));
  zmq_msg_close(&h);
  *bytes += hlen;
  int nframes = 1;
  if (more) {
    nframes++;
    if (zmq_msg_recv(payload, r->pull, ZMQ_DONTWAIT) < 0)
      return GS_FAIL(e, GS_EIO, "rank %d: receiving a payload from rank %d (left) in %s: %s",
                     r->o.rank, r->left, wtext(r, wc), zmq_strerror(errno));
    *bytes += zmq_msg_size(payload);
    more = zmq_msg_more(payload);
    while (more) {
      zmq_msg_t x;
      zmq_msg_init(&x);
      nframes++;
      more = zmq_msg_recv(&x, r->pull, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&x);
      zmq_msg_close(&x);
    }
  }
  if (!env)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a header of %zu bytes that is not a gradsync "
                   "Envelope arrived on the ring socket in %s (expected rank %d, left): a "
                   "foreign or corrupt sender", r->o.rank, hlen, wtext(r, wc), r->left);
  if (env->version != GS_PROTO_VERSION)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a message claiming rank %u speaks protocol version "
                   "%u, this build %u (run the same gradsync build on every rank)", r->o.rank,
                   env->rank, env->version, GS_PROTO_VERSION);
  if (env->job != r->o.job)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a message claiming rank %u carries job token "
                   "%016" PRIx64 ", not this job's (a stray or unauthenticated sender)",
                   r->o.rank, env->rank, (uint64_t)env->job);
  if (env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
    char m[900];
    snprintf(m, sizeof m, "%s", env->error && env->error->message ? env->error->message : "");
    return settle(r, GS_EPEER, NULL, m, wc, e);
  }
  if (env->rank != (uint32_t)r->left)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a %s message from rank %u arrived on the socket of "
                   "rank %d (left) in %s: the endpoints are miswired or a rank runs with "
                   "another world size", r->o.rank, gs_wire_kind(env), env->rank, r->left,
                   wtext(r, wc));
  if (nframes > 2)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a %s message from rank %d (left) with %d frames "
                   "(at most 2) in %s", r->o.rank, gs_wire_kind(env), r->left, nframes, wtext(r, wc));
  *envp = env;
  return GS_OK;
}

/* Receive the chunk w describes; payload holds its bytes. */
static int recv_chunk(gs_ring *r, const want *w, zmq_msg_t *payload, uint64_t *bytes,
                      gs_err *e) {
  where_ctx wc = {.w = w};
  Gradsync__Envelope *env;
  int rc = recv_env(r, "chunk", &wc, &env, payload, bytes, e);
  if (rc < 0) return rc;
  if (env->body_case != GRADSYNC__ENVELOPE__BODY_CHUNK || !env->chunk)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a %s message from rank %d (left) where a chunk was "
                   "expected, in %s", r->o.rank, gs_wire_kind(env), r->left, wtext(r, &wc));
  const Gradsync__Chunk *c = env->chunk;
  gs_dtype dt = gs_wire_dtype(c->dtype);
  if (c->total != r->cur_total)
    return GS_FAIL(e, GS_EMISMATCH, "rank %d: rank %d (left) all-reduces %" PRIu64 " elements "
                   "and rank %d %zu, in %s: every rank must pass the same count", r->o.rank,
                   r->left, (uint64_t)c->total, r->o.rank, r->cur_total, wtext(r, &wc));
  if (c->step != (uint64_t)r->cur_step || c->bucket != (uint32_t)r->cur_bucket ||
      c->phase != (uint32_t)w->phase || c->ring_step != (uint32_t)w->ring_step ||
      c->segment != (uint32_t)w->segment || c->chunk != (uint32_t)w->chunk ||
      c->offset != w->offset || c->count != w->count || dt != r->o.wire ||
      (int)c->dtype != (int)gs_wire_pbdtype(dt))
    return GS_FAIL(e, GS_EPROTO, "rank %d: unexpected chunk from rank %d (left) in %s: got "
                   "step %" PRIu64 " bucket %u %s step %u segment %u chunk %u offset %" PRIu64
                   " count %" PRIu64 " %s, expected step %" PRId64 " bucket %d segment %d "
                   "chunk %d offset %zu count %zu %s (ranks out of step, or configured "
                   "differently)", r->o.rank, r->left, wtext(r, &wc), (uint64_t)c->step, c->bucket,
                   c->phase <= PH_SMALL ? phase_name[c->phase] : "unknown-phase", c->ring_step + 1,
                   c->segment, c->chunk, (uint64_t)c->offset, (uint64_t)c->count,
                   gs_dtype_name(dt), r->cur_step, r->cur_bucket, w->segment, w->chunk,
                   w->offset, w->count, gs_dtype_name(r->o.wire));
  size_t want_bytes = w->count * gs_dtype_size(r->o.wire);
  if (zmq_msg_size(payload) != want_bytes)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a chunk from rank %d (left) in %s holds %zu bytes; "
                   "its header promises %zu (%zu x %s): truncated or corrupt", r->o.rank,
                   r->left, wtext(r, &wc), zmq_msg_size(payload), want_bytes, w->count,
                   gs_dtype_name(r->o.wire));
  return GS_OK;
}

/* ------------------------------------------------------------------ */
/* sending */

static int send_raw(gs_ring *r, const Gradsync__Envelope *env, const void *data, size_t bytes,
                    atomic_uint *flag, zmq_msg_t *fwd, uint64_t *sent, where_ctx *wc,
                    gs_err *e) {
  size_t hlen = gradsync__envelope__get_packed_size(env);
  if (hlen > sizeof r->hbuf)
    return GS_FAIL(e, GS_EINVAL, "rank %d: a header of %zu bytes", r->o.rank, hlen);
  gradsync__envelope__pack(env, r->hbuf);
  /* an empty payload travels as no payload frame */
  if (zmq_send(r->push, r->hbuf, hlen, bytes ? ZMQ_SNDMORE : 0) < 0) goto fail;
  int rc = 0;
  if (bytes == 0) {
  } else if (fwd) {
    rc = zmq_msg_send(fwd, r->push, 0);
  } else if (flag) {
    zmq_msg_t m;
    atomic_store_explicit(flag, 1u, memory_order_relaxed);
    zmq_msg_init_data(&m, (void *)data, bytes, released, flag);
    rc = zmq_msg_send(&m, r->push, 0);
    if (rc < 0) {
      int err = errno;
      zmq_msg_close(&m); /* runs released() */
      errno = err;
    }
  } else {
    rc = zmq_send(r->push, data, bytes, 0);
  }
  if (rc < 0) goto fail;
  *sent += hlen + bytes;
  return GS_OK;
fail:
  if (errno == EAGAIN)
    return GS_FAIL(e, GS_ETIMEOUT, "rank %d: could not queue a %s for rank %d (right) in %s "
                   "within %.1f s", r->o.rank, gs_wire_kind(env), r->right, wtext(r, wc),
                   r->o.timeout_ms / 1000.0);
  return GS_FAIL(e, GS_EIO, "rank %d: sending to rank %d (right) in %s: %s", r->o.rank, r->right,
                 wtext(r, wc), zmq_strerror(errno));
}

static int send_chunk(gs_ring *r, const want *w, const void *data, atomic_uint *flag,
                      zmq_msg_t *fwd, uint64_t *sent, gs_err *e) {
  Gradsync__Envelope env;
  Gradsync__Chunk ch = GRADSYNC__CHUNK__INIT;
  gs_wire_env(&env, r->o.job, (uint32_t)r->o.rank);
  ch.step = (uint64_t)r->cur_step;
  ch.bucket = (uint32_t)r->cur_bucket;
  ch.phase = (uint32_t)w->phase;
  ch.ring_step = (uint32_t)w->ring_step;
  ch.segment = (uint32_t)w->segment;
  ch.chunk = (uint32_t)w->chunk;
  ch.offset = w->offset;
  ch.count = w->count;
  ch.dtype = gs_wire_pbdtype(r->o.wire);
  ch.total = r->cur_total;
  env.body_case = GRADSYNC__ENVELOPE__BODY_CHUNK;
  env.chunk = &ch;
  where_ctx wc = {.w = w};
  return send_raw(r, &env, data, w->count * gs_dtype_size(r->o.wire), flag, fwd, sent, &wc, e);
}

/* Wait until ZeroMQ no longer holds the chunk behind flag. */
static int wait_released(gs_ring *r, atomic_uint *flag, gs_err *e) {
  if (atomic_load_explicit(flag, memory_order_acquire) == 0) return GS_OK;
  double deadline = gs_now() + r->o.timeout_ms / 1000.0;
  long ns = 1000;
  while (atomic_load_explicit(flag, memory_order_acquire) != 0) {
    if (atomic_load(&r->stop) || gs_interrupted)
      return GS_FAIL(e, GS_EINTR, "rank %d: ring interrupted", r->o.rank);
    if (gs_now() > deadline)
      return GS_FAIL(e, GS_ETIMEOUT, "rank %d: rank %d (right) took no data for %.1f s in "
                     "bucket %d, step %" PRId64 " (it died or stalled)", r->o.rank, r->right,
                     r->o.timeout_ms / 1000.0, r->cur_bucket, r->cur_step);
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 1000000) ns *= 2;
  }
  return GS_OK;
}

/* ------------------------------------------------------------------ */
/* prepare, connect, handshake */

static void ring_free(gs_ring *r) {
  if (!r) return;
  if (r->held) {
    for (int i = 0; i < r->o.world; i++) zmq_msg_close(&r->held[i]);
    free(r->held);
  }
  if (r->hold) {
    for (size_t i = 0; i < r->nhold; i++) zmq_msg_close(&r->hold[i]);
    free(r->hold);
  }
  if (r->mon) {
    zmq_socket_monitor(r->pull, NULL, 0);
    zmq_close(r->mon);
  }
  if (r->pull) zmq_close(r->pull);
  if (r->push) zmq_close(r->push);
  if (r->ctx) zmq_ctx_term(r->ctx); /* releases whatever ZeroMQ still held */
  gs_kernels *k = r->o.k;
  if (k) {
    if (r->stage) k->release(k, r->stage);
    if (r->scratch) k->release(k, r->scratch);
  }
  gs_free(r->arena);
  free(r->flags);
  free(r->cfgs);
  free(r);
}

/* ZeroMQ mallocs a buffer for every chunk it receives, and glibc serves
 * blocks of 128 KiB and more with a fresh mmap (or trims the heap after
 * they are freed), so every received chunk would fault its pages in again:
 * about a third of the receive cost on loopback. Keeping them in the heap
 * is process-wide, so it can be turned off (GS_RING_MALLOPT=0). */
static void keep_heap(void) {
  static atomic_flag done = ATOMIC_FLAG_INIT;
  if (atomic_flag_test_and_set(&done)) return;
  const char *s = getenv("GS_RING_MALLOPT");
  if (s && !strcmp(s, "0")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  /* glibc's largest */
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
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
  if (o->wire != GS_F32 && o->wire != GS_F16 && o->wire != GS_BF16)
    return GS_FAIL(e, GS_EINVAL, "rank %d: ring: unknown wire dtype %d", o->rank, (int)o->wire);
  gs_ring *r = calloc(1, sizeof *r);
  if (!r) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", o->rank);
  r->o = *o;
  snprintf(r->host, sizeof r->host, "%s", o->host && *o->host ? o->host : "127.0.0.1");
  r->o.host = r->host;
  if (r->o.timeout_ms <= 0) r->o.timeout_ms = 30000;
  r->left = mod(o->rank - 1, o->world);
  r->right = mod(o->rank + 1, o->world);
  r->chunk_bytes = o->chunk_bytes ? o->chunk_bytes : env_size("GS_RING_CHUNK", DEFAULT_CHUNK);
  r->small_bytes = o->small_bytes ? o->small_bytes : env_size("GS_RING_SMALL", DEFAULT_SMALL);
  r->io_threads = o->io_threads > 0 ? o->io_threads : (int)env_size("GS_RING_IO_THREADS", 1);
  r->sockbuf = o->sockbuf != 0 ? o->sockbuf : (int)env_size("GS_RING_SOCKBUF", DEFAULT_SOCKBUF);
  r->spin_us = o->spin_us > 0 ? o->spin_us : (int)env_size("GS_RING_SPIN_US", DEFAULT_SPIN_US);
  /* With more ranks than cores a polling rank takes the core from the
   * thread that would bring its message (4 ranks on 2 cores: 0.64 -> 0.75
   * GB/s median at 2 MiB without it). */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const char *spin_env = getenv("GS_RING_SPIN_US");
  if (o->spin_us <= 0 && !(spin_env && *spin_env) && cores > 0 && o->local_ranks > cores)
    r->spin_us = 0;
  r->inflight = o->inflight > 0 ? o->inflight : (int)env_size("GS_RING_INFLIGHT", DEFAULT_INFLIGHT);
  size_t ws = gs_dtype_size(o->wire);
  if (r->chunk_bytes < ws) r->chunk_bytes = ws;
  if (r->chunk_bytes > ((size_t)1 << 30)) r->chunk_bytes = (size_t)1 << 30;
  r->alloc.alloc = arena_alloc;
  r->alloc.free = arena_free;
  r->alloc.allocator_data = r;
  int rc = GS_OK;
  gs_kernels *k = o->k;

  r->arena = gs_alloc(ARENA_BYTES, e);
  r->cfgs = calloc((size_t)o->world, sizeof *r->cfgs);
  r->held = calloc((size_t)o->world, sizeof *r->held);
  if (!r->arena || !r->cfgs || !r->held) {
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", o->rank);
    goto out;
  }
  for (int i = 0; i < o->world; i++) zmq_msg_init(&r->held[i]);
  if (o->world == 1) goto out; /* nothing to talk to */
  keep_heap();

  /* flags for every chunk sent zero-copy in one collective of max_count */
  size_t C = chunks_per_segment(r, o->max_count);
  r->nflags = (size_t)o->world * C;
  r->flags = calloc(r->nflags, sizeof *r->flags);
  r->nhold = C;
  r->hold = calloc(C, sizeof *r->hold);
  if (r->hold)
    for (size_t i = 0; i < C; i++) zmq_msg_init(&r->hold[i]);
  size_t small_elems = r->small_bytes == GS_RING_NO_SMALL ? 0 : r->small_bytes / sizeof(float);
  if (small_elems > o->max_count) small_elems = o->max_count;
  r->scratch = k->alloc(k, small_elems * sizeof(float) + 64);
  if (o->wire != GS_F32) r->stage = k->alloc(k, o->max_count * ws + 64);
  if (!r->flags || !r->hold || !r->scratch || (o->wire != GS_F32 && !r->stage)) {
    k->sync(k, e);
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the ring's buffers (%zu elements)",
                 o->rank, o->max_count);
    goto out;
  }

  r->ctx = zmq_ctx_new();
  if (!r->ctx) {
    rc = GS_FAIL(e, GS_EIO, "rank %d: zmq_ctx_new: %s", o->rank, zmq_strerror(errno));
    goto out;
  }
  zmq_ctx_set(r->ctx, ZMQ_IO_THREADS, r->io_threads);
  r->pull = zmq_socket(r->ctx, ZMQ_PULL);
  if (!r->pull) {
    rc = GS_FAIL(e, GS_EIO, "rank %d: zmq_socket: %s", o->rank, zmq_strerror(errno));
    goto out;
  }
  int zero = 0;
  zmq_setsockopt(r->pull, ZMQ_RCVHWM, &zero, sizeof zero);
  zmq_setsockopt(r->pull, ZMQ_LINGER, &zero, sizeof zero);
  if (r->sockbuf > 0) {
    zmq_setsockopt(r->pull, ZMQ_RCVBUF, &r->sockbuf, sizeof r->sockbuf);
    zmq_setsockopt(r->pull, ZMQ_SNDBUF, &r->sockbuf, sizeof r->sockbuf);
  }
  rc = gs_wire_bind_any(r->pull, r->host, r->endpoint, sizeof r->endpoint, e);
  if (rc < 0) {
    gs_err_prefix(e, "rank %d: ring: ", o->rank);
    goto out;
  }
  /* Learn at once when the left neighbour's connection drops. */
  char monaddr[64];
  snprintf(monaddr, sizeof monaddr, "inproc://gs-ring-mon-%p", (void *)r);
  if (zmq_socket_monitor(r->pull, monaddr,
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) == 0) {
    r->mon = zmq_socket(r->ctx, ZMQ_PAIR);
    if (r->mon && zmq_connect(r->mon, monaddr) < 0) {
      zmq_close(r->mon);
      r->mon = NULL;
    }
  }
  if (endpoint) snprintf(endpoint, GS_ENDPOINT_MAX, "%s", r->endpoint);
out:
  if (rc < 0) {
    ring_free(r);
    return rc;
  }
  *out = r;
  return GS_OK;
}

static void my_cfg(const gs_ring *r, hello_cfg *c) {
  c->have = true;
  c->world = (uint32_t)r->o.world;
  c->count = r->o.max_count;
  c->dtype = (uint32_t)r->o.wire;
  c->chunk_bytes = r->chunk_bytes;
  c->small_bytes = r->small_bytes;
  c->nbuckets = r->o.nbuckets;
  c->plan_hash = r->o.plan_hash;
  c->sum_only = r->o.sum_only;
}

/* Field f of a configuration, as a number. */
static uint64_t cfg_field(const hello_cfg *c, int f) {
  switch (f) {
  case 0: return c->world;
  case 1: return c->count;
  case 2: return c->dtype;
  case 3: return c->nbuckets;
  case 4: return c->plan_hash;
  case 5: return c->chunk_bytes;
  case 6: return c->small_bytes;
  default: return c->sum_only;
  }
}

/* Compare every rank's configuration; the message lists each rank's value
 * of the first field that differs (every rank builds the same text). */
static int compare_cfgs(gs_ring *r, gs_err *e) {
  static const char *what[] = {"the world size", "the buffer length (elements)", "the wire dtype",
                               "the number of buckets", "the bucket plan (offsets and sizes)",
                               "the chunk size", "the small-message threshold",
                               "the collective-benchmark mode"};
  static const char *hint[] = {" (launch every rank with the same --world)",
                               " (every rank must build the same model)",
                               " (use the same --precision everywhere)",
                               " (use the same bucket sizes everywhere)",
                               " (use the same bucket sizes everywhere)",
                               " (GS_RING_CHUNK must be the same on every rank)",
                               " (GS_RING_SMALL must be the same on every rank)", ""};
  int N = r->o.world;
  const hello_cfg *c = r->cfgs;
  for (int f = 0; f < 8; f++) {
    bool differs = false;
    for (int i = 1; i < N; i++) differs |= cfg_field(&c[i], f) != cfg_field(&c[0], f);
    if (!differs) continue;
    char list[700] = "";
    size_t len = 0;
    for (int i = 0; i < N && len < sizeof list - 48; i++) {
      char v[64];
      uint64_t x = cfg_field(&c[i], f);
      if (f == 2) snprintf(v, sizeof v, "%s", gs_dtype_name((gs_dtype)x));
      else if (f == 4) snprintf(v, sizeof v, "%016" PRIx64, x);
      else if (f == 7) snprintf(v, sizeof v, "%s", x ? "sum-only" : "training");
      else snprintf(v, sizeof v, "%" PRIu64, x);
      len += (size_t)snprintf(list + len, sizeof list - len, "%s rank %d: %s", i ? "," : "", i, v);
    }
    return GS_FAIL(e, GS_EMISMATCH, "rank %d: ranks disagree on %s:%s%s", r->o.rank, what[f],
                   list, hint[f]);
  }
  return GS_OK;
}

void gs_ring_set_job(gs_ring *r, uint64_t job) {
  if (r && !r->connected) r->o.job = job;
}

int gs_ring_connect(gs_ring *r, const char *const *endpoints, gs_err *e) {
  if (!r) return GS_FAIL(e, GS_EINVAL, "ring: connect on no ring");
  if (r->broken) return GS_FAIL(e, GS_EPEER, "rank %d: the ring failed earlier", r->o.rank);
  if (r->connected) return GS_OK;
  int N = r->o.world;
  r->connected = true;
  if (N == 1) return GS_OK;
  const char *ep = endpoints ? endpoints[r->right] : NULL;
  if (!ep || !*ep)
    return fail(r, e, GS_FAIL(e, GS_EINVAL, "rank %d: no endpoint for rank %d (right); the "
                              "launcher must pass every rank's prepare() endpoint", r->o.rank,
                              r->right));
  r->push = zmq_socket(r->ctx, ZMQ_PUSH);
  if (!r->push)
    return fail(r, e, GS_FAIL(e, GS_EIO, "rank %d: zmq_socket: %s", r->o.rank,
                              zmq_strerror(errno)));
  /* an orderly close flushes what the right neighbour still needs */
  int zero = 0, linger = r->o.timeout_ms;
  zmq_setsockopt(r->push, ZMQ_SNDHWM, &zero, sizeof zero);
  zmq_setsockopt(r->push, ZMQ_LINGER, &linger, sizeof linger);
  if (r->sockbuf > 0) {
    zmq_setsockopt(r->push, ZMQ_SNDBUF, &r->sockbuf, sizeof r->sockbuf);
    zmq_setsockopt(r->push, ZMQ_RCVBUF, &r->sockbuf, sizeof r->sockbuf);
  }
  zmq_setsockopt(r->push, ZMQ_SNDTIMEO, &r->o.timeout_ms, sizeof r->o.timeout_ms);
  if (zmq_connect(r->push, ep) < 0)
    return fail(r, e, GS_FAIL(e, GS_EINVAL, "rank %d: cannot connect to rank %d (right) at "
                              "'%s': %s", r->o.rank, r->right, ep, zmq_strerror(errno)));

  /* Handshake: N-1 rounds; in round i rank r forwards the configuration of
   * rank r-i and receives that of rank r-1-i. */
  memset(r->cfgs, 0, (size_t)N * sizeof *r->cfgs);
  my_cfg(r, &r->cfgs[r->o.rank]);
  uint64_t bytes = 0;
  for (int i = 0; i < N - 1; i++) {
    int origin = mod(r->o.rank - i, N), from = mod(r->o.rank - 1 - i, N);
    const hello_cfg *c = &r->cfgs[origin];
    Gradsync__Envelope env;
    Gradsync__RingHello h = GRADSYNC__RING_HELLO__INIT;
    gs_wire_env(&env, r->o.job, (uint32_t)r->o.rank);
    h.origin = (uint32_t)origin;
    h.round = (uint32_t)i;
    h.world = c->world;
    h.count = c->count;
    h.dtype = gs_wire_pbdtype((gs_dtype)c->dtype);
    h.chunk_bytes = c->chunk_bytes;
    h.small_bytes = c->small_bytes;
    h.nbuckets = c->nbuckets;
    h.plan_hash = c->plan_hash;
    h.sum_only = c->sum_only;
    env.body_case = GRADSYNC__ENVELOPE__BODY_RING_HELLO;
    env.ring_hello = &h;
    char ctxmsg[96];
    snprintf(ctxmsg, sizeof ctxmsg, "the handshake (round %d/%d)", i + 1, N - 1);
    where_ctx wc = {.text = ctxmsg};
    int rc = send_raw(r, &env, NULL, 0, NULL, NULL, &bytes, &wc, e);
    if (rc < 0) return fail(r, e, rc);
    Gradsync__Envelope *got;
    zmq_msg_t payload;
    rc = recv_env(r, "handshake", &wc, &got, &payload, &bytes, e);
    bool has_payload = zmq_msg_size(&payload) > 0;
    zmq_msg_close(&payload);
    if (rc < 0) return fail(r, e, rc);
    const Gradsync__RingHello *g = got->ring_hello;
    if (got->body_case != GRADSYNC__ENVELOPE__BODY_RING_HELLO || !g || has_payload)
      return fail(r, e, GS_FAIL(e, GS_EPROTO, "rank %d: a %s message from rank %d (left) "
                                "during %s, where a ring hello was expected", r->o.rank,
                                gs_wire_kind(got), r->left, ctxmsg));
    if (g->round != (uint32_t)i || g->origin != (uint32_t)from)
      return fail(r, e, GS_FAIL(e, GS_EMISMATCH, "rank %d: rank %d (left) sent the "
                                "configuration of rank %u in round %u; expected rank %d's in "
                                "round %d (do the ranks agree on the world size? world here: "
                                "%d)", r->o.rank, r->left, g->origin, g->round + 1, from, i + 1,
                                N));
    hello_cfg *d = &r->cfgs[from];
    d->have = true;
    d->world = g->world;
    d->count = g->count;
    d->dtype = (uint32_t)gs_wire_dtype(g->dtype);
    d->chunk_bytes = g->chunk_bytes;
    d->small_bytes = g->small_bytes;
    d->nbuckets = g->nbuckets;
    d->plan_hash = g->plan_hash;
    d->sum_only = g->sum_only;
  }
  int rc = compare_cfgs(r, e);
  /* Every rank found the same mismatch: nobody needs to be told. */
  if (rc < 0) {
    r->broken = true;
    r->told_right = true;
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* the collective */

static void span(gs_ring *r, const char *name, double t0, double t1) {
  if (r->o.span) r->o.span(r->o.span_ctx, name, r->cur_bucket, t0, t1, 1);
}

static int small_path(gs_ring *r, const float *src, float *dst, size_t n, gs_ring_stats *st,
                      gs_err *e) {
  gs_kernels *k = r->o.k;
  const int N = r->o.world, me = r->o.rank;
  const gs_dtype w = r->o.wire;
  const bool lp = w != GS_F32;
  const double t0 = gs_now();
  double red = 0;
  const void *own = src;
  if (lp) {
    double a = gs_now();
    k->convert(k, w, r->stage, GS_F32, src, n);
    red += gs_now() - a;
    own = r->stage;
  }
  want wt = {.phase = PH_SMALL, .ring_step = 0, .segment = me, .chunk = 0, .offset = 0,
             .count = n};
  int rc = send_chunk(r, &wt, own, NULL, NULL, &st->bytes_sent, e);
  if (rc < 0) return rc;
  for (int s = 0; s < N - 1; s++) {
    int origin = mod(me - 1 - s, N);
    want wr = {.phase = PH_SMALL, .ring_step = s, .segment = origin, .chunk = 0, .offset = 0,
               .count = n};
    zmq_msg_close(&r->held[origin]);
    rc = recv_chunk(r, &wr, &r->held[origin], &st->bytes_recv, e);
    if (rc < 0) return rc;
    if (s < N - 2) {
      zmq_msg_t fwd;
      zmq_msg_init(&fwd);
      zmq_msg_copy(&fwd, &r->held[origin]);
      wr.ring_step = s + 1;
      rc = send_chunk(r, &wr, NULL, NULL, &fwd, &st->bytes_sent, e);
      zmq_msg_close(&fwd);
      if (rc < 0) return rc;
    }
  }
  /* Sum in rank order on every rank: the same bits everywhere. */
  double a = gs_now();
  if (!lp) {
    if (src == dst && me != 0) {
      k->copy(k, r->scratch, dst, n * sizeof(float));
      own = r->scratch;
    }
    for (int i = 0; i < N; i++) {
      const void *v = i == me ? own : zmq_msg_data(&r->held[i]);
      if (i == 0) {
        if (v != dst) k->copy(k, dst, v, n * sizeof(float));
      } else {
        k->add(k, n, dst, v);
      }
    }
  } else {
    for (int i = 0; i < N; i++) {
      const void *v = i == me ? own : zmq_msg_data(&r->held[i]);
      if (i == 0) k->convert(k, GS_F32, dst, w, v, n);
      else k->add_lp(k, w, n, dst, v);
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
} ring_geom;

static void geom(const ring_geom *g, size_t k, bool send, want *w) {
  w->phase = k < g->per ? PH_RS : PH_AG;
  w->ring_step = (int)((k % g->per) / g->C);
  w->chunk = (int)(k % g->C);
  int s = w->ring_step;
  w->segment = w->phase == PH_RS ? mod(g->me - s - !send, g->N) : mod(g->me + send - s, g->N);
  size_t so, sl, co, cl;
  seg_range(g->n, g->N, w->segment, &so, &sl);
  chunk_range(sl, g->C, (size_t)w->chunk, &co, &cl);
  w->offset = so + co;
  w->count = cl;
}

static int ring_path(gs_ring *r, const float *src, float *dst, size_t n, gs_ring_stats *st,
                     gs_err *e) {
  gs_kernels *k = r->o.k;
  const int N = r->o.world, me = r->o.rank;
  const gs_dtype w = r->o.wire;
  const size_t ws = gs_dtype_size(w);
  const bool lp = w != GS_F32;
  const size_t C = chunks_per_segment(r, n);
  const size_t per = (size_t)(N - 1) * C; /* messages per phase */
  const size_t M = 2 * per;
  const size_t W = r->inflight > 0 && (size_t)r->inflight < C ? (size_t)r->inflight : C;
  const ring_geom g = {N, me, n, C, per};
  uint8_t *stage = r->stage;
  const double t0 = gs_now();
  double t_rs = t0, red = 0;
  int rc = GS_OK;

  /* Message k leaves once message k - W has been received and handled,
   * so W chunks are in flight on every link; k >= C also needs message
   * k - C (the same chunk one ring step earlier), which W <= C ensures. */
  for (size_t kk = 0; kk < M + W; kk++) {
    if (kk >= W) { /* receive and handle message kk - W */
      size_t kr = kk - W;
      want wr;
      geom(&g, kr, false, &wr);
      zmq_msg_t msg;
      rc = recv_chunk(r, &wr, &msg, &st->bytes_recv, e);
      if (rc < 0) {
        zmq_msg_close(&msg);
        return rc;
      }
      float *d = dst + wr.offset;
      if (wr.phase == PH_RS) {
        double a = gs_now();
        const void *p = zmq_msg_data(&msg);
        if (src != dst) k->copy(k, d, src + wr.offset, wr.count * sizeof(float));
        k->add_lp(k, w, wr.count, d, p);
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
        /* reduce-scatter step s sent this very region; ZeroMQ must be done */
        if (!lp) {
          rc = wait_released(r, &r->flags[(size_t)wr.ring_step * C + (size_t)wr.chunk], e);
          if (rc < 0) {
            zmq_msg_close(&msg);
            return rc;
          }
        }
        k->convert(k, GS_F32, d, w, zmq_msg_data(&msg), wr.count);
        if (wr.ring_step < N - 2) zmq_msg_move(&r->hold[wr.chunk], &msg); /* to forward */
        zmq_msg_close(&msg);
      }
    }
    if (kk < M) { /* send message kk */
      want wn;
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
          k->convert(k, w, stage + wn.offset * ws, GS_F32, src + wn.offset, wn.count);
          red += gs_now() - a;
        }
        data = lp ? (const void *)(stage + wn.offset * ws)
                  : (const void *)((kk < C ? src : dst) + wn.offset);
      }
      rc = send_chunk(r, &wn, fwd ? NULL : data, flag, fwd, &st->bytes_sent, e);
      if (rc < 0) return rc;
    }
  }
  /* Hand the buffers back only when ZeroMQ holds none of them. */
  for (size_t i = 0; i < per + C; i++) {
    rc = wait_released(r, &r->flags[i], e);
    if (rc < 0) return rc;
  }
  st->reduce_s += red;
  double t1 = gs_now();
  span(r, "reduce-scatter", t0, t_rs);
  span(r, "all-gather", t_rs, t1);
  return GS_OK;
}

int gs_ring_allreduce(gs_ring *r, const float *src, float *dst, size_t count, int64_t step,
                      int bucket, gs_ring_stats *st, gs_err *e) {
  gs_ring_stats local = {0};
  if (!st) st = &local;
  if (!r) return GS_FAIL(e, GS_EINVAL, "ring: all-reduce on no ring");
  if (r->broken)
    return GS_FAIL(e, GS_EPEER, "rank %d: the ring failed earlier; close it", r->o.rank);
  if (!r->connected)
    return GS_FAIL(e, GS_EINVAL, "rank %d: gs_ring_allreduce before gs_ring_connect", r->o.rank);
  if (count > r->o.max_count)
    return GS_FAIL(e, GS_EINVAL, "rank %d: all-reduce of %zu elements on a ring prepared for "
                   "at most %zu", r->o.rank, count, r->o.max_count);
  if (count > 0 && (!src || !dst))
    return GS_FAIL(e, GS_EINVAL, "rank %d: all-reduce with a NULL buffer", r->o.rank);
  gs_kernels *k = r->o.k;
  if (r->o.world == 1) {
    if (src != dst && count) k->copy(k, dst, src, count * sizeof(float));
    return k->sync(k, e);
  }
  r->cur_step = step;
  r->cur_bucket = bucket;
  r->cur_total = count;
  r->spin_now = count * sizeof(float) <= SPIN_MAX_BYTES;
  /* by float32 size, so fp16 and fp32 pick the same algorithm (and half
   * the bytes) */
  bool small = r->small_bytes != GS_RING_NO_SMALL && count * sizeof(float) <= r->small_bytes;
  int rc = small ? small_path(r, src, dst, count, st, e) : ring_path(r, src, dst, count, st, e);
  if (rc == GS_OK) rc = k->sync(k, e);
  if (rc < 0) return fail(r, e, rc);
  return GS_OK;
}

void gs_ring_interrupt(gs_ring *r) {
  if (r) atomic_store(&r->stop, 1);
}

size_t gs_ring_chunk_bytes(const gs_ring *r) { return r ? r->chunk_bytes : 0; }
size_t gs_ring_small_bytes(const gs_ring *r) { return r ? r->small_bytes : 0; }

void gs_ring_close(gs_ring *r, bool ok, const char *why) {
  if (!r) return;
  if (!ok) {
    if (r->push && !r->told_right) {
      char msg[512];
      snprintf(msg, sizeof msg, "rank %d aborted%s%s", r->o.rank, why ? ": " : "",
               why ? why : "");
      tell_right(r, "abort", msg);
    }
    /* a moment for the error to leave, then drop everything */
    int linger = 100;
    if (r->push) zmq_setsockopt(r->push, ZMQ_LINGER, &linger, sizeof linger);
  }
  ring_free(r);
}
