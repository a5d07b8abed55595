/* backend.c: the all-reduce backend of worker/sync.h (--mode ring): DDP
 * on the CPU, over the ZeroMQ communicator and its algorithms (algos.c).
 *
 * One progress thread per rank owns the communicator. The training thread hands it
 * buckets as backward fills them (bucket_ready, with overlap) or all at once
 * in end_step (without); the thread all-reduces them strictly in order
 * 0, 1, 2 ... (the same order on every rank, so the chunks of bucket b
 * never meet those of bucket b+1). end_step waits for the last bucket, then
 * the training thread finishes the step with gs_update_apply (kernels.h):
 * the mean, the overflow verdict and SGD, with one momentum buffer per
 * rank. Every rank holds the same reduced bits, so every rank decides and
 * steps alike and the parameters stay bitwise identical. With sum_only (the
 * collective benchmark) the element-wise sum lands in params and nothing
 * else happens.
 *
 * With --compress powersgd:R (compress.h) the thread hands a bucket of a
 * step from `start` on to gs_powersgd_bucket instead, which runs its three
 * all-reduces (the uncompressed tensors, P, Q) on the same ring and leaves
 * the sum as the plain all-reduce would; the rest of the step is the same.
 * With --compress topk:FRACTION every bucket is topk_gather.c's all-gather of
 * the ranks' largest entries, summed in rank order, instead.
 *
 * Overlap on or off runs exactly the same operations in the same order,
 * so it gives the same bits; only the time the training thread waits
 * (wait_s) differs. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allreduce/allreduce.h"
#include "allreduce/topk_gather.h"

typedef struct allreduce_state {
  gs_comm *comm;
  gs_kernels *rk;  /* its own CPU table: the thread's sticky errors stay its own */
} allreduce_state;

typedef struct allreduce_sync {
  gs_sync base;
  gs_sync_config c;        /* copy; pointers below are ours (opts: NULL) */
  int period;              /* gs_allreduce_opts.period */
  size_t inline_max;       /* a last bucket up to this many bytes: run_tail */
  size_t shm_inline_max;   /* the same, for one that runs shm */
  gs_bucket *buckets;
  gs_comm *comm;
  gs_kernels *rk;
  gs_update u;             /* the optimizer and the loss scaler */
  gs_powersgd *psgd;       /* --compress powersgd, or NULL */
  gs_topk_gather *topk;      /* --compress topk, or NULL */
  gs_update_range *ranges; /* the buckets, as the optimizer takes them */

  /* training thread */
  gs_sync_order order;
  int64_t step;
  double wait_s;

  /* shared with the progress thread, under mu */
  pthread_t thr;
  bool thr_live;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int submitted, done;     /* buckets handed over / all-reduced this step */
  bool quit;
  int err_code;
  gs_err err;
  gs_comm_stats acc;       /* this step */
} allreduce_sync;

/* A step's last bucket of at most this many bytes (GS_RING_INLINE, 0:
 * none) is all-reduced by the training thread itself in end_step, once the
 * progress thread has finished the others: handing it over costs two
 * thread wake-ups per rank (the progress thread's, then the training
 * thread's), which for an 8-byte all-reduce are most of its time
 * (docs/measurements.md). The overlap given up is at most that one small
 * all-reduce, and the operations and their order are the same, so the bits
 * are too. */
#define DEFAULT_INLINE_MAX ((size_t)64 << 10)
/* The same, when the bucket runs over shared memory (a plain all-reduce on
 * one host): that all-reduce is this thread's own copies and sums, with no
 * socket and no I/O thread, so handing it over adds only the two wake-ups,
 * which at 128 KiB to 512 KiB cost about as much as the all-reduce
 * (issue 48). Above 1 MiB they are a few percent of it, and a sweep at 2
 * MiB was no faster inline (noisy, unexplained), so the limit stays there.
 * GS_RING_INLINE, when set, is the limit for both. */
#define DEFAULT_SHM_INLINE_MAX ((size_t)1 << 20)

static uint64_t plan_hash(const gs_bucket *b, int nb) {
  uint64_t h = GS_HASH_INIT;
  for (int i = 0; i < nb; i++) {
    uint64_t v[2] = {b[i].offset, b[i].count};
    h = gs_hash_bytes(h, v, sizeof v);
  }
  return h;
}

