/* server.c: the ps server loop (DataParallel's master reducer).
 *
 * One ROUTER socket, one thread. The loop receives a message at a time and
 * walks through three phases:
 *
 *   hello   Init from rank 0 (sizes, buckets, SGD, wire dtype, loss scale,
 *           initial parameters) and Hello from every other rank (sizes);
 *           once all `world` ranks are in and agree: Welcome + parameters.
 *   steps   rounds of pushes. A round starts with the first push of a step
 *           and ends when every bucket's parameters went out.
 *   goodbye Shutdown from every rank ends the loop.
 *
 * Rank order without copies. Push (r, b) is added to bucket b's fp32 sum as
 * soon as ranks 0..r-1 of bucket b are in (next[b] == r), straight out of
 * the ZeroMQ message: ZeroMQ already received it into its own buffer, so
 * copying it into a per-rank buffer first would only cost bandwidth. A push
 * that arrives early waits in its slot (its zmq_msg_t, no copy) until its
 * turn. The additions thus always happen in rank order: the same bits
 * whatever the arrival order, and little work left for the moment the last
 * push arrives. The first push of a bucket is adopted as the sum where it
 * can be (fp32 on the CPU): the other ranks are added into ZeroMQ's buffer
 * in place, so the master needs no accumulator and copies nothing.
 *
 *   bucket b:  next[b] = 2, sum = rank 0's buffer + r1    waiting: rank 3
 *   rank 2 arrives ->  sum += r2;  sum += r3;  next[b] = 4 = world
 *
 * Outgoing parameters are sent zero-copy from the master copy (the host
 * mirror on a device); a per-bucket counter of messages ZeroMQ still holds
 * (decremented by the release callback, on the I/O thread) is waited for
 * before that memory is written again.
 *
 * Deadlines: while some rank has pushed a step and others have not, the
 * round must finish within timeout_ms of its first push; the error names
 * every missing rank with its first missing bucket and its last complete
 * step. Idle time between steps has no deadline (the server's life is tied
 * to rank 0's); the hello and goodbye phases run from the first contact. */
#include "ps/server.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto/wire.h"

#define MAX_PENDING 4096   /* hellos kept before Init arrives */
#define WARN_MAX 20        /* dropped-message warnings printed before going quiet */
#define MAX_WORLD 65536
#define SLICE_MS 200       /* longest wait between looks at the stop flag */

typedef struct peer {
  uint8_t id[256];
  size_t idlen;
  bool known, bye, inproc;
  int pushed;            /* buckets pushed in the current round */
  int64_t last_step;     /* last step this rank completed (-1: none) */
} peer;

typedef struct hello {
  uint8_t id[256];
  size_t idlen;
  uint32_t rank;
  uint64_t count;
  uint32_t nbuckets;
} hello;

struct gs_ps_server {
  gs_ps_server_opts o;
  gs_kernels *k;
  void *sock;
  bool cpu;
  char tcp_ep[GS_ENDPOINT_MAX];
  int timeout_ms;
  bool failed;

  /* from Init */
  bool have_init, running;
  int world, nb;
  size_t n, maxcnt, wsize;
  size_t *off, *cnt;
  gs_sgd sgd;
  gs_dtype wire;
  gs_scaler scaler;
  bool sum_only, scaling;

  peer *peers;
  hello *pend;
  int npend, nknown;
  double contact_t0;

  float *master, *acc, *mom;  /* device; acc only where pushes cannot be adopted */
  float **sum;                /* [nb] bucket b's sum: acc + off, or an adopted push */
  zmq_msg_t *summsg;          /* [nb] adopted first pushes */
  uint8_t *has_sum;
  bool pair_start;            /* sums start from ranks 1 + 0 (see drain_bucket) */
  float *hout;                /* host mirror of what goes out (devices only) */
  void *wout;                 /* parameters in the wire dtype, as they go out
                                 (fp16 / bf16 training only) */
  void *wchk;                 /* one bucket's sum in the wire dtype, to see
                                 whether the reduced gradient overflows it */
  void *stage;                /* one push on the device (devices only) */

  /* the current round */
  bool in_round, stepped, mom_started;
  uint64_t step, last_step;
  double round_t0;
  int round_rank;             /* whose push started the round */
  int *next;                  /* [nb] next rank to add */
  uint8_t *got;               /* [world * nb] */
  zmq_msg_t *held;            /* [world * nb] pushes waiting for their turn */
  uint8_t *has_held;
  int complete;
  atomic_int *inflight;       /* [nb] outgoing messages ZeroMQ still holds */
  atomic_int inflight_welcome;
  double reduce_s, update_s;  /* this step's, for the last Params */
  uint64_t sent, recv;        /* this step's wire bytes (inproc excluded) */

  int nbye;
  double bye_t0;

  atomic_int stop;            /* gs_ps_server_stop */
  _Atomic uint64_t dev_bytes, host_bytes, held_bytes, held_peak;
  unsigned long warnings;
};

/* ---------------------------------------------------------------- helpers */

static void span(gs_ps_server *s, const char *name, int bucket, double t0) {
  if (s->o.span) s->o.span(s->o.span_ctx, name, bucket, t0, gs_now(), 1);
}

static void release_count(void *data, void *hint) {
  (void)data;
  atomic_fetch_sub((atomic_int *)hint, 1);
}

static void warn(gs_ps_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(gs_ps_server *s, const char *fmt, ...) {
  if (++s->warnings > WARN_MAX) return;
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "gradsync ps server: warning: %s%s\n", msg,
          s->warnings == WARN_MAX ? " (further warnings suppressed)" : "");
}

