/* measure.c: what a calibration measures on this machine for the cost
 * model (`bench --calibrate`), each part short so the whole stays within
 * seconds:
 *
 *   transport  a ZeroMQ PAIR ping-pong between two threads over tcp
 *              loopback at sizes 64 B .. 8 MiB, half round trips fitted to
 *              t = alpha + m / bandwidth (gs_cm_fit_p2p); its port takes
 *              a job's data-port credential (proto/proto.h), made from a
 *              fresh secret no other process holds, so what it measures
 *              is the job's transport and nobody else can connect to it;
 *   link       when asked (--hosts 2 --link RATE): the same ping-pong between two
 *              emulated hosts (a thread in each one's namespace), for the
 *              link's bandwidth and latency (link_part);
 *   reduce     the kernels' add (dst += src, fp32) at 1 .. 16 MiB, fitted
 *              to t = c + m / rate (gs_cm_fit_reduce); copy the same way;
 *   optimizer  gs_update_apply (average + SGD with momentum) over 4M
 *              parameters: parameters per second;
 *   compute    the model at its batch through the trainer and the local
 *              backend: forward and backward per sample, the median of the
 *              steps after a warm-up; and, with a bucket per tensor, when
 *              in backward each tensor's gradient was final (readiness).
 *
 * Every timing is the best of a few repetitions: the figure is what the
 * machine can do, not what a busy moment made of it. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>
#include <zmq.h>

#include "bench/costmodel/costmodel.h"
#include "bench/hosts/hosts.h"
#include "proto/proto.h"
#include "worker/sync.h"

#define REPS 5

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ---- transport ---- */

typedef struct echo {
  void *ctx;
  const gs_cred *cred;
  char endpoint[GS_ENDPOINT_MAX];
  int netns;                /* >= 0: the far end runs in this network namespace */
  int rc;
} echo;

/* the far end: send every message back, until an empty one */
static void *echo_main(void *arg) {
  echo *a = arg;
  a->rc = -1;
  /* the namespace is per thread: this one enters the far host, and its
   * own ZeroMQ context (whose I/O thread it starts) lives there too */
  void *ctx = a->ctx;
  if (a->netns >= 0 && (setns(a->netns, CLONE_NEWNET) < 0 || !(ctx = gs_sock_context(0, NULL))))
    return NULL;
  void *s = gs_sock_open(ctx, &(gs_sock_opts){.type = ZMQ_PAIR, .linger_ms = 0,
                                               .rcvtimeo_ms = 10000}, NULL);
  if (!s) {
    if (ctx != a->ctx) gs_sock_context_end(ctx, NULL);
    return NULL;
  }
  gs_err ce = {0};
  if (gs_cred_connect(s, a->cred, a->endpoint, &ce) == 0) {
    for (;;) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, s, 0) < 0) break;
      if (zmq_msg_size(&m) == 0) {
        a->rc = 0;
        zmq_msg_close(&m);
        break;
      }
      if (zmq_msg_send(&m, s, 0) < 0) {
        zmq_msg_close(&m);
        break;
      }
    }
  }
  gs_sock_close(s, GS_SOCK_AS_OPENED);
  if (ctx != a->ctx) gs_sock_context_end(ctx, NULL);
  return NULL;
}

/* the best time of REPS batches of round trips of `bytes`, halved */
static int ping(void *s, char *buf, size_t bytes, double *half, gs_err *e) {
  int rounds = bytes >= (1u << 20) ? 4 : bytes >= (1u << 16) ? 20 : 200;
  double best = INFINITY;
  for (int r = -1; r < REPS; r++) { /* r = -1: warm-up */
    double t0 = gs_now();
    for (int i = 0; i < rounds; i++)
      if (zmq_send(s, buf, bytes, 0) < 0 || zmq_recv(s, buf, bytes, 0) != (int)bytes)
        return GS_FAIL(e, GS_EIO, "calibration, transport: ping-pong of %zu bytes: %s", bytes,
                       zmq_strerror(zmq_errno()));
    double t = (gs_now() - t0) / rounds;
    if (r >= 0 && t < best) best = t;
  }
  *half = best / 2;
  return GS_OK;
}

