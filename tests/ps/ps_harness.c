/* ps_harness.c: ranks as threads or processes around the ps backend, and the
 * reference update (see ps_harness.h). */
#include "ps_harness.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fakedev.h"
#include "ps/ps.h"

int rank_ids[MAXW] = {0, 1, 2, 3, 4, 5, 6, 7};

void job_defaults(job_opts *o) {
  memset(o, 0, sizeof *o);
  o->world = 2;
  o->n = 1000;
  o->bucket_elems = 300;
  o->steps = 4;
  o->sgd = (gs_sgd){0.05f, 0.9f, 1e-4f};
  o->wire = GS_F32;
  gs_scaler_init(&o->scaler, 1.0f, false);
  o->timeout_ms = 20000;
  o->job = 0x5eed5eed12345678ull;
  o->seed = 42;
  o->inf_rank = o->inf_step = -1;
  o->kill_rank = o->kill_step = -1;
  o->odd_rank = -1;
  o->abort_rank = o->abort_step = -1;
  o->grad_scale = 1.0f;
}

gs_bucket *plan_buckets(size_t n, size_t elems, int *nbuckets) {
  int nb = (int)((n + elems - 1) / elems);
  gs_bucket *b = calloc((size_t)nb, sizeof *b);
  size_t end = n;
  for (int i = 0; i < nb; i++) {
    size_t c = end >= elems ? elems : end;
    b[i].offset = end - c;
    b[i].count = c;
    end -= c;
  }
  *nbuckets = nb;
  return b;
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static float unit(uint64_t h) { return (float)((double)(h >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f; }

void make_grads(const job_opts *o, int rank, int step, float scale, float *g) {
  uint64_t base = mix(o->seed ^ mix((uint64_t)rank * 1000003u + (uint64_t)step * 7919u + 1));
  for (size_t i = 0; i < o->n; i++) g[i] = unit(mix(base + i)) * o->grad_scale * scale;
  if (rank == o->inf_rank && step == o->inf_step) g[o->n / 2] = INFINITY;
}

void make_params(const job_opts *o, int rank, float *p) {
  /* Ranks other than 0 start elsewhere: open() must give them rank 0's. */
  uint64_t base = mix(o->seed * 31 + 17 + (uint64_t)rank);
  for (size_t i = 0; i < o->n; i++) p[i] = unit(mix(base + i));
}

job_result *result_new(const job_opts *o) {
  size_t pbytes = ((size_t)(o->steps + 1) * o->world * o->n * sizeof(float) + 63) & ~(size_t)63;
  size_t sbytes = (size_t)o->steps * o->world * sizeof(gs_sync_stats);
  size_t total = sizeof(job_result) + pbytes + sbytes + MAXW * sizeof(int) + 64;
  char *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED, "mmap %zu bytes", total);
  job_result *r = (job_result *)m;
  r->world = o->world;
  r->steps = o->steps;
  r->n = o->n;
  r->params = (float *)(m + sizeof(job_result));
  r->stats = (gs_sync_stats *)((char *)r->params + pbytes);
  r->steps_done = (int *)((char *)r->stats + sbytes);
  return r;
}

void result_free(job_result *r) {
  size_t pbytes = ((size_t)(r->steps + 1) * r->world * r->n * sizeof(float) + 63) & ~(size_t)63;
  size_t sbytes = (size_t)r->steps * r->world * sizeof(gs_sync_stats);
  munmap(r, sizeof(job_result) + pbytes + sbytes + MAXW * sizeof(int) + 64);
}

float *result_params(job_result *r, int step_plus_1, int rank) {
  return r->params + ((size_t)step_plus_1 * r->world + rank) * r->n;
}

bool same_bits(const float *a, const float *b, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      fprintf(stderr, "%s: element %zu differs: %.9g vs %.9g\n", what, i, (double)a[i],
              (double)b[i]);
      return false;
    }
  return true;
}

float *check_reference(const job_opts *o, job_result *r, const char *what, bool *skipped,
                       float *scales) {
  bool sk[64];
  float sc[64];
  REQUIRE(skipped && scales ? true : o->steps <= 64, "%s: more than 64 steps", what);
  float *ref = malloc((size_t)(o->steps + 1) * o->n * sizeof(float));
  REQUIRE(ref, "%s: out of memory for the reference", what);
  reference(o, ref, skipped ? skipped : sk, scales ? scales : sc);
  for (int s = 0; s <= o->steps; s++)
    for (int i = 0; i < o->world; i++) {
      char label[160];
      snprintf(label, sizeof label, "%s: rank %d after step %d", what, i, s - 1);
      REQUIRE(same_bits(result_params(r, s, i), ref + (size_t)s * o->n, o->n, label),
            "%s differs from the reference", label);
    }
  return ref;
}

/* ------------------------------------------------------------ one rank */

typedef struct rank_ctx {
  const job_opts *o;
  job_result *res;
  int rank;
  gs_sync_config cfg;
  gs_ps_opts ps;           /* cfg.opts */
  void *state;
  gs_kernels *k;
  float *params, *grads;
  gs_bucket *buckets;
  int nbuckets;
  char blob[GS_BOOTSTRAP_MAX];
  size_t blob_len;
} rank_ctx;

static void rank_init(rank_ctx *rc, const job_opts *o, job_result *res, int rank) {
  memset(rc, 0, sizeof *rc);
  rc->o = o;
  rc->res = res;
  rc->rank = rank;
  gs_err e = {0};
  rc->k = o->fake_device ? fakedev_create(&e) : gs_kernels_cpu(0, &e);
  REQUIRE(rc->k, "kernels: %s", e.msg);
  rc->params = rc->k->alloc(rc->k, o->n * sizeof(float));
  rc->grads = rc->k->alloc(rc->k, o->n * sizeof(float));
  make_params(o, rank, rc->params);
  if (o->buckets) {
    rc->nbuckets = o->nbuckets;
    rc->buckets = malloc((size_t)o->nbuckets * sizeof *rc->buckets);
    memcpy(rc->buckets, o->buckets, (size_t)o->nbuckets * sizeof *rc->buckets);
  } else {
    rc->buckets = plan_buckets(o->n, rank == o->odd_rank ? o->odd_bucket_elems : o->bucket_elems,
                               &rc->nbuckets);
  }
  gs_sync_config *c = &rc->cfg;
  c->rank = rank;
  c->world = o->world;
  c->timeout_ms = o->timeout_ms;
  c->job = o->job;
  c->host = "127.0.0.1";
  c->k = rc->k;
  c->params = rc->params;
  c->grads = rc->grads;
  c->n = o->n;
  c->buckets = rc->buckets;
  c->nbuckets = rc->nbuckets;
  c->sgd = o->sgd;
  c->wire = o->wire;
  c->scaler = o->scaler;
  c->overlap = o->overlap;
  rc->ps = (gs_ps_opts){.dedicated = o->dedicated, .servers = o->ps_servers,
                        .host_ranks = o->host_ranks, .sync = o->ps_sync,
                        .summation = o->summation, .spare = o->spare,
                        .hosts = o->hosts ? o->hosts : o->world,
                        .spare_share = o->spare_share, .partition_bytes = o->partition_bytes,
                        .credit_bytes = o->credit_bytes};
  c->opts = &rc->ps;
  c->sum_only = o->sum_only;
  c->span = o->span;
  c->span_ctx = &rank_ids[rank];
}

static void rank_free(rank_ctx *rc) {
  rc->k->release(rc->k, rc->params);
  rc->k->release(rc->k, rc->grads);
  rc->k->destroy(rc->k);
  free(rc->buckets);
}

static void record_fail(rank_ctx *rc, int code, const gs_err *e) {
  job_result *r = rc->res;
  r->rc[rc->rank] = code;
  r->fail_t[rc->rank] = gs_now();
  snprintf(r->err[rc->rank], sizeof r->err[rc->rank], "%s", e->msg);
}

/* open, steps, close: the part of a rank after the rendezvous. */
static int rank_run(rank_ctx *rc) {
  const job_opts *o = rc->o;
  job_result *res = rc->res;
  gs_err e = {0};
  gs_sync *s = NULL;
  rc->cfg.bootstrap = rc->blob;
  rc->cfg.bootstrap_len = rc->blob_len;
  int code = gs_ps_backend.open(rc->state, &rc->cfg, &s, &e);
  if (code < 0) {
    record_fail(rc, code, &e);
    return code;
  }
  memcpy(result_params(res, 0, rc->rank), rc->params, o->n * sizeof(float));
  float *g = malloc(o->n * sizeof(float));
  uint64_t js = mix(o->jitter_seed * 977 + (uint64_t)rc->rank);
  float scale = o->scaler.scale;
  for (int step = 0; step < o->steps && code == 0; step++) {
    code = s->ops->begin_step(s, step, &e);
    make_grads(o, rc->rank, step, scale, g);
    for (int b = 0; b < rc->nbuckets && code == 0; b++) {
      if (rc->rank == o->kill_rank && step == o->kill_step && b == o->kill_bucket) {
        /* let the pushes ZeroMQ already queued leave first */
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
        res->kill_t = gs_now();
        raise(SIGKILL);
      }
      if (rc->rank == o->abort_rank && step == o->abort_step) {
        code = GS_FAIL(&e, GS_EINVAL, "the test makes rank %d give up", rc->rank);
        res->kill_t = gs_now();
        break;
      }
      const gs_bucket *bk = &rc->buckets[b];
      memcpy(rc->grads + bk->offset, g + bk->offset, bk->count * sizeof(float));
      if (o->jitter_us > 0) {
        js = mix(js);
        struct timespec ts = {0, (long)(js % (uint64_t)o->jitter_us) * 1000};
        nanosleep(&ts, NULL);
      }
      code = s->ops->bucket_ready(s, b, &e);
    }
    gs_sync_stats st;
    if (code == 0) code = s->ops->end_step(s, &st, &e);
    if (code == 0) {
      res->stats[(size_t)step * o->world + rc->rank] = st;
      memcpy(result_params(res, step + 1, rc->rank), rc->params, o->n * sizeof(float));
      res->steps_done[rc->rank] = step + 1;
      scale = st.scale;
    }
  }
  free(g);
  if (code < 0) record_fail(rc, code, &e);
  gs_ps_memory(s, &res->mem_dev[rc->rank], &res->mem_host[rc->rank]);
  gs_err ce = {0};
  int cc = s->ops->close(s, code == 0, &ce);
  if (code == 0 && cc < 0) {
    record_fail(rc, cc, &ce);
    code = cc;
  }
  return code;
}

static void *rank_thread(void *arg) {
  rank_run(arg);
  return NULL;
}

/* A spare host's summation server, as bench's server role runs one. */
typedef struct spare_srv {
  pthread_t th;
  int fd;
  int rc;
  gs_err e;
  int timeout_ms;
} spare_srv;

static void *spare_main(void *arg) {
  spare_srv *v = arg;
  gs_cred none = {0};
  v->rc = gs_ps_serve_summation("127.0.0.1", &none, v->timeout_ms, (size_t)1 << 30, v->fd,
                                &v->e);
  return NULL;
}

/* start o->spare of them; eps gets their addresses */
static void spare_start(const job_opts *o, spare_srv *v, char (*ep)[GS_ENDPOINT_MAX],
                        const char **eps) {
  for (int k = 0; k < o->spare; k++) {
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    v[k] = (spare_srv){.fd = p[1], .timeout_ms = o->timeout_ms};
    REQUIRE(pthread_create(&v[k].th, NULL, spare_main, &v[k]) == 0, "pthread_create");
    char line[GS_ENDPOINT_MAX + 32];
    REQUIRE(gs_read_line(p[0], gs_now() + 10, line, sizeof line) == 1 && line[0] == 'E',
            "spare server %d: no address", k);
    close(p[0]);
    char *sp = strchr(line + 2, ' ');
    if (sp) *sp = 0;
    snprintf(ep[k], GS_ENDPOINT_MAX, "%.*s", GS_ENDPOINT_MAX - 1, line + 2);
    eps[k] = ep[k];
  }
}

int run_threads(const job_opts *o, job_result *res) {
  REQUIRE(o->world <= MAXW, "world %d", o->world);
  rank_ctx rc[MAXW];
  gs_err e = {0};
  spare_srv spare[MAXW];
  static char sep[MAXW][GS_ENDPOINT_MAX];
  static const char *seps[MAXW];
  REQUIRE(o->spare <= MAXW, "%d spare servers", o->spare);
  spare_start(o, spare, sep, seps);
  /* every rank's endpoint, as the rendezvous hands them out (the sharded
   * ps' servers' addresses) */
  static char ep[MAXW][GS_ENDPOINT_MAX];
  static const char *eps[MAXW];
  /* prepare in this thread: a dedicated server dies with the thread that
   * forked it, and this one outlives every rank */
  for (int r = 0; r < o->world; r++) {
    rank_init(&rc[r], o, res, r);
    if (o->spare > 0) rc[r].ps.server_eps = seps;
    REQUIRE(gs_ps_backend.prepare(&rc[r].cfg, &rc[r].state, ep[r], &e) == 0, "prepare: %s",
            e.msg);
    eps[r] = ep[r];
    rc[r].cfg.endpoints = eps;
  }
  if (o->on_endpoints) o->on_endpoints(ep, o->world);
  char blob[GS_BOOTSTRAP_MAX];
  size_t len = 0;
  REQUIRE(gs_ps_backend.bootstrap(rc[0].state, &rc[0].cfg, blob, &len, &e) == 0, "bootstrap: %s",
        e.msg);
  if (o->on_blob) o->on_blob(blob, o->on_blob_ctx);
  pthread_t th[MAXW];
  for (int r = 0; r < o->world; r++) {
    memcpy(rc[r].blob, blob, len);
    rc[r].blob_len = len;
    REQUIRE(pthread_create(&th[r], NULL, rank_thread, &rc[r]) == 0, "pthread_create");
  }
  int bad = 0;
  for (int r = 0; r < o->world; r++) {
    pthread_join(th[r], NULL);
    rank_free(&rc[r]);
    bad += res->rc[r] != 0;
  }
  for (int k = 0; k < o->spare; k++) {
    pthread_join(spare[k].th, NULL);
    if (spare[k].rc < 0 && !bad)
      fprintf(stderr, "harness: spare server %d: %s\n", k, spare[k].e.msg);
    bad += spare[k].rc < 0 && !bad;
  }
  return bad ? -1 : 0;
}

static int read_all(int fd, void *buf, size_t len, int timeout_ms) {
  char *p = buf;
  while (len > 0) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, timeout_ms) <= 0) return -1;
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int run_procs(const job_opts *o, job_result *res) {
  REQUIRE(o->world <= MAXW, "world %d", o->world);
  int up[2], down[MAXW][2], epup[MAXW][2];
  REQUIRE(pipe(up) == 0, "pipe");
  pid_t pid[MAXW];
  fflush(NULL);
  for (int r = 0; r < o->world; r++) {
    REQUIRE(pipe(down[r]) == 0 && pipe(epup[r]) == 0, "pipe");
    pid[r] = fork();
    REQUIRE(pid[r] >= 0, "fork");
    if (pid[r] == 0) {
      rank_ctx rc;
      rank_init(&rc, o, res, r);
      gs_err e = {0};
      char ep[GS_ENDPOINT_MAX] = "";
      int code = gs_ps_backend.prepare(&rc.cfg, &rc.state, ep, &e);
      /* every rank's endpoint goes up, and all of them come down first */
      static char eps[MAXW][GS_ENDPOINT_MAX];
      static const char *epp[MAXW];
      if (write(epup[r][1], ep, sizeof ep) != (ssize_t)sizeof ep) code = -1;
      close(epup[r][1]);
      for (int q = 0; code == 0 && q < o->world; q++) {
        if (read_all(down[r][0], eps[q], GS_ENDPOINT_MAX, 30000) < 0)
          code = GS_FAIL(&e, GS_EIO, "no endpoints from the test");
        epp[q] = eps[q];
      }
      rc.cfg.endpoints = epp;
      if (code == 0 && r == 0) {
        code = gs_ps_backend.bootstrap(rc.state, &rc.cfg, rc.blob, &rc.blob_len, &e);
        uint32_t l = code == 0 ? (uint32_t)rc.blob_len : 0;
        if (write(up[1], &l, sizeof l) != sizeof l || write(up[1], rc.blob, l) != (ssize_t)l)
          code = -1;
      } else if (code == 0) {
        uint32_t l = 0;
        if (read_all(down[r][0], &l, sizeof l, 30000) < 0 || l == 0 || l > GS_BOOTSTRAP_MAX ||
            read_all(down[r][0], rc.blob, l, 30000) < 0)
          code = GS_FAIL(&e, GS_EIO, "no bootstrap blob from the test");
        rc.blob_len = l;
      }
      if (code < 0) {
        if (rc.state) gs_ps_backend.discard(rc.state);
        record_fail(&rc, code, &e);
        _exit(1);
      }
      code = rank_run(&rc);
      rank_free(&rc);
      _exit(code == 0 ? 0 : 1);
    }
    close(down[r][0]);
    close(epup[r][1]);
  }
  static char eps[MAXW][GS_ENDPOINT_MAX];
  for (int r = 0; r < o->world; r++)
    if (read_all(epup[r][0], eps[r], GS_ENDPOINT_MAX, 30000) < 0)
      memset(eps[r], 0, GS_ENDPOINT_MAX);
  for (int r = 0; r < o->world; r++) {
    close(epup[r][0]);
    for (int q = 0; q < o->world; q++)
      if (write(down[r][1], eps[q], GS_ENDPOINT_MAX) < 0) break;
  }
  uint32_t l = 0;
  char blob[GS_BOOTSTRAP_MAX];
  if (read_all(up[0], &l, sizeof l, 30000) == 0 && l > 0 && l <= GS_BOOTSTRAP_MAX &&
      read_all(up[0], blob, l, 30000) == 0) {
    for (int r = 1; r < o->world; r++)
      if (write(down[r][1], &l, sizeof l) < 0 || write(down[r][1], blob, l) < 0) break;
  }
  for (int r = 0; r < o->world; r++) close(down[r][1]);
  close(up[0]);
  close(up[1]);
  /* Nothing may hang: every rank must be gone within the deadline. Every
   * rank is reaped as soon as it ends, as a launcher does: a rank that
   * waits for a dead one's process to be gone must not see a zombie. */
  double deadline = gs_now() + 4.0 * o->timeout_ms / 1000.0 + 20.0;
  int bad = 0, status[MAXW] = {0};
  bool done[MAXW] = {false};
  for (int left = o->world; left > 0 && gs_now() < deadline;) {
    for (int r = 0; r < o->world; r++)
      if (!done[r] && waitpid(pid[r], &status[r], WNOHANG) == pid[r]) {
        done[r] = true;
        left--;
      }
    struct timespec ts = {0, 5000000};
    if (left > 0) nanosleep(&ts, NULL);
  }
  for (int r = 0; r < o->world; r++) {
    int st = status[r];
    if (!done[r]) {
      fprintf(stderr, "harness: rank %d hung; killing it\n", r);
      kill(pid[r], SIGKILL);
      waitpid(pid[r], &st, 0);
      res->rc[r] = -1000;
      bad++;
      continue;
    }
    if (WIFSIGNALED(st) && res->rc[r] == 0) res->rc[r] = -2000 - WTERMSIG(st);
    if (WIFEXITED(st) && WEXITSTATUS(st) != 0 && res->rc[r] == 0) res->rc[r] = -1;
    bad += res->rc[r] != 0;
  }
  return bad ? -1 : 0;
}