/* Tell one worker why the job stops (best effort, 100 ms). */
static void send_error(gs_ps_server *s, const peer *p, const gs_err *e) {
  Gradsync__Envelope env;
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  gs_wire_env(&env, s->o.job, GS_SERVER_RANK);
  er.phase = (char *)"ps server";
  er.message = (char *)e->msg;
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &er;
  gs_err ignore = {0};
  gs_wire_send(s->sock, p->id, p->idlen, &env, NULL, 0, NULL, NULL, 100, NULL, &ignore);
}

/* Tell every registered worker why the job stops (once, best effort: a
 * dead peer is unreachable and that is fine). */
static void broadcast_error(gs_ps_server *s, const gs_err *e) {
  if (s->failed) return;
  s->failed = true;
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].known) send_error(s, &s->peers[r], e);
}

/* Fail the job: fill e, tell the workers, return the code. */
#define FAIL(s, e, code, ...) \
  (GS_FAIL((e), (code), __VA_ARGS__), broadcast_error((s), (e)), (code))

static int find_peer(const gs_ps_server *s, const zmq_msg_t *id) {
  size_t len = zmq_msg_size((zmq_msg_t *)id);
  const void *d = zmq_msg_data((zmq_msg_t *)id);
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].known && s->peers[r].idlen == len && memcmp(s->peers[r].id, d, len) == 0)
      return r;
  return -1;
}

static void set_id(uint8_t *dst, size_t *dlen, const zmq_msg_t *id) {
  size_t len = zmq_msg_size((zmq_msg_t *)id);
  if (len > 256) len = 256;
  memcpy(dst, zmq_msg_data((zmq_msg_t *)id), len);
  *dlen = len;
}

/* Wait until ZeroMQ released every message that still points at bucket b
 * (and at the Welcome's parameters). Normally already the case: a worker
 * pushes step s+1 only after it received step s. */
static int wait_inflight(gs_ps_server *s, int b, gs_err *e) {
  double t0 = gs_now();
  struct timespec ts = {0, 50000};
  while (atomic_load(&s->inflight[b]) > 0 || atomic_load(&s->inflight_welcome) > 0) {
    if (gs_now() - t0 > s->timeout_ms / 1000.0)
      return FAIL(s, e, GS_ETIMEOUT, "ps server: ZeroMQ still holds bucket %d's outgoing "
                  "parameters after %.1f s (a worker is not reading)", b, s->timeout_ms / 1000.0);
    nanosleep(&ts, NULL);
  }
  return GS_OK;
}

static int kernel_check(gs_ps_server *s, const char *what, gs_err *e) {
  gs_err ke = {0};
  if (s->k->sync(s->k, &ke) < 0)
    return FAIL(s, e, ke.code, "ps server (%s kernels), %s: %s", s->k->name, what, ke.msg);
  return GS_OK;
}

/* -------------------------------------------------------------- sending */

/* Header size of a Params message, which depends on the byte counts it
 * reports: iterate until the reported bytes include the header itself. */
static uint64_t final_sent(gs_ps_server *s, Gradsync__Envelope *env, Gradsync__Params *p,
                           size_t payload) {
  int remote = 0;
  for (int r = 0; r < s->world; r++) remote += !s->peers[r].inproc;
  uint64_t total = s->sent;
  for (int i = 0; i < 4; i++) {
    p->bytes_sent = total;
    total = s->sent + (uint64_t)remote * (gradsync__envelope__get_packed_size(env) + payload);
  }
  return total;
}

/* The parameters (or sums) of bucket b to every rank; last: this message
 * completes the step, so it carries the server's cost of the step. */
static int send_bucket(gs_ps_server *s, int b, bool skipped, bool last, gs_err *e) {
  size_t c = s->cnt[b], o = s->off[b];
  const float *src = s->sum_only ? s->sum[b] : s->master + o;
  /* mixed precision: parameters travel in the wire dtype like the
   * gradients (half the bytes both ways); the fp32 master stays here, with
   * the optimizer, and workers compute with the low-precision copy anyway */
  gs_dtype out = s->sum_only ? GS_F32 : s->wire;
  size_t esz = gs_dtype_size(out);
  const void *data = NULL;
  size_t len = 0;
  if (!skipped) {
    len = c * esz;
    if (out != GS_F32) {
      GS_TRY(wait_inflight(s, b, e));
      double t0 = gs_now();
      char *w = (char *)s->wout + o * esz;
      s->k->convert(s->k, out, w, GS_F32, src, c);
      if (!s->cpu) s->k->to_host(s->k, (char *)s->hout + o * esz, w, len);
      GS_TRY(kernel_check(s, "converting parameters to the wire dtype", e));
      s->update_s += gs_now() - t0;
      data = s->cpu ? (const void *)w : (const void *)((char *)s->hout + o * esz);
    } else if (s->cpu) {
      data = src;
    } else {
      GS_TRY(wait_inflight(s, b, e));
      double t0 = gs_now();
      s->k->to_host(s->k, s->hout + o, src, len);
      GS_TRY(kernel_check(s, "copying parameters to the host", e));
      s->update_s += gs_now() - t0;
      data = s->hout + o;
    }
  }
  Gradsync__Envelope env;
  Gradsync__Params p = GRADSYNC__PARAMS__INIT;
  gs_wire_env(&env, s->o.job, GS_SERVER_RANK);
  p.step = s->step;
  p.bucket = (uint32_t)b;
  p.offset = o;
  p.count = c;
  p.skipped = skipped;
  p.scale = s->scaler.scale;
  p.dtype = gs_wire_pbdtype(out);
  env.body_case = GRADSYNC__ENVELOPE__BODY_PARAMS;
  env.params = &p;
  if (last) {
    p.reduce_s = s->reduce_s;
    p.update_s = s->update_s;
    p.bytes_recv = s->recv;
    p.bytes_sent = final_sent(s, &env, &p, len);
  }
  for (int r = 0; r < s->world; r++) {
    peer *pr = &s->peers[r];
    gs_err se = {0};
    if (data) atomic_fetch_add(&s->inflight[b], 1);
    int rc = gs_wire_send(s->sock, pr->id, pr->idlen, &env, data, len,
                          data ? release_count : NULL, &s->inflight[b], s->timeout_ms,
                          pr->inproc ? NULL : &s->sent, &se);
    if (rc < 0)
      return FAIL(s, e, rc, "ps server: sending step %llu bucket %d to rank %d: %s",
                  (unsigned long long)s->step, b, r, se.msg);
  }
  return GS_OK;
}