/* A ping-pong between this thread and an echo thread, fitted to
 * t = alpha + m / bandwidth: over tcp loopback (netns -1), or from an
 * address of host 0 to an echo in host 1's namespace (the caller's thread
 * is in host 0's). */
typedef struct p2p {
  const char *bind;         /* "127.0.0.1", or host 0's address */
  int netns;                /* the echo's namespace, or -1 */
  bool stream;              /* also the sustained rate of a stream (stream_Bps) */
  double alpha_s, Bps, rms; /* the fit */
  double small_s;           /* half a round trip of the smallest message */
  double stream_Bps;
  gs_err e;
  int rc;
} p2p;

/* The sustained rate: STREAM_MSGS messages of 1 MiB back to back, and
 * their echoes, the best of 3. A link shaped by tbf lets a burst through
 * faster than its rate, which a fit over single round trips mistakes for
 * bandwidth; a stream of 32 MiB is mostly past the burst. */
#define STREAM_MSGS 32
static int stream_rate(void *s, char *buf, double *Bps, gs_err *e) {
  const size_t m = 1 << 20;
  double best = INFINITY;
  for (int r = 0; r < 3; r++) {
    double t0 = gs_now();
    for (int i = 0; i < STREAM_MSGS; i++)
      if (zmq_send(s, buf, m, 0) < 0)
        return GS_FAIL(e, GS_EIO, "calibration, link: a stream of 1 MiB messages: %s",
                       zmq_strerror(zmq_errno()));
    for (int i = 0; i < STREAM_MSGS; i++)
      if (zmq_recv(s, buf, m, 0) != (int)m)
        return GS_FAIL(e, GS_EIO, "calibration, link: a stream of 1 MiB messages: %s",
                       zmq_strerror(zmq_errno()));
    double t = gs_now() - t0;
    if (t < best) best = t;
  }
  /* the last echo leaves only once the last message is in: one message
   * more than the stream crosses the link in that time */
  *Bps = (STREAM_MSGS + 1) * (double)m / best;
  return GS_OK;
}

static int ping_pong(p2p *q) {
  static const size_t sizes[] = {64, 4096, 65536, 1 << 20, 8 << 20};
  enum { NS = sizeof sizes / sizeof sizes[0] };
  gs_err *e = &q->e;
  gs_cm_point pts[NS];
  int rc = GS_OK;
  uint8_t secret[32];
  randombytes_buf(secret, sizeof secret);
  gs_cred cred;
  gs_zap *zap = NULL;
  echo a = {.ctx = gs_sock_context(0, NULL), .cred = &cred, .netns = q->netns, .rc = -1};
  void *s = NULL;
  char *buf = malloc(sizes[NS - 1]);
  if (!a.ctx || !buf) {
    rc = GS_FAIL(e, GS_EIO, "calibration, transport: cannot open a ZeroMQ context: %s",
                 zmq_strerror(zmq_errno()));
    goto out;
  }
  if ((rc = gs_cred_derive(&cred, secret, sizeof secret, false, e)) < 0 ||
      (rc = gs_zap_start(a.ctx, &cred, 0, "the cost model's transport measurement", &zap,
                         e)) < 0)
    goto out;
  gs_sock_opts so = {.type = ZMQ_PAIR, .linger_ms = 0, .rcvtimeo_ms = 10000,
                     .sndtimeo_ms = 10000};
  if (!(s = gs_sock_open(a.ctx, &so, NULL))) {
    rc = GS_FAIL(e, GS_EIO, "calibration, transport: cannot open a ZeroMQ socket: %s",
                 zmq_strerror(zmq_errno()));
    goto out;
  }
  memset(buf, 1, sizes[NS - 1]);
  if ((rc = gs_cred_bind(s, &cred, q->bind, a.endpoint, e)) < 0) {
    gs_err_prefix(e, "calibration, transport: ");
    goto out;
  }
  pthread_t th;
  if (pthread_create(&th, NULL, echo_main, &a) != 0) {
    rc = GS_FAIL(e, GS_EIO, "calibration, transport: cannot start the echo thread");
    goto out;
  }
  for (int i = 0; i < NS && rc == GS_OK; i++) {
    pts[i] = (gs_cm_point){.world = 1, .bytes = (double)sizes[i]};
    rc = ping(s, buf, sizes[i], &pts[i].seconds, e);
  }
  if (rc == GS_OK) q->small_s = pts[0].seconds;
  if (rc == GS_OK && q->stream) rc = stream_rate(s, buf, &q->stream_Bps, e);
  zmq_send(s, "", 0, 0); /* the echo's end */
  pthread_join(th, NULL);
  if (rc == GS_OK) {
    gs_cm_fit f;
    rc = gs_cm_fit_p2p(pts, NS, &f, NULL, e);
    if (rc == GS_OK && !(f.beta_s > 0))
      rc = GS_FAIL(e, GS_EIO, "calibration, transport: the ping-pong times do not grow with "
                   "the size (a busy machine?): run it again");
    if (rc == GS_OK) {
      /* a negative intercept is noise around a small alpha: the smallest
       * message's time bounds it */
      q->alpha_s = f.alpha_s > 0 ? f.alpha_s : pts[0].seconds;
      q->Bps = 1 / f.beta_s;
      q->rms = f.rms_rel;
    }
  }
out:
  free(buf);
  sodium_memzero(secret, sizeof secret);
  sodium_memzero(&cred, sizeof cred);
  gs_sock_close(s, GS_SOCK_AS_OPENED);
  gs_sock_context_end(a.ctx, zap);
  return q->rc = rc;
}