/* The bucket plan and the compression, so ranks that differ in either
 * meet a mismatch in the handshake instead of a hang. */
static uint64_t config_hash(const gs_sync_config *c) {
  uint64_t h = plan_hash(c->buckets, c->nbuckets);
  if (c->compress.kind == GS_COMPRESS_NONE) return h;  /* as before compression existed */
  uint64_t v[3] = {(uint64_t)c->compress.kind, (uint64_t)c->compress.rank,
                   (uint64_t)c->compress.start};
  if (c->compress.kind == GS_COMPRESS_TOPK) memcpy(&v[1], &c->compress.fraction, sizeof v[1]);
  return gs_hash_bytes(h, v, sizeof v);
}

static gs_allreduce_opts opts_of(const gs_sync_config *c) {
  gs_allreduce_opts o = {0};
  if (c->opts) o = *(const gs_allreduce_opts *)c->opts;
  return o;
}

/* What the all-reduce runs (sync.h gs_caps): host memory, every
 * compression (top-k an all-gather on the ring algorithm itself, and not
 * with periodic averaging, which averages parameters, not gradients), every
 * step or periodic averaging. */
static void allreduce_caps(const void *opts, gs_caps *c) {
  gs_allreduce_opts o = {0};
  if (opts) o = *(const gs_allreduce_opts *)opts;
  gs_caps_everything(c);
  bool plain = o.algo == GS_ALGO_RING || o.algo == GS_ALGO_AUTO;
  if (!plain || o.period > 1) c->runs[GS_AXIS_COMPRESS] &= ~GS_CAP(GS_COMPRESS_TOPK);
  c->runs[GS_AXIS_SYNC] = GS_CAP(GS_SYNC_BSP) | GS_CAP(GS_SYNC_PERIODIC);
  c->runs[GS_AXIS_DEVICE] = GS_CAP(GS_DEV_CPU);
  if (o.period > 1)
    snprintf(c->what, sizeof c->what, "periodic averaging (--ring-period %d)", o.period);
  else if (!plain)
    snprintf(c->what, sizeof c->what, "the all-reduce by --algo %s", gs_algo_name(o.algo));
  else
    snprintf(c->what, sizeof c->what, "the CPU all-reduce (--mode ring)");
}

/* sync.h's checks (with what the all-reduce runs) and the period's number. */
static int check_config(const gs_sync_config *c, gs_err *e) {
  GS_TRY(gs_sync_check_config(c, &gs_allreduce_backend, "ring", e));
  if (opts_of(c).period < 0)
    return GS_FAIL(e, GS_EINVAL, "rank %d: ring period %d", c->rank, opts_of(c).period);
  return GS_OK;
}

/* ------------------------------------------------------------------ */
/* the progress thread */

/* PowerSGD's all-reduce: the plain one on this ring, labelled with the
 * step and bucket being compressed. */
typedef struct psgd_call {
  allreduce_sync *s;
  int64_t step;
  int bucket;
  gs_comm_stats *st;
} psgd_call;

static int psgd_allreduce(void *ctx, float *buf, size_t count, int part, gs_err *e) {
  static const char *const what[] = {"the uncompressed tensors", "P", "Q"};
  psgd_call *c = ctx;
  int rc = gs_comm_allreduce(c->s->comm, buf, buf, count, c->step, c->bucket, c->st, e);
  if (rc < 0) gs_err_prefix(e, "powersgd, all-reduce of %s: ", what[part >= 0 && part < 3 ? part : 0]);
  return rc;
}

/* All-reduce bucket b of the step (whichever thread runs it: the progress
 * thread, or the training thread for a small last bucket, run_tail). */
static int run_bucket(allreduce_sync *s, int b, int64_t step, gs_comm_stats *st, gs_err *e) {
  const gs_bucket bk = s->buckets[b];
  float *src = s->c.grads + bk.offset;
  float *dst = s->c.sum_only ? s->c.params + bk.offset : src;
  if (gs_powersgd_active(s->psgd, step)) {
    psgd_call call = {s, step, b, st};
    gs_powersgd_stats ps = {0};
    int rc = gs_powersgd_bucket(s->psgd, b, s->c.grads, bk.offset, bk.count, psgd_allreduce,
                                &call, &ps, e);
    st->reduce_s += ps.compute_s;  /* compressing is this rank's reduction work */
    return rc;
  }
  if (s->topk) return gs_topk_gather_bucket(s->topk, s->comm, s->rk, s->c.grads, b, step, st, e);
  return gs_comm_allreduce(s->comm, src, dst, bk.count, step, b, st, e);
}