static int send_welcome(gs_ps_server *s, gs_err *e) {
  const float *data = s->master;
  if (!s->cpu) {
    s->k->to_host(s->k, s->hout, s->master, s->n * sizeof(float));
    GS_TRY(kernel_check(s, "copying the initial parameters to the host", e));
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
                          s->n * sizeof(float), release_count, &s->inflight_welcome,
                          s->timeout_ms, NULL, &se);
    if (rc < 0)
      return FAIL(s, e, rc, "ps server: welcoming rank %d: %s", r, se.msg);
  }
  s->running = true;
  s->sent = s->recv = 0;
  return GS_OK;
}

/* ------------------------------------------------------------ reduction */

static void *dev_alloc(gs_ps_server *s, size_t bytes) {
  void *p = s->k->alloc(s->k, bytes);
  if (p) atomic_fetch_add(&s->dev_bytes, bytes);
  return p;
}

#define ADOPT_MIN (64u << 10)   /* smaller pushes are cheap to copy */

/* The accumulator exists only once a push cannot be adopted (see below). */
static int need_acc(gs_ps_server *s, gs_err *e) {
  if (s->acc) return GS_OK;
  if (!(s->acc = dev_alloc(s, s->n * sizeof(float))))
    return FAIL(s, e, GS_ENOMEM, "ps server: cannot allocate the %zu-parameter accumulator on %s",
                s->n, s->k->name);
  return GS_OK;
}

/* Bucket b's sum of the previous step is no longer needed (nothing ZeroMQ
 * still sends points at it): drop an adopted message. */
static int release_sum(gs_ps_server *s, int b, gs_err *e) {
  GS_TRY(wait_inflight(s, b, e));
  if (s->has_sum[b]) {
    atomic_fetch_sub(&s->held_bytes, zmq_msg_size(&s->summsg[b]));
    zmq_msg_close(&s->summsg[b]);
    s->has_sum[b] = 0;
  }
  return GS_OK;
}

/* Whether a push can become the sum itself: ZeroMQ received it into a
 * buffer of its own (not rank 0's gradient buffer handed over inproc, not
 * a slice of ZeroMQ's shared buffer for small messages), fp32, on the CPU. */
static bool adoptable(const gs_ps_server *s, int r, zmq_msg_t *msg) {
  return s->cpu && s->wire == GS_F32 && !s->peers[r].inproc && zmq_msg_size(msg) >= ADOPT_MIN &&
         (uintptr_t)zmq_msg_data(msg) % sizeof(float) == 0;
}

/* The push's bytes where the kernels can read them: as received on the
 * CPU (the kernels take any byte address), staged on a device. */
static const void *readable(gs_ps_server *s, zmq_msg_t *msg) {
  if (s->cpu) return zmq_msg_data(msg);
  s->k->to_device(s->k, s->stage, zmq_msg_data(msg), zmq_msg_size(msg));
  return s->stage;
}

/* sum[b] += push (fp32 accumulation of any wire dtype). */
static int add_push(gs_ps_server *s, int b, zmq_msg_t *msg, gs_err *e) {
  const void *src = readable(s, msg);
  if (s->wire == GS_F32) s->k->add(s->k, s->cnt[b], s->sum[b], src);
  else s->k->add_lp(s->k, s->wire, s->cnt[b], s->sum[b], src);
  return kernel_check(s, "adding a push", e);
}

/* Start bucket b's sum from rank `base`'s push, then add `other`'s (or
 * nothing). The first push is adopted when it can be: the others are
 * added into ZeroMQ's buffer in place (no copy, no accumulator) and in
 * sum_only mode the sums go out from it. Otherwise acc = the push. */
static int start_sum(gs_ps_server *s, int b, int base, zmq_msg_t *bmsg, zmq_msg_t *omsg,
                     gs_err *e) {
  GS_TRY(release_sum(s, b, e));
  if (adoptable(s, base, bmsg)) {
    zmq_msg_init(&s->summsg[b]);
    zmq_msg_move(&s->summsg[b], bmsg);
    s->has_sum[b] = 1;
    s->sum[b] = zmq_msg_data(&s->summsg[b]);
    atomic_fetch_add(&s->held_bytes, zmq_msg_size(&s->summsg[b]));
  } else {
    GS_TRY(need_acc(s, e));
    s->sum[b] = s->acc + s->off[b];
    const void *src = readable(s, bmsg);
    if (s->wire == GS_F32) s->k->copy(s->k, s->sum[b], src, s->cnt[b] * sizeof(float));
    else s->k->convert(s->k, GS_F32, s->sum[b], s->wire, src, s->cnt[b]);
    GS_TRY(kernel_check(s, "starting a sum", e));
  }
  return omsg ? add_push(s, b, omsg, e) : GS_OK;
}