static int transport(gs_cm_calib *c, gs_calib_notes *n, gs_err *e) {
  p2p q = {.bind = "127.0.0.1", .netns = -1};
  if (ping_pong(&q) < 0) {
    *e = q.e;
    return q.rc;
  }
  c->alpha_s = q.alpha_s;
  c->local_Bps = q.Bps;
  n->loop_small_s = q.small_s;
  n->transport_rms = q.rms;
  snprintf(c->transport, sizeof c->transport, "zmq-tcp-loopback");
  return GS_OK;
}

int gs_calibrate_transport(double *alpha_s, double *Bps, gs_err *e) {
  gs_cm_calib c;
  gs_calib_notes n;
  memset(&c, 0, sizeof c);
  GS_TRY(transport(&c, &n, e));
  *alpha_s = c.alpha_s;
  *Bps = c.local_Bps;
  return GS_OK;
}

/* host 0's side of a ping-pong across the link, in a thread of its own
 * (the namespace is the thread's) */
typedef struct across {
  p2p q;
  int netns0;
} across;

static void *across_main(void *arg) {
  across *x = arg;
  if (setns(x->netns0, CLONE_NEWNET) < 0) {
    x->q.rc = GS_FAIL(&x->q.e, GS_EIO, "calibration, link: entering host 0's network "
                      "namespace: %s", strerror(errno));
    return NULL;
  }
  ping_pong(&x->q);
  return NULL;
}

/* --hosts 2 --link RATE: the same ping-pong between two emulated hosts.
 * The link's bandwidth is a stream's sustained rate (stream_rate); its
 * latency what the smallest message takes beyond loopback's (half round
 * trips of 64 B), plus the --latency that the wire's delay line would add
 * where the kernel has no netem (this raw ping-pong does not pass through
 * it). */
static int link_part(const gs_cm_measure_cfg *o, gs_cm_calib *c, gs_calib_notes *n, gs_err *e) {
  gs_err ne = {0};
  int netem = o->latency_s > 0 ? gs_hosts_netem(&ne) : 1;
  if (netem < 0) return GS_FAIL(e, ne.code, "calibration, link: %s", ne.msg);
  gs_hosts_cfg cfg = {.hosts = 2, .rate_bps = o->link_bps,
                      .delay_s = netem ? o->latency_s : 0};
  gs_hosts *h = NULL;
  if (gs_hosts_create(&cfg, &h, &ne) < 0)
    return GS_FAIL(e, ne.code, "calibration, link: %s", ne.msg);
  gs_host_info h0, h1;
  gs_hosts_info(h, 0, &h0);
  gs_hosts_info(h, 1, &h1);
  across x = {.q = {.bind = h0.addr, .stream = true},
              .netns0 = open(h0.netns, O_RDONLY | O_CLOEXEC)};
  x.q.netns = open(h1.netns, O_RDONLY | O_CLOEXEC);
  int rc = GS_OK;
  pthread_t th;
  if (x.netns0 < 0 || x.q.netns < 0) {
    rc = GS_FAIL(e, GS_EIO, "calibration, link: opening the hosts' namespaces: %s",
                 strerror(errno));
  } else if (pthread_create(&th, NULL, across_main, &x) != 0) {
    rc = GS_FAIL(e, GS_EIO, "calibration, link: cannot start a thread");
  } else {
    pthread_join(th, NULL);
    if ((rc = x.q.rc) < 0) *e = x.q.e;
  }
  if (x.netns0 >= 0) close(x.netns0);
  if (x.q.netns >= 0) close(x.q.netns);
  gs_hosts_destroy(h);
  if (rc < 0) return rc;
  c->has_link = true;
  c->link_Bps = x.q.stream_Bps;
  c->link_latency_s = (x.q.small_s > n->loop_small_s ? x.q.small_s - n->loop_small_s : 0) +
                      (netem ? 0 : o->latency_s);
  n->link_measured = true;
  return GS_OK;
}