/* What a bucket's all-reduce left (under mu): its stats, and done, or the
 * error that stops the session. */
static void bucket_done(allreduce_sync *s, int rc, const gs_comm_stats *st, const gs_err *e) {
  s->acc.bytes_sent += st->bytes_sent;
  s->acc.bytes_recv += st->bytes_recv;
  s->acc.reduce_s += st->reduce_s;
  if (rc < 0) {
    s->err_code = rc;
    s->err = *e;
  } else {
    s->done++;
  }
}

static void *progress(void *arg) {
  allreduce_sync *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->quit && (s->err_code < 0 || s->done >= s->submitted))
      pthread_cond_wait(&s->cv, &s->mu);
    if (s->quit) break;
    int b = s->done;
    int64_t step = s->step;
    pthread_mutex_unlock(&s->mu);

    gs_comm_stats st = {0};
    gs_err e = {0};
    int rc = run_bucket(s, b, step, &st, &e);

    pthread_mutex_lock(&s->mu);
    bucket_done(s, rc, &st, &e);
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static int thread_error(allreduce_sync *s, gs_err *e) {
  /* under mu */
  if (e && e->code == 0) *e = s->err;
  return s->err_code;
}

/* ------------------------------------------------------------------ */
/* gs_sync_ops */

static void span(allreduce_sync *s, const char *name, int bucket, double t0, double t1) {
  if (s->c.span) s->c.span(s->c.span_ctx, name, bucket, t0, t1, 0);
}

static int allreduce_begin_step(gs_sync *base, int64_t step, gs_err *e) {
  allreduce_sync *s = (allreduce_sync *)base;
  if (s->order.in_step) return gs_sync_order_begin(&s->order, step, e);
  pthread_mutex_lock(&s->mu);
  int rc = s->err_code;
  if (rc < 0) rc = thread_error(s, e);
  s->submitted = s->done = 0;
  s->step = step;
  memset(&s->acc, 0, sizeof s->acc);
  pthread_mutex_unlock(&s->mu);
  if (rc < 0) return rc;
  s->wait_s = 0;
  return gs_sync_order_begin(&s->order, step, e);
}

/* Whether bucket is the step's last and small enough for the training
 * thread to all-reduce it itself (DEFAULT_INLINE_MAX). */
static bool tail_inline(const allreduce_sync *s, int bucket) {
  if (bucket != s->c.nbuckets - 1) return false;
  const size_t count = s->buckets[bucket].count, bytes = count * gs_dtype_size(s->c.wire);
  if (bytes <= s->inline_max) return true;
  /* a plain all-reduce (run_bucket's last line) over shared memory */
  return bytes <= s->shm_inline_max && !s->psgd && !s->topk &&
         gs_comm_algo(s->comm, count) == GS_ALGO_SHM;
}

static int allreduce_bucket_ready(gs_sync *base, int bucket, gs_err *e) {
  allreduce_sync *s = (allreduce_sync *)base;
  GS_TRY(gs_sync_order_ready(&s->order, bucket, e));
  if (!s->c.overlap || s->period > 1 || tail_inline(s, bucket)) return GS_OK;
  double t0 = gs_now();
  pthread_mutex_lock(&s->mu);
  int rc = s->err_code < 0 ? thread_error(s, e) : GS_OK;
  s->submitted = bucket + 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  s->wait_s += gs_now() - t0;
  return rc;
}

/* The last bucket, on the training thread (tail_inline), after the
 * progress thread has finished every other (under mu, which it holds
 * again on return). The progress thread sleeps meanwhile: it runs only
 * buckets below submitted, and submitted follows done. */
static int run_tail(allreduce_sync *s, gs_err *e) {
  int b = s->done;
  int64_t step = s->step;
  pthread_mutex_unlock(&s->mu);
  gs_comm_stats st = {0};
  gs_err te = {0};
  int rc = run_bucket(s, b, step, &st, &te);
  pthread_mutex_lock(&s->mu);
  bucket_done(s, rc, &st, &te);
  s->submitted = s->done;
  return rc < 0 ? thread_error(s, e) : GS_OK;
}