static int update_bucket(gs_ps_server *s, int b, gs_err *e) {
  GS_TRY(wait_inflight(s, b, e));
  double t0 = gs_now();
  size_t o = s->off[b];
  s->k->sgd(s->k, s->cnt[b], s->master + o, s->sum[b], s->mom ? s->mom + o : NULL, s->sgd,
            !s->mom_started);
  GS_TRY(kernel_check(s, "SGD", e));
  GS_TRY(release_sum(s, b, e));
  s->update_s += gs_now() - t0;
  span(s, "optimizer", b, t0);
  return GS_OK;
}

static void end_round(gs_ps_server *s) {
  for (int r = 0; r < s->world; r++) {
    s->peers[r].last_step = (int64_t)s->step;
    s->peers[r].pushed = 0;
  }
  memset(s->got, 0, (size_t)s->world * s->nb);
  for (int b = 0; b < s->nb; b++) s->next[b] = 0;
  s->complete = 0;
  s->in_round = false;
  s->stepped = true;
  s->last_step = s->step;
  s->reduce_s = s->update_s = 0;
  s->sent = s->recv = 0;
}

/* Every push of bucket b is in acc. */
static int bucket_done(gs_ps_server *s, int b, gs_err *e) {
  s->complete++;
  bool last = s->complete == s->nb;
  if (s->sum_only) {
    GS_TRY(send_bucket(s, b, false, last, e));
  } else if (!s->scaling) {
    if (s->world > 1) {
      double t0 = gs_now();
      s->k->scale(s->k, s->cnt[b], 1.0f / (float)s->world, s->sum[b]);
      GS_TRY(kernel_check(s, "averaging", e));
      s->reduce_s += gs_now() - t0;
    }
    GS_TRY(update_bucket(s, b, e));
    GS_TRY(send_bucket(s, b, false, last, e));
    if (last) s->mom_started = true;
  } else if (last) {
    /* Loss scaling: the verdict needs the whole step. */
    double t0 = gs_now();
    float inv = (float)(1.0 / ((double)s->world * (double)s->scaler.scale));
    size_t bad = 0;
    for (int i = 0; i < s->nb; i++) {
      float *a = s->sum[i];
      /* the reduced gradient must fit the wire dtype, as it must in the
       * ring (and in DDP), where the sum itself travels in it: both modes
       * then skip the same steps */
      if (s->wire != GS_F32) {
        s->k->convert(s->k, s->wire, s->wchk, GS_F32, a, s->cnt[i]);
        bad += s->k->nonfinite(s->k, s->wire, s->cnt[i], s->wchk);
      }
      s->k->scale(s->k, s->cnt[i], inv, a);
      bad += s->k->nonfinite(s->k, GS_F32, s->cnt[i], a);
    }
    GS_TRY(kernel_check(s, "unscaling", e));
    s->reduce_s += gs_now() - t0;
    bool skip = gs_scaler_update(&s->scaler, bad > 0);
    for (int i = 0; i < s->nb; i++) {
      if (!skip) GS_TRY(update_bucket(s, i, e));
      GS_TRY(send_bucket(s, i, skip, i == s->nb - 1, e));
    }
    if (!skip) s->mom_started = true;
  }
  if (last) end_round(s);
  return GS_OK;
}

static void unpark(gs_ps_server *s, size_t i) {
  atomic_fetch_sub(&s->held_bytes, zmq_msg_size(&s->held[i]));
  zmq_msg_close(&s->held[i]);
  s->has_held[i] = 0;
}

/* Add what rank order allows for bucket b. Pushes wait in their slot
 * (held, no copy) until every lower rank's is in. The sum starts from
 * rank 0, or, when rank 0's push is its own gradient buffer handed over
 * inproc (the server beside rank 0), from rank 1's push with rank 0's
 * added to it: fp32 addition is commutative, so r1 + r0 has the bits of
 * r0 + r1 (NaN payloads aside), and rank 1's buffer can be adopted. */
static int drain_bucket(gs_ps_server *s, int b, gs_err *e) {
  size_t nb = (size_t)s->nb;
  while (s->next[b] < s->world) {
    int r = s->next[b];
    double t0 = gs_now();
    int rc;
    if (r == 0) {
      if (!s->has_held[b]) return GS_OK;
      if (s->pair_start) {
        if (!s->has_held[nb + b]) return GS_OK;
        rc = start_sum(s, b, 1, &s->held[nb + b], &s->held[b], e);
        unpark(s, nb + b);
        s->next[b] = 1;
      } else {
        rc = start_sum(s, b, 0, &s->held[b], NULL, e);
      }
      unpark(s, b);
    } else {
      size_t i = (size_t)r * nb + b;
      if (!s->has_held[i]) return GS_OK;
      rc = add_push(s, b, &s->held[i], e);
      unpark(s, i);
    }
    if (rc < 0) return rc;
    s->next[b]++;
    s->reduce_s += gs_now() - t0;
    span(s, "reduce", b, t0);
  }
  return bucket_done(s, b, e);
}