/* ---- kernels and optimizer ---- */

/* bytes per second of add (copy = false) or copy over 1..16 MiB */
static int kernel_rate(gs_kernels *k, bool copy, float *dst, const float *src, double *rate,
                       double *rms, gs_err *e) {
  static const size_t floats[] = {1 << 18, 1 << 20, 1 << 22};
  enum { NS = sizeof floats / sizeof floats[0] };
  gs_cm_point pts[NS];
  for (int i = 0; i < NS; i++) {
    double best = INFINITY;
    for (int r = -1; r < REPS; r++) {
      double t0 = gs_now();
      if (copy) k->copy(k, dst, src, floats[i] * sizeof(float));
      else k->add(k, floats[i], dst, src);
      GS_TRY(k->sync(k, e));
      double t = gs_now() - t0;
      if (r >= 0 && t < best) best = t;
    }
    pts[i] = (gs_cm_point){.world = 1, .bytes = (double)(floats[i] * sizeof(float)),
                           .seconds = best};
  }
  gs_cm_fit f;
  if (gs_cm_fit_reduce(pts, NS, &f, NULL, e) == GS_OK && f.gamma_s > 0) {
    *rate = 1 / f.gamma_s;
    *rms = f.rms_rel;
  } else { /* the largest size's plain rate */
    *rate = pts[NS - 1].bytes / pts[NS - 1].seconds;
    *rms = NAN;
  }
  return GS_OK;
}

/* A summation server's rate (BytePS' servers are CPUs): one core adding
 * partitions of 4 MiB (BytePS' size) into a sum as they arrive, four of
 * them, 16 MiB that no cache holds, as pushes from the network are. */
static int server_rate(double *rate, gs_err *e) {
  const size_t N = 1 << 20, NSRC = 4;
  gs_kernels *k = gs_kernels_cpu(1, e);
  if (!k) return e && e->code ? e->code : GS_EDEVICE;
  float *acc = k->alloc(k, N * sizeof(float)), *src = k->alloc(k, NSRC * N * sizeof(float));
  int rc = acc && src ? GS_OK : GS_FAIL(e, GS_ENOMEM, "calibration: out of memory (20 MiB)");
  for (size_t i = 0; rc == GS_OK && i < NSRC * N; i++) src[i] = (float)(i % 5) * 1e-3f;
  double best = INFINITY;
  for (int r = -1; r < REPS && rc == GS_OK; r++) {
    double t0 = gs_now();
    for (size_t s = 0; s < NSRC; s++) k->add(k, N, acc, src + s * N);
    rc = k->sync(k, e);
    double t = gs_now() - t0;
    if (r >= 0 && t < best) best = t;
  }
  if (rc == GS_OK) *rate = (double)(NSRC * N * sizeof(float)) / best;
  if (acc) k->release(k, acc);
  if (src) k->release(k, src);
  k->destroy(k);
  return rc;
}