/* Hand every bucket of c.grads to the progress thread (but a small last
 * one, which this thread runs itself) and wait until they are all-reduced;
 * what it cost goes to st. */
static int reduce_all(allreduce_sync *s, gs_sync_stats *st, gs_err *e) {
  double t0 = gs_now();
  pthread_mutex_lock(&s->mu);
  const int nb = s->c.nbuckets;
  const int own = nb > 0 && s->submitted < nb && tail_inline(s, nb - 1);
  if (s->submitted < nb - own) { /* else waking the progress thread would only cost */
    s->submitted = nb - own;
    pthread_cond_broadcast(&s->cv);
  }
  bool interrupted = false;
  while (s->done < s->submitted && s->err_code == 0) {
    /* the ring's receives time out on their own; this wakes up to notice ^C */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    if (gs_interrupted && !interrupted) {
      interrupted = true;
      gs_comm_interrupt(s->comm);
    }
  }
  int rc = s->err_code < 0 ? thread_error(s, e) : GS_OK;
  if (rc == GS_OK && own) rc = run_tail(s, e);
  gs_comm_stats acc = s->acc;
  pthread_mutex_unlock(&s->mu);
  double t1 = gs_now();
  s->wait_s += t1 - t0;
  span(s, "wait", -1, t0, t1);
  st->wait_s = s->wait_s;
  st->bytes_sent = acc.bytes_sent;
  st->bytes_recv = acc.bytes_recv;
  st->reduce_s = acc.reduce_s;
  return rc;
}

/* Post-local SGD: this rank's own gradient (the mean over 1), then, after
 * the steps t % H == 0, the parameters averaged over the ranks as
 * PyTorch's average_parameters does: divided by world, then all-reduced
 * (through the gradient buffer, which backward fills anew next step). */
static int periodic_end_step(allreduce_sync *s, gs_sync_stats *st, gs_err *e) {
  gs_update_result res;
  double a = gs_now();
  s->u.world = 1;
  int rc = gs_update_apply(&s->u, s->c.params, s->ranges, s->c.nbuckets, true, true, &res, e);
  if (rc < 0) {
    gs_err_prefix(e, "rank %d: ", s->c.rank);
    return rc;
  }
  st->reduce_s = res.check_s;
  st->update_s = res.update_s;
  st->scale = res.scale;
  span(s, "optimizer", -1, a + res.check_s, gs_now());
  if (s->step % s->period != 0) {
    st->wait_s = s->wait_s;
    return GS_OK;
  }
  gs_kernels *k = s->c.k;
  double b = gs_now();
  k->copy(k, s->c.grads, s->c.params, s->c.n * sizeof(float));
  k->scale(k, s->c.n, 1.0f / (float)s->c.world, s->c.grads);
  GS_TRY(k->sync(k, e));
  double r0 = gs_now() - b;
  gs_sync_stats avg = {0};
  GS_TRY(reduce_all(s, &avg, e));
  k->copy(k, s->c.params, s->c.grads, s->c.n * sizeof(float));
  GS_TRY(k->sync(k, e));
  st->wait_s = avg.wait_s;
  st->bytes_sent = avg.bytes_sent;
  st->bytes_recv = avg.bytes_recv;
  st->reduce_s += avg.reduce_s + r0;
  return GS_OK;
}

static int allreduce_end_step(gs_sync *base, gs_sync_stats *st, gs_err *e) {
  allreduce_sync *s = (allreduce_sync *)base;
  gs_sync_stats local;
  if (!st) st = &local;
  memset(st, 0, sizeof *st);
  st->scale = s->u.scaler.scale;
  GS_TRY(gs_sync_order_end(&s->order, e));
  if (s->period > 1) return periodic_end_step(s, st, e);
  /* wait for the progress thread to finish the last bucket */
  int rc = reduce_all(s, st, e);
  if (rc < 0) return rc;
  if (s->c.sum_only) return GS_OK;

  /* every rank holds the same reduced bits: the same verdict everywhere;
   * the sums travelled in the wire dtype, so they fit it */
  gs_update_result res;
  double a = gs_now();
  rc = gs_update_apply(&s->u, s->c.params, s->ranges, s->c.nbuckets, true, true, &res, e);
  if (rc < 0) {
    gs_err_prefix(e, "rank %d: ", s->c.rank);
    return rc;
  }
  st->reduce_s += res.check_s;
  st->update_s = res.update_s;
  st->skipped = res.skipped;
  st->scale = res.scale;
  if (!res.skipped) span(s, "optimizer", -1, a + res.check_s, gs_now());
  return GS_OK;
}