/* --------------------------------------------------------------- phases */

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

static int alloc_state(gs_ps_server *s, gs_err *e) {
  size_t w = (size_t)s->world, nb = (size_t)s->nb;
  s->peers = calloc(w, sizeof *s->peers);
  s->next = calloc(nb, sizeof *s->next);
  s->got = calloc(w * nb, 1);
  s->held = calloc(w * nb, sizeof *s->held);
  s->has_held = calloc(w * nb, 1);
  s->inflight = calloc(nb, sizeof *s->inflight);
  if (!s->peers || !s->next || !s->got || !s->held || !s->has_held || !s->inflight)
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory for %d ranks x %d buckets",
                   s->world, s->nb);
  for (int r = 0; r < s->world; r++) s->peers[r].last_step = -1;
  size_t bytes = s->n * sizeof(float);
  s->sum = calloc(nb, sizeof *s->sum);
  s->summsg = calloc(nb, sizeof *s->summsg);
  s->has_sum = calloc(nb, 1);
  if (!s->sum || !s->summsg || !s->has_sum)
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory for %d buckets", s->nb);
  s->master = dev_alloc(s, bytes);
  if (!s->cpu || s->wire != GS_F32) s->acc = dev_alloc(s, bytes);
  if (s->sgd.momentum != 0.0f && !s->sum_only) s->mom = dev_alloc(s, bytes);
  if (s->wire != GS_F32 && !s->sum_only) {
    s->wout = dev_alloc(s, s->n * s->wsize);
    s->wchk = dev_alloc(s, s->maxcnt * s->wsize);
    if (!s->wout || !s->wchk)
      return GS_FAIL(e, GS_ENOMEM, "ps server: cannot allocate %zu bytes for %s parameters",
                     s->n * s->wsize, gs_dtype_name(s->wire));
  }
  if (!s->cpu) {
    s->stage = dev_alloc(s, s->maxcnt * s->wsize);
    s->hout = s->k->alloc_host(s->k, bytes);
    if (s->hout) atomic_fetch_add(&s->host_bytes, bytes);
  }
  gs_err ke = {0};
  if (!s->master || ((!s->cpu || s->wire != GS_F32) && !s->acc) || (s->sgd.momentum != 0.0f && !s->sum_only && !s->mom) ||
      (!s->cpu && (!s->stage || !s->hout)) || s->k->sync(s->k, &ke) < 0)
    return GS_FAIL(e, GS_ENOMEM, "ps server: cannot allocate the master copy, accumulator "
                   "and momentum for %zu parameters on %s%s%s", s->n, s->k->name,
                   ke.code ? ": " : "", ke.msg);
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
    warn(s, "a second worker claims rank %u; ignored (are two jobs sharing a job token?)", rank);
    return GS_OK;
  }
  memcpy(p->id, id, idlen);
  p->idlen = idlen;
  p->known = true;
  s->nknown++;
  if (count != s->n || nbuckets != (uint32_t)s->nb)
    return FAIL(s, e, GS_EMISMATCH, "ps server: rank %u holds %llu parameters in %u buckets, "
                "but rank 0 holds %zu in %d: the ranks run different models or bucket sizes",
                rank, (unsigned long long)count, nbuckets, s->n, s->nb);
  return welcome_if_ready(s, e);
}

static int on_init(gs_ps_server *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Init *in = m->env->init;
  if (s->have_init) {
    if (s->peers[0].idlen == zmq_msg_size(&m->id) &&
        memcmp(s->peers[0].id, zmq_msg_data(&m->id), s->peers[0].idlen) == 0)
      return FAIL(s, e, GS_EPROTO, "ps server: rank 0 sent Init twice");
    warn(s, "a second Init (claiming rank %u) from another sender; ignored", m->env->rank);
    return GS_OK;
  }
  if (m->env->rank != 0) {
    warn(s, "an Init from a sender claiming rank %u (only rank 0 initialises the server); "
         "ignored", m->env->rank);
    return GS_OK;
  }
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
      set_id(s->peers[0].id, &s->peers[0].idlen, &m->id);
      s->peers[0].known = true;
    }
    return FAIL(s, e, GS_EPROTO, "ps server: rank 0's Init is invalid: %s", why);
  }
  s->have_init = true;
  s->world = (int)in->world;
  s->n = in->count;
  s->nb = (int)in->n_bucket_count;
  s->wire = gs_wire_dtype(in->dtype);
  s->wsize = gs_dtype_size(s->wire);
  s->sgd = (gs_sgd){in->lr, in->momentum, in->weight_decay};
  s->sum_only = in->sum_only;
  gs_scaler_init(&s->scaler, in->scale, in->dynamic_scale);
  /* 0: the sender left GradScaler's defaults */
  if (in->scale_interval > 0) s->scaler.interval = (int)in->scale_interval;
  if (in->scale_growth > 0) s->scaler.growth = in->scale_growth;
  if (in->scale_backoff > 0) s->scaler.backoff = in->scale_backoff;
  s->scaling = !s->sum_only &&
               (s->wire != GS_F32 || s->scaler.dynamic || s->scaler.scale != 1.0f);
  if (in->timeout_ms > 0) s->timeout_ms = (int)in->timeout_ms;
  s->off = malloc((size_t)s->nb * sizeof *s->off);
  s->cnt = malloc((size_t)s->nb * sizeof *s->cnt);
  if (!s->off || !s->cnt) return FAIL(s, e, GS_ENOMEM, "ps server: out of memory");
  for (int b = 0; b < s->nb; b++) {
    s->off[b] = in->bucket_offset[b];
    s->cnt[b] = in->bucket_count[b];
    if (s->cnt[b] > s->maxcnt) s->maxcnt = s->cnt[b];
  }
  int rc = alloc_state(s, e);
  if (!s->peers) return rc;
  set_id(s->peers[0].id, &s->peers[0].idlen, &m->id);
  s->peers[0].known = true;
  s->peers[0].inproc = s->o.inproc;
  s->pair_start = s->o.inproc && s->world >= 2 && s->cpu && s->wire == GS_F32;
  s->nknown = 1;
  if (rc < 0) {
    broadcast_error(s, e);
    return rc;
  }
  s->k->to_device(s->k, s->master, zmq_msg_data(&m->payload), s->n * sizeof(float));
  GS_TRY(kernel_check(s, "uploading the initial parameters", e));
  for (int i = 0; i < s->npend; i++) {
    hello *h = &s->pend[i];
    GS_TRY(accept_hello(s, h->id, h->idlen, h->rank, h->count, h->nbuckets, e));
  }
  free(s->pend);
  s->pend = NULL;
  s->npend = 0;
  return s->running ? GS_OK : welcome_if_ready(s, e);
}