static int kernels(gs_kernels *k, gs_cm_calib *c, gs_calib_notes *n, gs_err *e) {
  const size_t N = 1 << 22; /* 16 MiB of fp32 */
  float *a = k->alloc(k, N * sizeof(float)), *b = k->alloc(k, N * sizeof(float));
  int rc = a && b ? GS_OK : GS_FAIL(e, GS_ENOMEM, "calibration: out of memory (2 x 16 MiB)");
  if (rc == GS_OK) {
    for (size_t i = 0; i < N; i++) b[i] = (float)(i % 7) * 1e-3f;
    rc = kernel_rate(k, false, a, b, &c->reduce_Bps, &n->reduce_rms, e);
  }
  if (rc == GS_OK) rc = kernel_rate(k, true, a, b, &c->copy_Bps, &n->copy_rms, e);
  if (rc == GS_OK) rc = server_rate(&c->server_reduce_Bps, e);
  gs_update u;
  bool init = false;
  if (rc == GS_OK) {
    gs_sgd h = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 0};
    rc = gs_update_init(&u, k, N, 1, h, GS_F32, (gs_scaler){0}, e);
    init = rc == GS_OK;
  }
  double best = INFINITY;
  for (int r = -1; r < REPS && rc == GS_OK; r++) {
    gs_update_range range = {.offset = 0, .count = N, .grad = b};
    gs_update_result res;
    double t0 = gs_now();
    rc = gs_update_apply(&u, a, &range, 1, true, true, &res, e);
    if (rc == GS_OK) rc = k->sync(k, e);
    double t = gs_now() - t0;
    if (r >= 0 && t < best) best = t;
  }
  if (rc == GS_OK) {
    c->optim_pps = (double)N / best;
    n->optim_params = N;
  }
  if (init) gs_update_free(&u);
  if (a) k->release(k, a);
  if (b) k->release(k, b);
  return rc;
}

/* ---- compute ---- */

enum { WARM = 2, TIMED = 5 };

/* Per tensor, the median over the timed steps of the fraction of backward
 * done when its gradient was final. The run had a bucket per tensor
 * (bucket b holds tensor nt-1-b), and each bucket's "ready" mark falls
 * inside the backward span that closes after it. Left out (c->nready 0)
 * when the model has more tensors than a calibration holds. */
static void readiness(const gs_trainer *t, gs_cm_calib *c) {
  int nt = gs_trainer_ntensors(t);
  if (nt < 1 || nt > GS_CM_MAX_TENSORS || gs_trainer_nbuckets(t) != nt) return;
  size_t ns = 0;
  const gs_span *sp = gs_trainer_spans(t, &ns);
  double *frac = malloc((size_t)nt * TIMED * sizeof *frac);
  double *at = malloc((size_t)nt * sizeof *at);
  if (!frac || !at) goto out;
  int step = 0, m = 0;
  for (int i = 0; i < nt; i++) at[i] = NAN;
  for (size_t i = 0; i < ns && m < TIMED; i++) {
    if (sp[i].track != 0) continue;
    if (!strcmp(sp[i].name, "ready") && sp[i].bucket >= 0 && sp[i].bucket < nt) {
      at[nt - 1 - sp[i].bucket] = sp[i].t0;
    } else if (!strcmp(sp[i].name, "backward")) {
      double len = sp[i].t1 - sp[i].t0;
      bool whole = len > 0;
      for (int j = 0; j < nt && whole; j++) whole = isfinite(at[j]);
      if (step++ >= WARM && whole) {
        for (int j = 0; j < nt; j++)
          frac[(size_t)j * TIMED + (size_t)m] = fmin(fmax((at[j] - sp[i].t0) / len, 0), 1);
        m++;
      }
      for (int j = 0; j < nt; j++) at[j] = NAN;
    }
  }
  if (m < 1) goto out;
  for (int j = 0; j < nt; j++) {
    double *f = &frac[(size_t)j * TIMED];
    qsort(f, (size_t)m, sizeof *f, cmp_double);
    c->ready[j] = f[m / 2];
  }
  c->nready = nt;
out:
  free(frac);
  free(at);
}