static int allreduce_close(gs_sync *base, bool ok, gs_err *e) {
  allreduce_sync *s = (allreduce_sync *)base;
  if (!s) return GS_OK;
  if (s->order.in_step) ok = false; /* a collective may be under way: do not wait for it */
  if (s->thr_live) {
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    if (s->err_code < 0) ok = false;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (!ok) gs_comm_interrupt(s->comm);
    pthread_join(s->thr, NULL);
  }
  gs_comm_close(s->comm, ok, ok ? NULL : "its job stopped");
  gs_update_free(&s->u);
  gs_powersgd_destroy(s->psgd);
  gs_topk_gather_destroy(s->topk);
  free(s->ranges);
  if (s->rk) s->rk->destroy(s->rk);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->buckets);
  free(s);
  return GS_OK;
}

static const gs_sync_ops allreduce_ops = {
  .begin_step = allreduce_begin_step,
  .bucket_ready = allreduce_bucket_ready,
  .end_step = allreduce_end_step,
  .close = allreduce_close,
};

/* ------------------------------------------------------------------ */
/* gs_backend */

/* Training: --algo hier; under auto hier too where the host keys show
 * several hosts of several ranks (hier_auto: else the ring), with fp32
 * gradients on the CPU; anything else the ring. */
static gs_algo train_algo(const gs_sync_config *c, const gs_kernels *k) {
  gs_algo a = opts_of(c).algo;
  if (c->compress.kind == GS_COMPRESS_TOPK) return GS_ALGO_RING; /* an all-gather on the ring */
  if (a == GS_ALGO_HIER) return GS_ALGO_HIER;
  if (a == GS_ALGO_AUTO && c->wire == GS_F32 && k->device == GS_DEV_CPU)
    return GS_ALGO_HIER;
  return GS_ALGO_RING;
}

static int allreduce_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                      gs_err *e) {
  *state = NULL;
  if (endpoint) endpoint[0] = '\0';
  GS_TRY(check_config(c, e));
  allreduce_state *p = calloc(1, sizeof *p);
  if (!p) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", c->rank);
  p->rk = gs_kernels_cpu(0, e);
  if (!p->rk) {
    free(p);
    return GS_FAIL(e, GS_ENOMEM, "rank %d: cannot create the ring's kernels", c->rank);
  }
  size_t max_count = 0;
  for (int i = 0; i < c->nbuckets; i++)
    if (c->buckets[i].count > max_count) max_count = c->buckets[i].count;
  if (c->compress.kind == GS_COMPRESS_TOPK && gs_topk_gather_count(c) > max_count)
    max_count = gs_topk_gather_count(c);
  gs_comm_opts o = {
    .rank = c->rank,
    .world = c->world,
    .timeout_ms = c->timeout_ms,
    .job = c->job,
    .host = c->host,
    .cred = c->cred,
    .k = p->rk,
    .wire = c->wire,
    .max_count = max_count,
    .nbuckets = (uint32_t)c->nbuckets,
    .plan_hash = config_hash(c),
    .sum_only = c->sum_only,
    .local_ranks = c->local_world,
    /* Training moves the textbook 2(N-1)/N x S bytes per step whatever the
     * bucket sizes; the collective benchmark may take the small-message
     * path, as NCCL picks its algorithm by size. */
    .small_bytes = c->sum_only ? 0 : GS_COMM_NO_SMALL,
    /* Training keeps the ring for every bucket, so its parameters stay
     * those of the one summation order the tests and the reference know,
     * or the hierarchical all-reduce, whose order is as fixed (hier.c). */
    .algo = c->sum_only ? opts_of(c).algo : train_algo(c, p->rk),
    .hier_auto = !c->sum_only && opts_of(c).algo == GS_ALGO_AUTO,
    .no_resend = opts_of(c).no_resend,
    .span = c->span,
    .span_ctx = c->span_ctx,
  };
  int rc = gs_comm_prepare(&o, &p->comm, endpoint, e);
  if (rc < 0) {
    p->rk->destroy(p->rk);
    free(p);
    return rc;
  }
  *state = p;
  return GS_OK;
}