static int on_hello(gs_ps_server *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Hello *h = m->env->hello;
  if (s->have_init) {
    if (s->running) {
      int r = find_peer(s, &m->id);
      if (r >= 0) return FAIL(s, e, GS_EPROTO, "ps server: rank %d said hello twice", r);
      warn(s, "a hello claiming rank %u after every rank joined; ignored", m->env->rank);
      return GS_OK;
    }
    return accept_hello(s, zmq_msg_data(&m->id), zmq_msg_size(&m->id), m->env->rank, h->count,
                        h->nbuckets, e);
  }
  for (int i = 0; i < s->npend; i++)
    if (s->pend[i].rank == m->env->rank) {
      warn(s, "a second hello claiming rank %u before Init; ignored", m->env->rank);
      return GS_OK;
    }
  if (s->npend == MAX_PENDING) {
    warn(s, "more than %d hellos before rank 0's Init; ignored", MAX_PENDING);
    return GS_OK;
  }
  if (!s->pend && !(s->pend = calloc(MAX_PENDING, sizeof *s->pend)))
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory");
  hello *p = &s->pend[s->npend++];
  set_id(p->id, &p->idlen, &m->id);
  p->rank = m->env->rank;
  p->count = h->count;
  p->nbuckets = h->nbuckets;
  return GS_OK;
}

static int on_push(gs_ps_server *s, int r, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Push *p = m->env->push;
  if (!s->running)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed gradients before every rank said "
                "hello", r);
  if (s->peers[r].bye)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed gradients after saying goodbye", r);
  if (!s->in_round) {
    if (s->stepped && p->step <= s->last_step)
      return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed gradients for step %llu, but "
                  "step %llu is already done", r, (unsigned long long)p->step,
                  (unsigned long long)s->last_step);
  } else if (p->step != s->step) {
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed gradients for step %llu while rank "
                "%d pushed step %llu (ranks out of step)", r, (unsigned long long)p->step,
                s->round_rank, (unsigned long long)s->step);
  }
  if (p->bucket >= (uint32_t)s->nb)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed bucket %u of step %llu; the job has "
                "%d buckets", r, p->bucket, (unsigned long long)p->step, s->nb);
  int b = (int)p->bucket;
  if (p->offset != s->off[b] || p->count != s->cnt[b])
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d as [%llu, +%llu);"
                " the bucket is [%zu, +%zu)", r, (unsigned long long)p->step, b,
                (unsigned long long)p->offset, (unsigned long long)p->count, s->off[b],
                s->cnt[b]);
  if ((int)p->dtype < 0 || (int)p->dtype > 2 || gs_wire_dtype(p->dtype) != s->wire)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d in dtype %d; "
                "the job's wire dtype is %s", r, (unsigned long long)p->step, b, (int)p->dtype,
                gs_dtype_name(s->wire));
  gs_err pe = {0};
  if (gs_wire_expect_payload(m, s->cnt[b], s->wire, &pe) < 0)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d, step %llu bucket %d: %s", r,
                (unsigned long long)p->step, b, pe.msg);
  size_t i = (size_t)r * s->nb + b;
  if (s->got[i])
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d twice", r,
                (unsigned long long)p->step, b);
  if (!s->in_round) {
    s->in_round = true;
    s->step = p->step;
    s->round_rank = r;
    s->round_t0 = gs_now();
  }
  s->got[i] = 1;
  s->peers[r].pushed++;
  if (!s->peers[r].inproc) s->recv += m->bytes;
  zmq_msg_init(&s->held[i]);
  zmq_msg_move(&s->held[i], &m->payload);
  s->has_held[i] = 1;
  uint64_t now = atomic_fetch_add(&s->held_bytes, zmq_msg_size(&s->held[i])) +
                 zmq_msg_size(&s->held[i]);
  if (now > atomic_load(&s->held_peak)) atomic_store(&s->held_peak, now);
  return drain_bucket(s, b, e);
}