static int compute(const gs_cm_measure_cfg *o, gs_kernels *k, gs_cm_calib *c, gs_calib_notes *n,
                   gs_err *e) {
  gs_train_opts to = o->train;
  to.rank = 0;
  to.world = 1;
  to.steps = WARM + TIMED;
  /* a bucket per tensor: each gradient's moment in backward is marked */
  to.first_bucket_mb = 0;
  to.bucket_mb = 0;
  if (!strcmp(to.data, "synthetic")) to.synthetic_samples = (int64_t)to.batch * to.steps;
  gs_trainer *t = NULL;
  gs_sync *s = NULL;
  int rc = gs_trainer_create(&to, k, &t, e);
  if (rc < 0) {
    gs_err_prefix(e, "--model %s: ", to.model);
    return GS_EINVAL;
  }
  gs_sync_config cfg;
  memset(&cfg, 0, sizeof cfg);
  gs_trainer_sync_config(t, &cfg);
  cfg.rank = 0;
  cfg.world = 1;
  cfg.timeout_ms = 60000;
  rc = gs_sync_single(&cfg, &s, e);
  if (rc == GS_OK) {
    rc = gs_trainer_run(t, s, NULL, NULL, e);
    gs_err ce = {0};
    int crc = s->ops->close(s, rc == GS_OK, &ce);
    if (rc == GS_OK && crc < 0) {
      rc = crc;
      *e = ce;
    }
  }
  size_t nrows = 0;
  const gs_step_row *rows = rc == GS_OK ? gs_trainer_rows(t, &nrows) : NULL;
  if (rc == GS_OK && nrows < WARM + 1)
    rc = GS_FAIL(e, GS_EIO, "calibration, compute: %zu steps ran, %d expected", nrows,
                 WARM + TIMED);
  if (rc == GS_OK) {
    double fw[WARM + TIMED], bw[WARM + TIMED];
    int m = 0;
    for (size_t i = WARM; i < nrows && m < TIMED; i++, m++) {
      fw[m] = rows[i].forward_s / to.batch;
      bw[m] = rows[i].backward_s / to.batch;
    }
    qsort(fw, (size_t)m, sizeof fw[0], cmp_double);
    qsort(bw, (size_t)m, sizeof bw[0], cmp_double);
    c->fwd_s = fw[m / 2];
    c->bwd_s = bw[m / 2];
    n->compute_steps = m;
    readiness(t, c);
    snprintf(c->model, sizeof c->model, "%s", to.model);
    snprintf(c->precision, sizeof c->precision, "%s", gs_dtype_name(to.precision));
    if (rc == GS_OK && strlen(to.model) >= sizeof c->model)
      rc = GS_FAIL(e, GS_EINVAL, "--model %s: a calibration holds model names of up to %zu "
                   "characters", to.model, sizeof c->model - 1);
  } else {
    gs_err_prefix(e, "calibration, compute of %s: ", to.model);
  }
  gs_trainer_destroy(t);
  return rc;
}

int gs_calibrate_compute(const gs_cm_measure_cfg *o, gs_cm_calib *c, gs_calib_notes *n,
                         gs_err *e) {
  gs_kernels *k = gs_kernels_cpu(o->threads > 0 ? o->threads : 1, e);
  if (!k) return e->code ? e->code : GS_EDEVICE;
  int rc = compute(o, k, c, n, e);
  k->destroy(k);
  return rc;
}

int gs_calibrate_measure(const gs_cm_measure_cfg *o, gs_cm_calib *c, gs_calib_notes *n,
                         gs_err *e) {
  memset(c, 0, sizeof *c);
  memset(n, 0, sizeof *n);
  n->threads = o->threads > 0 ? o->threads : 1;
  gs_kernels *k = gs_kernels_cpu(n->threads, e);
  if (!k) return e->code ? e->code : GS_EDEVICE;
  double t0 = gs_now();
  int rc = compute(o, k, c, n, e); /* first: a wrong --model fails at once */
  if (rc == GS_OK) rc = kernels(k, c, n, e);
  k->destroy(k);
  if (rc == GS_OK) rc = transport(c, n, e);
  if (rc == GS_OK && o->measure_link) {
    rc = link_part(o, c, n, e);
  } else if (rc == GS_OK && o->link_bps) { /* what-if: as given */
    c->has_link = true;
    c->link_Bps = (double)o->link_bps / 8;
    c->link_latency_s = o->latency_s;
  }
  n->seconds = gs_now() - t0;
  if (rc == GS_OK) rc = gs_cm_calib_check(c, e);
  return rc;
}