static void allreduce_discard(void *state) {
  allreduce_state *p = state;
  if (!p) return;
  gs_comm_close(p->comm, false, "it could not join the job");
  if (p->rk) p->rk->destroy(p->rk);
  free(p);
}

static int allreduce_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  allreduce_state *p = state;
  *out = NULL;
  if (!p) return GS_FAIL(e, GS_EINVAL, "ring: open without prepare");
  int rc = check_config(c, e);
  if (rc == GS_OK) {
    gs_comm_set_job(p->comm, c->job); /* ranks > 0 learn it only now */
    rc = gs_comm_connect(p->comm, c->endpoints, e);
  }
  allreduce_sync *s = NULL;
  if (rc == GS_OK) {
    s = calloc(1, sizeof *s);
    if (!s) rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", c->rank);
  }
  if (rc == GS_OK) {
    s->base.ops = &allreduce_ops;
    s->base.name = "ring";
    s->c = *c;
    gs_sync_order_init(&s->order, "ring", c->rank, c->nbuckets);
    s->c.endpoints = NULL;
    s->c.bootstrap = NULL;
    s->period = opts_of(c).period;
    s->inline_max = gs_env_bytes("GS_RING_INLINE", DEFAULT_INLINE_MAX);
    s->shm_inline_max = gs_env_bytes("GS_RING_INLINE", DEFAULT_SHM_INLINE_MAX);
    s->c.opts = NULL; /* the caller's; what the session needs of it is above */
    s->comm = p->comm;
    s->rk = p->rk;
    p->comm = NULL;
    p->rk = NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->buckets = malloc((size_t)(c->nbuckets > 0 ? c->nbuckets : 1) * sizeof *s->buckets);
    if (!s->buckets) rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", c->rank);
    else if (c->nbuckets > 0)
      memcpy(s->buckets, c->buckets, (size_t)c->nbuckets * sizeof *s->buckets);
    s->c.buckets = s->buckets;
    s->ranges = calloc((size_t)(c->nbuckets > 0 ? c->nbuckets : 1), sizeof *s->ranges);
    if (!s->ranges) rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", c->rank);
    for (int b = 0; rc == GS_OK && b < c->nbuckets; b++)
      s->ranges[b] = (gs_update_range){.offset = c->buckets[b].offset,
                                       .count = c->buckets[b].count,
                                       .grad = c->grads + c->buckets[b].offset};
    gs_sgd sgd = c->sgd;
    if (c->sum_only) sgd.momentum = 0.0f;
    /* sum_only never applies an update; the optimizer knows the wire dtypes */
    gs_dtype uw = c->wire == GS_F64 || c->wire == GS_I32 ? GS_F32 : c->wire;
    if (rc == GS_OK && (rc = gs_update_init(&s->u, c->k, c->n, c->world, sgd, uw, c->scaler,
                                            e)) < 0)
      gs_err_prefix(e, "rank %d: ", c->rank);
    if (rc == GS_OK && c->compress.kind == GS_COMPRESS_POWERSGD &&
        (rc = gs_powersgd_create(&c->compress, s->rk, c->tensors, c->ntensors, c->nbuckets,
                                 c->world, &s->psgd, e)) < 0)
      gs_err_prefix(e, "rank %d: ", c->rank);
    if (rc == GS_OK && c->compress.kind == GS_COMPRESS_TOPK)
      rc = gs_topk_gather_create(c, &s->topk, e);
    if (rc == GS_OK) {
      if (pthread_create(&s->thr, NULL, progress, s) != 0)
        rc = GS_FAIL(e, GS_ENOMEM, "rank %d: cannot start the ring's progress thread", c->rank);
      else
        s->thr_live = true;
    }
    if (rc < 0) {
      gs_err ignore = {0};
      allreduce_close(&s->base, false, &ignore);
      s = NULL;
    }
  }
  allreduce_discard(p); /* what was not handed over */
  if (rc < 0) return rc;
  *out = &s->base;
  return GS_OK;
}

gs_comm *gs_allreduce_comm(gs_sync *s) {
  return s && s->ops == &allreduce_ops ? ((allreduce_sync *)s)->comm : NULL;
}

const gs_backend gs_allreduce_backend = {
  .name = "ring",
  .caps = allreduce_caps,
  .asks = gs_allreduce_asks,
  .prepare = allreduce_prepare,
  .bootstrap = NULL,
  .open = allreduce_open,
  .discard = allreduce_discard,
};