/* ------------------------------------------------------------ reference */

void reference(const job_opts *o, float *ref, bool *skipped, float *scales) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  REQUIRE(k, "kernels");
  size_t n = o->n;
  int nb;
  gs_bucket *bk;
  if (o->buckets) {
    nb = o->nbuckets;
    bk = malloc((size_t)nb * sizeof *bk);
    memcpy(bk, o->buckets, (size_t)nb * sizeof *bk);
  } else {
    bk = plan_buckets(n, o->bucket_elems, &nb);
  }
  /* the server's fp32 master; what workers hold after a step is the master
   * itself (fp32 wire) or the master rounded through the wire dtype, the
   * dtype the parameters travel in (fp16 / bf16 training) */
  float *p = malloc(n * sizeof(float));
  make_params(o, 0, p);
  memcpy(ref, p, n * sizeof(float));
  float *g = malloc(n * sizeof(float)), *acc = malloc(n * sizeof(float));
  float *hs = malloc(n * sizeof(float));
  int L = o->host_ranks > 1 ? o->host_ranks : 1;
  float *mom = calloc(n, sizeof(float));
  uint16_t *lp = malloc(n * sizeof(uint16_t));
  gs_scaler sc = o->scaler;
  bool scaling = !o->sum_only && (o->wire != GS_F32 || sc.dynamic || sc.scale != 1.0f);
  bool started = false;
  for (int step = 0; step < o->steps; step++) {
    float *q = p, *out = ref + (size_t)(step + 1) * n;
    scales[step] = sc.scale;
    /* sum in rank order, bucket by bucket, as the server does */
    for (int r = 0; r < o->world; r++) {
      make_grads(o, r, step, sc.scale, g);
      /* ps/hostagg.c: the host's fp32 sum in rank order is what its first
       * rank pushes, the hosts in order (the flat ps: each rank's own) */
      const float *push = g;
      int pusher = r;
      if (L > 1) {
        if (r % L == 0) memcpy(hs, g, n * sizeof(float));
        else k->add(k, n, hs, g);
        if (r % L != L - 1) continue;
        push = hs;
        pusher = r / L;
      }
      for (int b = 0; b < nb; b++) {
        size_t off = bk[b].offset, c = bk[b].count;
        const void *src = push + off;
        if (o->wire != GS_F32) {
          k->convert(k, o->wire, lp + off, GS_F32, push + off, c);
          src = lp + off;
        }
        if (pusher == 0) {
          if (o->wire == GS_F32) k->copy(k, acc + off, src, c * sizeof(float));
          else k->convert(k, GS_F32, acc + off, o->wire, src, c);
        } else if (o->wire == GS_F32) {
          k->add(k, c, acc + off, src);
        } else {
          k->add_lp(k, o->wire, c, acc + off, src);
        }
      }
    }
    skipped[step] = false;
    if (o->sum_only) {
      memcpy(q, acc, n * sizeof(float));
    } else if (!scaling) {
      for (int b = 0; b < nb; b++) {
        size_t off = bk[b].offset, c = bk[b].count;
        if (o->world > 1) k->scale(k, c, 1.0f / (float)o->world, acc + off);
        k->sgd(k, c, q + off, acc + off, o->sgd.momentum != 0.0f ? mom + off : NULL, o->sgd,
               !started);
      }
      started = true;
    } else {
      /* the server's formula for the unscale factor */
      float inv = (float)(1.0 / ((double)o->world * (double)sc.scale));
      size_t bad = 0;
      for (int b = 0; b < nb; b++) {
        if (o->wire != GS_F32) { /* the sum must fit the wire dtype, as in the ring */
          k->convert(k, o->wire, lp, GS_F32, acc + bk[b].offset, bk[b].count);
          bad += k->nonfinite(k, o->wire, bk[b].count, lp);
        }
        k->scale(k, bk[b].count, inv, acc + bk[b].offset);
        bad += k->nonfinite(k, GS_F32, bk[b].count, acc + bk[b].offset);
      }
      skipped[step] = gs_scaler_update(&sc, bad > 0);
      if (!skipped[step]) {
        for (int b = 0; b < nb; b++) {
          size_t off = bk[b].offset, c = bk[b].count;
          k->sgd(k, c, q + off, acc + off, o->sgd.momentum != 0.0f ? mom + off : NULL, o->sgd,
                 !started);
        }
        started = true;
      }
    }
    if (skipped[step]) {
      /* nothing was sent: workers keep what they had */
      memcpy(out, out - n, n * sizeof(float));
    } else if (o->wire != GS_F32 && !o->sum_only) {
      k->convert(k, o->wire, lp, GS_F32, p, n);
      k->convert(k, GS_F32, out, o->wire, lp, n);
    } else {
      memcpy(out, p, n * sizeof(float));
    }
  }
  free(p);
  free(g);
  free(acc);
  free(hs);
  free(mom);
  free(lp);
  free(bk);
  k->destroy(k);
}