void gs_calibrate_print(FILE *f, const gs_cm_calib *c, const gs_calib_notes *n) {
  char rms[3][32];
  const double r[3] = {n->transport_rms, n->reduce_rms, n->copy_rms};
  for (int i = 0; i < 3; i++)
    if (isnan(r[i])) snprintf(rms[i], sizeof rms[i], "the largest size's rate");
    else snprintf(rms[i], sizeof rms[i], "fit rms %.1f%%", 100 * r[i]);
  fprintf(f, "calibration (%.1f s, %d BLAS thread%s):\n", n->seconds, n->threads,
          n->threads == 1 ? "" : "s");
  fprintf(f, "  %-30s %12s %-8s %12s  %s\n", "field", "value", "unit", "", "measured as");
#define ROW(key, v, unit, human, hunit, ...)                                                 \
  do {                                                                                       \
    char h[32];                                                                              \
    snprintf(h, sizeof h, "%.3g %s", human, hunit);                                          \
    fprintf(f, "  %-30s %12.4e %-8s %12s  ", key, v, unit, h);                               \
    fprintf(f, __VA_ARGS__);                                                                 \
    fputc('\n', f);                                                                          \
  } while (0)
  ROW("transport.alpha_s", c->alpha_s, "s", c->alpha_s * 1e6, "us",
      "per message: ZeroMQ ping-pong over tcp loopback, 64 B..8 MiB (%s)", rms[0]);
  ROW("transport.bandwidth_Bps", c->local_Bps, "B/s", c->local_Bps / 1e9, "GB/s",
      "bytes per second of the same fit");
  ROW("reduce_Bps", c->reduce_Bps, "B/s", c->reduce_Bps / 1e9, "GB/s",
      "dst += src, fp32, 1..16 MiB (%s)", rms[1]);
  ROW("copy_Bps", c->copy_Bps, "B/s", c->copy_Bps / 1e9, "GB/s", "memory copy, 1..16 MiB (%s)",
      rms[2]);
  ROW("optimizer_params_per_s", c->optim_pps, "params/s", c->optim_pps / 1e9, "G/s",
      "average + SGD with momentum over %zu parameters", n->optim_params);
  if (c->server_reduce_Bps > 0)
    ROW("server_reduce_Bps", c->server_reduce_Bps, "B/s", c->server_reduce_Bps / 1e9, "GB/s",
        "a summation server: one CPU core adding 4 MiB partitions as they arrive (BytePS)");
  ROW("compute.forward_s_per_sample", c->fwd_s, "s", c->fwd_s * 1e3, "ms",
      "%s, %s: median of %d steps after a warm-up", c->model, c->precision, n->compute_steps);
  ROW("compute.backward_s_per_sample", c->bwd_s, "s", c->bwd_s * 1e3, "ms", "the same steps%s",
      strncmp(c->model, "mlp:", 4) && strcmp(c->model, "lenet")
          ? " (a profile: its compute is emulated, --compute-ms per step)" : "");
  if (c->nready > 0)
    fprintf(f, "  %-30s %12d %-8s %12s  when each gradient was final in backward (median): the "
            "model's last tensor at %.3f, tensor %d at %.3f, the first at %.3f\n",
            "compute.ready_fraction", c->nready, "tensors", "", c->ready[c->nready - 1],
            c->nready / 2, c->ready[c->nready / 2], c->ready[0]);
  if (c->has_link && n->link_measured) {
    ROW("link.rate_Bps", c->link_Bps, "B/s", c->link_Bps * 8 / 1e9, "Gbit/s",
        "between 2 emulated hosts: %d MiB streamed each way, best of 3", STREAM_MSGS);
    ROW("link.latency_s", c->link_latency_s, "s", c->link_latency_s * 1e6, "us",
        "half a round trip of 64 B between them, beyond loopback's");
  } else if (c->has_link) {
    ROW("link.rate_Bps", c->link_Bps, "B/s", c->link_Bps * 8 / 1e9, "Gbit/s",
        "given (--link): a what-if network");
    ROW("link.latency_s", c->link_latency_s, "s", c->link_latency_s * 1e6, "us",
        "given (--latency)");
  }
#undef ROW
}