/* 1: every rank said goodbye. */
static int on_bye(gs_ps_server *s, int r, gs_err *e) {
  if (s->in_round)
    return FAIL(s, e, GS_EPEER, "ps server: rank %d said goodbye in the middle of step %llu",
                r, (unsigned long long)s->step);
  if (s->peers[r].bye) return GS_OK;
  s->peers[r].bye = true;
  if (s->nbye++ == 0) s->bye_t0 = gs_now();
  return s->nbye == s->world;
}

/* The deadline has passed: name who is missing. */
static int timed_out(gs_ps_server *s, gs_err *e) {
  char msg[900] = "";
  size_t len = 0;
  double t = s->timeout_ms / 1000.0;
  for (int r = 0; r < (s->have_init ? s->world : 0) && len < sizeof msg - 200; r++) {
    peer *p = &s->peers[r];
    char last[64];
    if (p->last_step < 0) snprintf(last, sizeof last, "no step completed yet");
    else snprintf(last, sizeof last, "last complete step %lld", (long long)p->last_step);
    if (!s->running && !p->known) {
      len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d never said hello to the "
                              "ps server in %.1f s (not started, or cannot reach %s)",
                              len ? "; " : "", r, t, s->tcp_ep);
    } else if (s->running && s->in_round && p->pushed < s->nb) {
      int b = 0;
      while (b < s->nb && s->got[(size_t)r * s->nb + b]) b++;
      len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d sent no gradients for "
                              "step %llu bucket %d in %.1f s (%s)", len ? "; " : "", r,
                              (unsigned long long)s->step, b, t, last);
    } else if (s->running && !s->in_round && s->nbye > 0 && !p->bye) {
      len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d did not say goodbye "
                              "within %.1f s of the first rank that did (%s)",
                              len ? "; " : "", r, t, last);
    }
  }
  if (!s->have_init)
    snprintf(msg, sizeof msg, "rank 0 sent no Init within %.1f s of the first hello", t);
  return FAIL(s, e, GS_ETIMEOUT, "ps server: %s", msg);
}

/* ------------------------------------------------------------------ API */

int gs_ps_server_create(const gs_ps_server_opts *o, gs_ps_server **out,
                        char tcp_ep[GS_ENDPOINT_MAX], char inproc_ep[GS_ENDPOINT_MAX], gs_err *e) {
  *out = NULL;
  gs_ps_server *s = calloc(1, sizeof *s);
  if (!s) {
    if (o->k) o->k->destroy(o->k);
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory");
  }
  s->o = *o;
  s->k = o->k;
  s->cpu = o->k->device == GS_DEV_CPU;
  s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 60000;
  s->sock = zmq_socket(o->zctx, ZMQ_ROUTER);
  if (!s->sock) {
    GS_FAIL(e, GS_EIO, "ps server: zmq_socket: %s", zmq_strerror(errno));
    gs_ps_server_destroy(s);
    return GS_EIO;
  }
  gs_wire_tune(s->sock);
  int one = 1;
  zmq_setsockopt(s->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
  /* Frames larger than the model are an attack or a bug: ZeroMQ drops the
   * connection before buffering them. */
  int64_t maxmsg = (int64_t)(o->max_elems * sizeof(float));
  if (maxmsg < (int64_t)GS_HEADER_MAX) maxmsg = GS_HEADER_MAX;
  maxmsg += 64;
  zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  int rc = gs_wire_bind_any(s->sock, o->host, s->tcp_ep, sizeof s->tcp_ep, e);
  if (rc == GS_OK && o->inproc) {
    char ep[GS_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "inproc://gradsync-ps-%p", (void *)s);
    if (zmq_bind(s->sock, ep) < 0)
      rc = GS_FAIL(e, GS_EIO, "ps server: binding %s: %s", ep, zmq_strerror(errno));
    else if (inproc_ep)
      snprintf(inproc_ep, GS_ENDPOINT_MAX, "%s", ep);
  }
  if (rc < 0) {
    gs_ps_server_destroy(s);
    return rc;
  }
  snprintf(tcp_ep, GS_ENDPOINT_MAX, "%s", s->tcp_ep);
  *out = s;
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
  send_error(s, p, e);
}

static void tell_latecomers(gs_ps_server *s, const gs_err *e) {
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
    if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_HELLO)
      tell(s, e, m.env->rank, zmq_msg_data(&m.id), zmq_msg_size(&m.id), &told);
    gs_wire_msg_close(&m);
    if (rc == GS_EINTR) return;
  }
}

static int serve(gs_ps_server *s, gs_err *e);

int gs_ps_server_run(gs_ps_server *s, gs_err *e) {
  int rc = serve(s, e);
  if (rc < 0 && s->have_init && !s->running && s->peers) tell_latecomers(s, e);
  return rc;
}