void push_env(Gradsync__Envelope *env, Gradsync__Push *p, uint64_t job, uint32_t rank,
                     uint64_t step, uint32_t bucket, uint64_t off, uint64_t cnt) {
  gs_wire_env(env, job, rank);
  gradsync__push__init(p);
  p->step = step;
  p->bucket = bucket;
  p->offset = off;
  p->count = cnt;
  p->dtype = GRADSYNC__DTYPE__F32;
  env->body_case = GRADSYNC__ENVELOPE__BODY_PUSH;
  env->push = p;
}

void push_send(void *s, const Gradsync__Envelope *env, const void *payload, size_t bytes) {
  uint8_t h[256];
  zmq_send(s, h, gradsync__envelope__pack(env, h), ZMQ_SNDMORE);
  zmq_send(s, payload, bytes, 0);
}

void wire_rank0_config(wire_rank0 *z, gs_kernels *k, uint64_t job, size_t n,
                       const gs_bucket *bk, int nb, float lr, int steps) {
  memset(z, 0, sizeof *z);
  float *params = k->alloc(k, n * sizeof(float)), *grads = k->alloc(k, n * sizeof(float));
  REQUIRE(params && grads, "allocating %zu parameters", n);
  memset(params, 0, n * sizeof(float));
  memset(grads, 0, n * sizeof(float));
  gs_sync_config *c = &z->cfg;
  c->rank = 0;
  c->world = 2;
  c->timeout_ms = 1500;
  c->job = job;
  c->host = "127.0.0.1";
  c->k = k;
  c->params = params;
  c->grads = grads;
  c->n = n;
  c->buckets = bk;
  c->nbuckets = nb;
  c->sgd = (gs_sgd){lr, 0.0f, 0.0f};
  c->wire = GS_F32;
  gs_scaler_init(&c->scaler, 1.0f, false);
  gs_compress_default(&c->compress);
  z->steps_wanted = steps;
}

void wire_rank0_prepare(wire_rank0 *z) {
  gs_err e = {0};
  size_t len;
  REQUIRE(gs_ps_backend.prepare(&z->cfg, &z->state, z->ep, &e) == 0, "prepare: %s", e.msg);
  REQUIRE(gs_ps_backend.bootstrap(z->state, &z->cfg, z->blob, &len, &e) == 0, "bootstrap: %s",
          e.msg);
  z->cfg.bootstrap = z->blob;
  z->cfg.bootstrap_len = len;
}

void *wire_rank0_main(void *arg) {
  wire_rank0 *z = arg;
  gs_sync *s = NULL;
  z->rc = gs_ps_backend.open(z->state, &z->cfg, &s, &z->e);
  for (int step = 0; z->rc == 0 && step < z->steps_wanted; step++) {
    z->rc = s->ops->begin_step(s, step, &z->e);
    for (int b = 0; z->rc == 0 && b < z->cfg.nbuckets; b++)
      z->rc = s->ops->bucket_ready(s, b, &z->e);
    gs_sync_stats st;
    if (z->rc == 0) z->rc = s->ops->end_step(s, &st, &z->e);
    if (z->rc == 0) z->steps++;
  }
  if (s) s->ops->close(s, z->rc == 0, NULL);
  return NULL;
}