static int serve(gs_ps_server *s, gs_err *e) {
  for (;;) {
    double deadline = 0;
    if (!s->running && (s->have_init || s->npend > 0)) deadline = s->contact_t0;
    else if (s->running && s->in_round) deadline = s->round_t0;
    else if (s->running && s->nbye > 0) deadline = s->bye_t0;
    if (deadline > 0) deadline += s->timeout_ms / 1000.0;
    if (atomic_load(&s->stop))
      return FAIL(s, e, GS_EPEER, "ps server: stopped by rank 0 (it is closing the job)");
    int wait_ms = SLICE_MS;
    if (deadline > 0) {
      double left = deadline - gs_now();
      if (left <= 0) return timed_out(s, e);
      if (left * 1000.0 < SLICE_MS) wait_ms = (int)(left * 1000.0) + 1;
    }
    gs_wire_msg m;
    gs_err me = {0};
    size_t maxpay = s->o.max_elems * sizeof(float);
    int rc = gs_wire_recv(s->sock, true, wait_ms, s->o.job, maxpay, &m, &me);
    if (rc == GS_ETIMEOUT) {
      gs_wire_msg_close(&m);
      continue;
    }
    if (rc == GS_EINTR) {
      gs_wire_msg_close(&m);
      return FAIL(s, e, GS_EINTR, "ps server: interrupted");
    }
    if (rc < 0 && rc != GS_EPROTO) {
      gs_wire_msg_close(&m);
      return FAIL(s, e, rc, "ps server: receiving: %s", me.msg);
    }
    int r = m.has_id && s->have_init ? find_peer(s, &m.id) : -1;
    if (rc < 0) {
      gs_wire_msg_close(&m);
      if (r >= 0) return FAIL(s, e, rc, "ps server: rank %d sent a bad message: %s", r, me.msg);
      warn(s, "dropped a message from an unregistered sender: %s", me.msg);
      continue;
    }
    if (s->contact_t0 == 0) s->contact_t0 = gs_now();
    const Gradsync__Envelope *env = m.env;
    if (env->body_case == GRADSYNC__ENVELOPE__BODY_INIT) {
      rc = on_init(s, &m, e);
    } else if (env->body_case == GRADSYNC__ENVELOPE__BODY_HELLO) {
      rc = on_hello(s, &m, e);
    } else if (r < 0) {
      warn(s, "dropped a %s message from an unregistered sender claiming rank %u",
           gs_wire_kind(env), env->rank);
      rc = GS_OK;
    } else if (env->rank != (uint32_t)r) {
      rc = FAIL(s, e, GS_EPROTO, "ps server: rank %d's connection sent a message claiming to be "
                "rank %u", r, env->rank);
    } else if (env->body_case == GRADSYNC__ENVELOPE__BODY_PUSH) {
      rc = on_push(s, r, &m, e);
    } else if (env->body_case == GRADSYNC__ENVELOPE__BODY_SHUTDOWN) {
      rc = on_bye(s, r, e);
    } else if (env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
      const Gradsync__Error *er = env->error;
      rc = FAIL(s, e, GS_EPEER, "rank %d failed (%s): %s", r, er->phase ? er->phase : "?",
                er->message ? er->message : "no message");
    } else {
      rc = FAIL(s, e, GS_EPROTO, "ps server: rank %d sent a %s message, which a ps server never "
                "expects", r, gs_wire_kind(env));
    }
    gs_wire_msg_close(&m);
    if (rc < 0) return rc;
    if (rc == 1) return GS_OK;
  }
}

int gs_ps_io_threads(int world) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int n = world < 4 ? world : 4;
  if (cores > 0 && n > cores) n = (int)cores;
  return n < 1 ? 1 : n;
}

void gs_ps_server_stop(gs_ps_server *s) { atomic_store(&s->stop, 1); }

void gs_ps_server_memory(gs_ps_server *s, uint64_t *device_bytes, uint64_t *host_bytes) {
  uint64_t held = atomic_load(&s->held_peak);
  /* Held pushes live in ZeroMQ's host buffers. */
  if (s->cpu) {
    *device_bytes = atomic_load(&s->dev_bytes) + held;
    *host_bytes = 0;
  } else {
    *device_bytes = atomic_load(&s->dev_bytes);
    *host_bytes = atomic_load(&s->host_bytes) + held;
  }
}

void gs_ps_server_destroy(gs_ps_server *s) {
  if (!s) return;
  if (s->held)
    for (size_t i = 0; i < (size_t)s->world * s->nb; i++)
      if (s->has_held[i]) zmq_msg_close(&s->held[i]);
  if (s->sock) zmq_close(s->sock);
  /* Outgoing zero-copy messages point into master / acc / hout: wait until
   * ZeroMQ let go of them (sent, or dropped after the linger period). */
  bool leak = false;
  double t0 = gs_now();
  struct timespec ts = {0, 1000000};
  for (;;) {
    int held = atomic_load(&s->inflight_welcome);
    for (int b = 0; s->inflight && b < s->nb; b++) held += atomic_load(&s->inflight[b]);
    if (held == 0) break;
    if (gs_now() - t0 > 5.0) {
      leak = true;
      fprintf(stderr, "gradsync ps server: warning: ZeroMQ still holds %d outgoing messages "
              "after 5 s; leaving their buffers allocated\n", held);
      break;
    }
    nanosleep(&ts, NULL);
  }
  if (leak) return; /* release callbacks may still run: keep everything */
  for (int b = 0; s->has_sum && b < s->nb; b++)
    if (s->has_sum[b]) zmq_msg_close(&s->summsg[b]);
  free(s->sum);
  free(s->summsg);
  free(s->has_sum);
  if (s->master) s->k->release(s->k, s->master);
  if (s->acc) s->k->release(s->k, s->acc);
  if (s->mom) s->k->release(s->k, s->mom);
  if (s->stage) s->k->release(s->k, s->stage);
  if (s->wout) s->k->release(s->k, s->wout);
  if (s->wchk) s->k->release(s->k, s->wchk);
  if (s->hout) s->k->release_host(s->k, s->hout);
  free(s->inflight);
  s->k->destroy(s->k);
  free(s->off);
  free(s->cnt);
  free(s->peers);
  free(s->pend);
  free(s->next);
  free(s->got);
  free(s->held);
  free(s->has_held);
  free(s);
}