void *wire_raw_join(void *zctx, const wire_rank0 *z) {
  gs_err e = {0};
  void *s = zmq_socket(zctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  static const gs_cred job_cred;
  REQUIRE(gs_cred_connect(s, &job_cred, z->blob, &e) == 0, "connect %s: %s", z->blob, e.msg);
  uint8_t h[256];
  Gradsync__Envelope env;
  Gradsync__Hello hello = GRADSYNC__HELLO__INIT;
  gs_wire_env(&env, z->cfg.job, 1);
  hello.count = z->cfg.n;
  hello.nbuckets = (uint32_t)z->cfg.nbuckets;
  env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
  env.hello = &hello;
  zmq_send(s, h, gradsync__envelope__pack(&env, h), 0);
  return s;
}

static void expect_failed(const wire_rank0 *z, void *s, double dt, const char *what,
                          const char *needle) {
  /* rank 0 stops in step 1, or still in step 0: the in-process server may
   * abort it before it has read step 0's parameters */
  CHECK(z->rc != 0 && z->steps <= 1, "%s: rank 0 did not fail by step 1 (rc %d, %d steps)",
        what, z->rc, z->steps);
  CHECK(strstr(z->e.msg, needle), "%s: rank 0's error does not say '%s': %s", what, needle,
        z->e.msg);
  CHECK(strstr(z->e.msg, "rank 1") && strstr(z->e.msg, "step 1") && strstr(z->e.msg, "bucket 0"),
        "%s: the error does not name rank 1, step 1, bucket 0: %s", what, z->e.msg);
  CHECK(dt < 1.4, "%s: rank 0 took %.2f s to stop", what, dt);
  bool error = false;
  for (int i = 0; i < 8 && !error; i++) {
    gs_wire_msg m;
    gs_err e = {0};
    int rc = gs_wire_recv(s, false, 3000, z->cfg.job, 1 << 24, &m, &e);
    error = rc == 0 && m.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR;
    gs_wire_msg_close(&m);
    if (rc == GS_ETIMEOUT) break;
  }
  CHECK(error, "%s: the raw rank 1 got no Error", what);
  printf("ok: %-28s -> %s\n", what, z->e.msg);
}

void wire_finish(wire_rank0 *z, pthread_t th, void *s, const char *what, const char *needle) {
  if (!needle) {
    uint8_t h[256];
    Gradsync__Envelope env;
    Gradsync__Shutdown sd = GRADSYNC__SHUTDOWN__INIT;
    sd.reason = (char *)"done";
    gs_wire_env(&env, z->cfg.job, 1);
    env.body_case = GRADSYNC__ENVELOPE__BODY_SHUTDOWN;
    env.shutdown = &sd;
    zmq_send(s, h, gradsync__envelope__pack(&env, h), 0);
  }
  double t0 = gs_now();
  pthread_join(th, NULL);
  double dt = gs_now() - t0;
  if (!needle)
    CHECK(z->rc == 0 && z->steps == z->steps_wanted, "%s: rank 0 failed (%d steps): %s", what,
          z->steps, z->e.msg);
  else
    expect_failed(z, s, dt, what, needle);
  zmq_close(s);
  gs_kernels *k = z->cfg.k;
  k->release(k, z->cfg.params);
  k->release(k, z->cfg.grads);
  k->destroy(k);
}
