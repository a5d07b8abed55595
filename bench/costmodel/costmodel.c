/* costmodel.c: the cost model's core: validate a job, the bytes every host link
 * carries, and the time of one step (costmodel.h; formulas in docs/model.md).
 *
 * A step is scheduled bucket by bucket. Each mode turns a bucket of s bytes
 * into a short chain of stages (push, server work, pull for the parameter
 * servers; one all-reduce for ring and recursive doubling); each stage
 * occupies one resource (a link direction, a server's processor, the ring)
 * for a time and may add a lag that occupies nothing (propagation delay,
 * the worker's copy of what arrived). Bucket i is released when backward
 * has produced it (with overlap) or when backward ends (without). Each
 * resource serves one stage at a time, in readiness order, as a backend's
 * progress thread takes buckets in order. The step ends when the last
 * stage of every bucket has ended and its lag passed, plus what every rank
 * does afterwards (ring: optimizer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"
#include "worker/sync.h"

static const char *const mode_names[GS_CM_NMODES] = {"ps", "ring", "rd", "sps-colo",
                                                     "sps-hosts", "byteps"};

const char *gs_cm_mode_name(gs_cm_mode m) {
  return (unsigned)m < GS_CM_NMODES ? mode_names[m] : "unknown";
}

int gs_cm_mode_parse(const char *s, gs_cm_mode *out, gs_err *e) {
  for (int i = 0; s && i < GS_CM_NMODES; i++)
    if (!strcmp(s, mode_names[i])) {
      *out = (gs_cm_mode)i;
      return GS_OK;
    }
  return GS_FAIL(e, GS_EINVAL,
                 "cost model: unknown mode '%s' (known: ps, ring, rd, sps-colo, sps-hosts, "
                 "byteps)",
                 s ? s : "(null)");
}

static const char *const bottleneck_names[GS_CM_B_COUNT] = {
    "compute",          "master link",         "master reduction", "ring latency term",
    "ring bandwidth term", "ring reduction",   "rd latency term",  "rd bandwidth term",
    "rd reduction",     "host link",           "server link",      "worker link",
    "server reduction", "optimizer",      "compression"};

const char *gs_cm_bottleneck_name(gs_cm_bottleneck b) {
  return (unsigned)b < GS_CM_B_COUNT ? bottleneck_names[b] : "unknown";
}

/* ---- validation ---- */

static int check_rate(const char *name, double v, gs_err *e) {
  if (!isfinite(v) || v <= 0)
    return GS_FAIL(e, GS_EINVAL, "cost model: %s = %g: must be a positive finite rate", name, v);
  return GS_OK;
}

static int check_time(const char *name, double v, gs_err *e) {
  if (!isfinite(v) || v < 0)
    return GS_FAIL(e, GS_EINVAL, "cost model: %s = %g: must be a finite time >= 0", name, v);
  return GS_OK;
}

int gs_cm_machine_check(const gs_cm_machine *m, gs_err *e) {
  GS_TRY(check_rate("link rate (bytes/s)", m->link_Bps, e));
  GS_TRY(check_time("link latency (s)", m->link_latency_s, e));
  GS_TRY(check_time("alpha, the per-message overhead (s)", m->alpha_s, e));
  GS_TRY(check_rate("same-host transport rate (bytes/s)", m->local_Bps, e));
  GS_TRY(check_rate("reduction rate (bytes/s)", m->reduce_Bps, e));
  GS_TRY(check_rate("copy rate (bytes/s)", m->copy_Bps, e));
  GS_TRY(check_rate("optimizer rate (parameters/s)", m->optim_pps, e));
  if (m->server_reduce_Bps != 0)
    GS_TRY(check_rate("summation servers' reduction rate (bytes/s)", m->server_reduce_Bps, e));
  return GS_OK;
}

static bool pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

static int ilog2(int v) {
  int l = 0;
  while (v > 1) {
    v >>= 1;
    l++;
  }
  return l;
}

static int check_job(const gs_cm_job *j, gs_err *e) {
  if ((unsigned)j->mode >= GS_CM_NMODES)
    return GS_FAIL(e, GS_EINVAL, "cost model: unknown mode %d (known: ps, ring, rd, sps-colo, "
                   "sps-hosts, byteps)", (int)j->mode);
  if (j->world < 1)
    return GS_FAIL(e, GS_EINVAL, "cost model: world %d: must be at least 1", j->world);
  if (j->hosts < 1 || j->hosts > j->world)
    return GS_FAIL(e, GS_EINVAL, "cost model: %d hosts for world %d: need 1 to %d hosts", j->hosts,
                   j->world, j->world);
  if (j->world % j->hosts)
    return GS_FAIL(e, GS_EINVAL,
                   "cost model: world %d does not split evenly over %d hosts (host-major "
                   "placement puts world/hosts ranks on every host): pick a world that is a "
                   "multiple of the hosts", j->world, j->hosts);
  if (j->mode == GS_CM_SPS_HOSTS && j->servers < 1)
    return GS_FAIL(e, GS_EINVAL, "cost model: sps-hosts with %d server hosts: need at least 1",
                   j->servers);
  double y, x;
  if (j->mode == GS_CM_BYTEPS &&
      gs_ps_spare_shares(j->hosts, j->servers, j->spare_share, &y, &x) < 0)
    return GS_FAIL(e, GS_EINVAL, "cost model: byteps with %d spare hosts beside %d hosts (a "
                   "spare share of %g): BytePS' split takes 0 to as many spare hosts as "
                   "workers' hosts, a share of at most 1/k", j->servers, j->hosts,
                   j->spare_share);
  if (j->mode == GS_CM_RD && (!pow2(j->world) || !pow2(j->world / j->hosts)))
    return GS_FAIL(e, GS_EINVAL,
                   "cost model: recursive doubling is modelled for powers of two only (world "
                   "%d, %d ranks per host)", j->world, j->world / j->hosts);
  if (j->batch < 1) return GS_FAIL(e, GS_EINVAL, "cost model: batch %d: must be at least 1", j->batch);
  GS_TRY(check_time("forward time per sample (s)", j->fwd_s, e));
  GS_TRY(check_time("backward time per sample (s)", j->bwd_s, e));
  const gs_cm_plan *p = j->plan;
  if (!p || !p->bytes || p->nbuckets < 1)
    return GS_FAIL(e, GS_EINVAL, "cost model: no bucket plan (the model has no gradients?)");
  if (p->elem_bytes < 1 || p->nparams < 1 || !(p->total > 0) || !isfinite(p->total))
    return GS_FAIL(e, GS_EINVAL, "cost model: the bucket plan is empty (%zu parameters, %g bytes)",
                   p->nparams, p->total);
  double prev = 0;
  for (int i = 0; j->ready && i < p->nbuckets; i++) {
    double r = j->ready[i];
    if (!(r >= prev && r <= 1))
      return GS_FAIL(e, GS_EINVAL, "cost model: readiness of bucket %d is %g: fractions of "
                     "backward must be in [0, 1] and non-decreasing", i, r);
    prev = r;
  }
  return GS_OK;
}

/* ---- bytes per link ---- */

int gs_cm_nhosts(const gs_cm_job *j) {
  return j->hosts + (j->mode == GS_CM_SPS_HOSTS || j->mode == GS_CM_BYTEPS ? j->servers : 0);
}

/* byteps: a spare server's and a workers' host server's shares */
static void byteps_shares(const gs_cm_job *j, double *spare, double *colo) {
  if (gs_ps_spare_shares(j->hosts, j->servers, j->spare_share, spare, colo) < 0)
    *spare = *colo = 0;
}

/* Hosts that reduce first look like hosts of one rank to the links. */
static bool host_reduces(const gs_cm_job *j) {
  return j->host_reduce && j->mode != GS_CM_RD && j->world > j->hosts;
}

static void link_bytes(const gs_cm_job *j, int host, double *in, double *out) {
  double N = j->world, K = j->hosts, n = N / K, S = j->plan->total;
  if (host_reduces(j)) N = K, n = 1;
  double v = 0;
  *in = *out = 0;
  if (j->world == 1) return;
  switch (j->mode) {
  case GS_CM_PS:
    v = host == 0 ? (N - n) * S : n * S;
    break;
  case GS_CM_RING:
    v = K > 1 ? 2 * (N - 1) / N * S : 0;
    break;
  case GS_CM_RD:
    v = ilog2(j->hosts) * n * S;
    break;
  case GS_CM_SPS_COLO:
    v = 2 * n * (K - 1) / K * S;
    break;
  case GS_CM_SPS_HOSTS:
    v = host < j->hosts ? n * S : N * S / j->servers;
    break;
  case GS_CM_BYTEPS: {
    /* a workers' host: its ranks' pieces for every other server and its own
     * server's answers to the other hosts' ranks, each way; a spare host:
     * every rank's piece of its share */
    double y, x;
    byteps_shares(j, &y, &x);
    v = host < j->hosts ? n * (1 - x) * S + (N - n) * x * S : N * y * S;
    break;
  }
  default:
    break;
  }
  if (j->mode != GS_CM_SPS_HOSTS && j->mode != GS_CM_BYTEPS && j->hosts == 1)
    v = 0;  /* all on loopback */
  *in = *out = v;
  if (j->mode == GS_CM_PS && j->push_bytes && v > 0) {  /* top-k, PowerSGD: the pushes shrink */
    double Sp = 0, Sb = 0;
    for (int b = 0; b < j->plan->nbuckets; b++) {
      Sp += (double)j->push_bytes[b];
      Sb += j->back_bytes ? (double)j->back_bytes[b] : 0;
    }
    *(host == 0 ? in : out) = v * Sp / S;
    *(host == 0 ? out : in) = v * (S + Sb) / S;  /* PowerSGD: the sums come back too */
  }
}

int gs_cm_link_bytes(const gs_cm_job *j, int host, double *in, double *out, gs_err *e) {
  *in = *out = 0;
  GS_TRY(check_job(j, e));
  if (host < 0 || host >= gs_cm_nhosts(j))
    return GS_FAIL(e, GS_EINVAL, "cost model: host %d: the job has hosts 0 to %d", host,
                   gs_cm_nhosts(j) - 1);
  link_bytes(j, host, in, out);
  return GS_OK;
}

/* ---- stages of one bucket ---- */

enum { MAXST = 3, MAXRES = 3 };

typedef struct stage {
  int res;
  double occ, lag;
} stage;

static int stages_of(gs_cm_mode m) {
  return m == GS_CM_RING || m == GS_CM_RD ? 1 : 3;
}

/* What a mode does with a plan: per-bucket stages and the totals that name
 * the bottleneck. */
typedef struct shape {
  int nst;
  bool barrier;          /* stage 1 waits for stage 0 of every bucket */
  double order[MAXST];   /* service order: stage k of bucket i comes at i + order[k] */
  stage *st;             /* nbuckets x nst */
  double post_s;         /* every rank after the last bucket (ring, rd: optimizer) */
  double lat, bw, reduce, opt;
  double cand[GS_CM_B_COUNT]; /* busy time per bottleneck candidate */
  gs_cm_bottleneck server_bottleneck;
} shape;

/* The parameter servers' chain for one bucket of s bytes: push over the
 * busiest path (wire + per-message costs), update a share of `share` bytes
 * (sum N pushes: N-1 additions and a copy, then the optimizer on its
 * parameters), pull back; `lag` is the link's propagation delay. */
static void server_chain(const gs_cm_machine *m, shape *sh, stage *st, int pull_res, double N,
                         double s, double el, double share, double push, double wire,
                         double msg, double lag, gs_cm_bottleneck link, double link_weight) {
  double red = (N - 1) * s / share / m->reduce_Bps, upd = el / share / m->optim_pps;
  st[0] = (stage){0, push + msg, lag};
  st[1] = (stage){1, red + s / share / m->copy_Bps + upd, 0};
  st[2] = (stage){pull_res, wire + msg, lag + s / m->copy_Bps};
  sh->lat += 2 * (msg + lag);
  sh->bw += push + wire;
  sh->reduce += red;
  sh->opt += upd;
  sh->cand[link] += link_weight * (wire + msg);
  sh->cand[sh->server_bottleneck] += st[1].occ;
}

/* build()'s byteps bucket of s bytes (local: its hosts' shared-memory sum),
 * N ranks of n per host between hosts, ax the latency a link adds. */
static void byteps_bucket(const gs_cm_machine *m, const gs_cm_job *j, shape *sh, stage *st,
                          double s, double local, double N, double n, double ax) {
  double b = m->link_Bps, al = m->alpha_s, L = m->local_Bps;
  double R = m->reduce_Bps, C = m->copy_Bps;
  /* a partition: its pushes and the answers share every link in both
   * directions, pipelined with the partitions before and after it, so
   * the links' resource is the busiest direction's bytes of both
   * phases; the busiest server sums N pieces of its share (a CPU's
   * rate); a spare host's answers of the last partition follow its
   * sum alone (the tail) */
  double y, x;
  byteps_shares(j, &y, &x);
  double Rs = m->server_reduce_Bps > 0 ? m->server_reduce_Bps : R;
  double wl = (n * (1 - x) + (N - n) * x) * s / (j->hosts > 1 ? b : L);
  double sl = j->servers > 0 ? N * y * s / b : 0, tp = fmax(wl, sl);
  double Kt = j->servers + (x > 0 ? j->hosts : 0), msg = fmax(N, Kt) * al;
  double big = fmax(x, y) * s, red = (N - 1) * big / Rs;
  double tail = j->servers > 0 && sl >= wl * (1 - 1e-9) ? sl : 0;
  st[0] = (stage){0, tp + msg + 2 * local, ax};
  st[1] = (stage){1, red + big / C, 0};
  st[2] = (stage){2, 0, tail + ax + s / C};
  sh->lat += 2 * (msg + ax);
  sh->bw += tp + tail;
  sh->reduce += red;
  sh->cand[wl >= sl * (1 + 1e-9) ? GS_CM_B_WORKER_LINK : GS_CM_B_SERVER_LINK] += tp + msg;
  sh->cand[GS_CM_B_SERVER_REDUCE] += st[1].occ;
}

static void build(const gs_cm_machine *m, const gs_cm_job *j, shape *sh) {
  const gs_cm_plan *p = j->plan;
  double N = j->world, K = j->hosts, n = N / K;
  /* hosts that reduce first: the n ranks' shared-memory sum (each sums
   * 1/n of n slots, copies in and out) before the hosts' exchange, the
   * same again to share the parameters (ps) or the result (ring: part of
   * the all-gather); between hosts, K ranks of one rank per host */
  double hn = host_reduces(j) ? n : 1;
  if (hn > 1) N = K, n = 1;
  double b = m->link_Bps, a = m->link_latency_s, al = m->alpha_s, L = m->local_Bps;
  double R = m->reduce_Bps, C = m->copy_Bps;
  double ax = j->hosts > 1 ? a : 0;  /* latency only where a link is crossed */
  sh->post_s = 0;
  sh->barrier = j->barrier && stages_of(j->mode) == 3;
  sh->server_bottleneck = j->mode == GS_CM_PS ? GS_CM_B_MASTER_REDUCE : GS_CM_B_SERVER_REDUCE;
  /* push, update, pull; on sps-colo's shared link a pull follows the next push */
  sh->order[0] = 0;
  sh->order[1] = j->mode == GS_CM_SPS_COLO ? 0.75 : 0.25;
  sh->order[2] = j->mode == GS_CM_SPS_COLO ? 1.5 : 0.5;
  for (int i = 0; i < p->nbuckets; i++) {
    double s = (double)p->bytes[i];
    double el = s / (double)p->elem_bytes;  /* parameters in this bucket */
    double local = hn > 1 ? (hn - 1) / hn * s / m->reduce_Bps + 2 * s / m->copy_Bps : 0;
    stage *st = sh->st + (size_t)i * (size_t)sh->nst;
    switch (j->mode) {
    case GS_CM_PS: {
      /* host 0 takes (N-n) pushes over its link and n-1 over loopback at
       * once; the master handles N-1 messages each way */
      double sb = j->back_bytes ? (double)j->back_bytes[i] : 0;  /* PowerSGD's sums */
      double wire = fmax(j->hosts > 1 ? (N - n) * (s + sb) / b : 0,
                         n > 1 ? (n - 1) * (s + sb) / L : 0);
      double sp = j->push_bytes ? (double)j->push_bytes[i] : s;  /* top-k: sparse pushes */
      double push = fmax(j->hosts > 1 ? (N - n) * sp / b : 0, n > 1 ? (n - 1) * sp / L : 0);
      double work = j->extra_s ? j->extra_s[i] : 0;  /* compressing, before the push */
      /* PowerSGD: Q leaves only after P's sum is back, a round trip more */
      if (sb > 0) work += 2 * ((N - 1) * al + ax);
      server_chain(m, sh, st, 2, N, s, el, 1, push + work + 2 * local, wire + 2 * local,
                   (N - 1) * al, ax, GS_CM_B_MASTER_LINK, 1);
      sh->bw -= work;
      sh->cand[GS_CM_B_COMPRESSION] += work;
      break;
    }
    case GS_CM_SPS_COLO: {
      /* every bucket spread over the K servers; a host's link carries its
       * workers' shares to remote servers and its server's share from
       * remote workers, in both phases: one resource for push and pull */
      double wire = fmax(j->hosts > 1 ? n * (K - 1) * (s / K) / b : 0, n * (s / K) / L);
      server_chain(m, sh, st, 0, N, s, el, K, wire + 2 * local, wire + 2 * local, N * al, ax,
                   GS_CM_B_HOST_LINK, 2);
      break;
    }
    case GS_CM_SPS_HOSTS: {
      /* workers push s each (n per worker host), each server host takes
       * N shares of s/servers; pushes and pulls use opposite directions */
      double Ks = j->servers, wl = n * s / b, sl = N * (s / Ks) / b;
      server_chain(m, sh, st, 2, N, s, el, Ks, fmax(wl, sl) + 2 * local,
                   fmax(wl, sl) + 2 * local, fmax(N, Ks) * al, a,
                   wl > sl ? GS_CM_B_WORKER_LINK : GS_CM_B_SERVER_LINK, 1);
      break;
    }
    case GS_CM_BYTEPS:
      byteps_bucket(m, j, sh, st, s, local, N, n, ax);
      break;
    case GS_CM_RING: {
      /* 2(N-1) steps of s/N bytes; each step waits for its slowest edge */
      double beta = fmax(j->hosts > 1 ? 1 / b : 0, n > 1 ? 1 / L : 0);
      double colls = j->collectives ? j->collectives[i] : 1;
      double lat = colls * 2 * (N - 1) * (al + ax), bw = 2 * (N - 1) * (s / N) * beta;
      double red = (N - 1) * (s / N) / R, cp = (N - 1) * (s / N) / C;
      double work = j->extra_s ? j->extra_s[i] : 0;  /* compressing, on the same thread */
      if (hn > 1) { /* the ring between hosts runs on 1/n of the bucket per local rank,
                       the n rings sharing the link */
        red = red / hn + local;
        cp /= hn;
      }
      st[0] = (stage){0, lat + bw + red + cp + work, 0};
      sh->cand[GS_CM_B_COMPRESSION] += work;
      sh->lat += lat;
      sh->bw += bw;
      sh->reduce += red;
      sh->cand[GS_CM_B_RING_LATENCY] += lat;
      sh->cand[GS_CM_B_RING_BANDWIDTH] += bw;
      sh->cand[GS_CM_B_RING_REDUCE] += red + cp;
      break;
    }
    case GS_CM_RD: {
      /* log2 N exchanges of the whole bucket: the first log2 n between
       * ranks of one host, the last log2 K across links, where the n ranks
       * of a host share its link */
      int cross = ilog2(j->hosts), intra = ilog2(j->world / j->hosts);
      double lat = (cross + intra) * al + cross * a;
      double bw = cross * n * s / b + intra * s / L;
      double red = (cross + intra) * s / R;
      st[0] = (stage){0, lat + bw + red, 0};
      sh->lat += lat;
      sh->bw += bw;
      sh->reduce += red;
      sh->cand[GS_CM_B_RD_LATENCY] += lat;
      sh->cand[GS_CM_B_RD_BANDWIDTH] += bw;
      sh->cand[GS_CM_B_RD_REDUCE] += red;
      break;
    }
    default:
      break;
    }
  }
  if (stages_of(j->mode) == 1 || j->mode == GS_CM_BYTEPS) {
    /* ring, rd, byteps: every rank's optimizer afterwards */
    sh->opt = (double)p->nparams / m->optim_pps;
    sh->post_s = sh->opt;
    sh->cand[GS_CM_B_OPTIMIZER] = sh->opt;
  }
}

/* One stage of one bucket in a resource's service order. */
typedef struct op {
  double key;
  int bucket, stage;
} op;

static int cmp_op(const void *a, const void *b) {
  const op *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->stage - y->stage;
}

/* Every resource serves its stages in a fixed order: buckets in readiness
 * order, and on a link that carries both pushes and pulls (sps-colo) the
 * pull of bucket i after the push of bucket i+1, so the link is not idle
 * while a server sums. With a barrier every push precedes every update.
 * A stage starts when its bucket's previous stage has ended (plus lag) and
 * its resource has served the stage before it. A fixed order makes the
 * step a max-plus function of the release times: releasing a bucket
 * earlier never makes the step later (a greedy order can). Returns when
 * the last bucket's data has arrived everywhere, or NAN without memory. */
static double schedule(const shape *sh, int nb, const double *release) {
  int nst = sh->nst, nops = nb * nst;
  op *ops = malloc((size_t)nops * sizeof *ops);
  double *avail = malloc((size_t)nb * sizeof *avail);
  if (!ops || !avail) {
    free(ops);
    free(avail);
    return NAN;
  }
  for (int i = 0; i < nb; i++)
    for (int k = 0; k < nst; k++)
      ops[i * nst + k] = (op){i + sh->order[k] + (sh->barrier && k > 0 ? nb : 0), i, k};
  qsort(ops, (size_t)nops, sizeof *ops, cmp_op);
  double free_at[MAXRES] = {0}, done = 0, pushed = 0;
  for (int i = 0; i < nb; i++) avail[i] = release[i];
  for (int o = 0; o < nops; o++) {
    int i = ops[o].bucket, k = ops[o].stage;
    const stage *s = &sh->st[(size_t)i * (size_t)nst + (size_t)k];
    double start = fmax(avail[i], free_at[s->res]);
    if (sh->barrier && k == 1) start = fmax(start, pushed);  /* every push is in */
    double end = start + s->occ;
    free_at[s->res] = end;
    avail[i] = end + s->lag;
    if (k == 0) pushed = fmax(pushed, avail[i]);
    if (k == nst - 1) done = fmax(done, avail[i]);
  }
  free(ops);
  free(avail);
  return done;
}

/* byteps: every bucket cut into its partitions (ps/split.c's cut: the
 * fewest of at most partition_bytes, near-equal), each ready with its
 * bucket; into xp (bytes) and *ready (owned by the caller). */
static int partitions(const gs_cm_job *j, gs_cm_plan *xp, double **ready, gs_err *e) {
  const gs_cm_plan *p = j->plan;
  double P = (double)gs_ps_partition_bytes(j->partition_bytes, p->total);
  *xp = *p;
  xp->ntensors = 0;
  xp->first_tensor = NULL;
  xp->tensor_macs = NULL;
  double *rel = calloc((size_t)p->nbuckets, sizeof *rel);
  int n = 0;
  for (int i = 0; i < p->nbuckets; i++) n += (int)ceil((double)p->bytes[i] / P);
  xp->bytes = calloc((size_t)n, sizeof *xp->bytes);
  *ready = calloc((size_t)n, sizeof **ready);
  if (!rel || !xp->bytes || !*ready) {
    free(rel);
    free(xp->bytes);
    free(*ready);
    return GS_FAIL(e, GS_ENOMEM, "cost model: out of memory for %d partitions", n);
  }
  gs_cm_ready_by_bytes(p, rel);
  xp->nbuckets = 0;
  for (int i = 0; i < p->nbuckets; i++) {
    int m = (int)ceil((double)p->bytes[i] / P);
    for (int k = 0; k < m; k++) {
      (*ready)[xp->nbuckets] = j->ready ? j->ready[i] : rel[i];
      xp->bytes[xp->nbuckets++] = p->bytes[i] * (size_t)(k + 1) / (size_t)m -
                                  p->bytes[i] * (size_t)k / (size_t)m;
    }
  }
  free(rel);
  return GS_OK;
}

static int predict(const gs_cm_machine *m, const gs_cm_job *j, gs_cm_result *r, gs_err *e);

int gs_cm_predict(const gs_cm_machine *m, const gs_cm_job *j, gs_cm_result *r, gs_err *e) {
  memset(r, 0, sizeof *r);
  GS_TRY(gs_cm_machine_check(m, e));
  GS_TRY(check_job(j, e));
  if (j->mode != GS_CM_BYTEPS || j->world == 1) return predict(m, j, r, e);
  gs_cm_job x = *j;
  gs_cm_plan xp;
  double *ready = NULL;
  GS_TRY(partitions(j, &xp, &ready, e));
  x.plan = &xp;
  x.ready = ready;
  int rc = predict(m, &x, r, e);
  free(xp.bytes);
  free(ready);
  return rc;
}

static int predict(const gs_cm_machine *m, const gs_cm_job *j, gs_cm_result *r, gs_err *e) {
  const gs_cm_plan *p = j->plan;
  int nb = p->nbuckets;
  double F = j->batch * j->fwd_s, G = j->batch * j->bwd_s;
  double P = (double)p->nparams;
  r->mode = j->mode;
  r->world = j->world;
  r->hosts = j->hosts;
  r->ranks_per_host = j->world / j->hosts;
  double sy = 0, sx = 0;
  if (j->mode == GS_CM_BYTEPS) byteps_shares(j, &sy, &sx);
  r->servers = j->mode == GS_CM_SPS_HOSTS ? j->servers : j->mode == GS_CM_SPS_COLO ? j->hosts
             : j->mode == GS_CM_BYTEPS ? j->servers + (sx > 0 ? j->hosts : 0)
             : j->mode == GS_CM_PS ? 1 : 0;
  r->overlap = j->overlap;
  r->grad_bytes = p->total;
  r->compute_s = F + G;
  double step1 = F + G + P / m->optim_pps;  /* world 1: the local backend */
  if (j->world == 1) {
    r->optimizer_s = P / m->optim_pps;
    r->step_s = step1;
    r->samples_per_s = j->batch / step1;
    r->efficiency = 1;
    r->bottleneck = GS_CM_B_COMPUTE;
    return GS_OK;
  }
  bool spare_hosts = j->mode == GS_CM_SPS_HOSTS || (j->mode == GS_CM_BYTEPS && j->servers > 0);
  link_bytes(j, spare_hosts ? j->hosts : 0, &r->hot_in, &r->hot_out);
  int worker_host = j->mode == GS_CM_PS && j->hosts > 1 ? 1 : 0;
  link_bytes(j, worker_host, &r->worker_in, &r->worker_out);

  shape sh = {.nst = stages_of(j->mode)};
  sh.st = calloc((size_t)nb * (size_t)sh.nst, sizeof *sh.st);
  double *rel = calloc((size_t)nb, sizeof *rel);
  double *zero = calloc((size_t)nb, sizeof *zero);
  if (!sh.st || !rel || !zero) {
    free(sh.st);
    free(rel);
    free(zero);
    return GS_FAIL(e, GS_ENOMEM, "cost model: out of memory for %d buckets", nb);
  }
  build(m, j, &sh);
  gs_cm_ready_by_bytes(p, rel);
  for (int i = 0; i < nb; i++) {
    double frac = j->ready ? j->ready[i] : rel[i];
    rel[i] = j->overlap ? F + G * fmin(frac, 1.0) : F + G;
  }
  double d0 = schedule(&sh, nb, zero);
  double d = schedule(&sh, nb, rel);
  free(sh.st);
  free(rel);
  free(zero);
  if (!isfinite(d0) || !isfinite(d))
    return GS_FAIL(e, GS_ENOMEM, "cost model: out of memory scheduling %d buckets", nb);

  r->comm_s = d0;
  r->exposed_s = fmax(d - (F + G), 0);
  r->reduce_s = sh.reduce;
  r->optimizer_s = sh.opt;
  r->step_s = fmax(d, F + G) + sh.post_s;
  r->samples_per_s = j->world * j->batch / r->step_s;
  r->efficiency = step1 / r->step_s;
  r->latency_s = sh.lat;
  r->bandwidth_s = sh.bw;
  double hot = fmax(fmax(r->hot_in, r->hot_out), fmax(r->worker_in, r->worker_out));
  bool links = j->hosts > 1 || spare_hosts;
  r->link_busy = links ? fmin(hot / m->link_Bps / r->step_s, 1.0) : 0;
  r->link_s = links ? hot / m->link_Bps : 0;
  sh.cand[GS_CM_B_COMPUTE] = F + G;
  r->bottleneck = GS_CM_B_COMPUTE;
  for (int c = 1; c < GS_CM_B_COUNT; c++)
    if (sh.cand[c] > sh.cand[r->bottleneck]) r->bottleneck = (gs_cm_bottleneck)c;
  return GS_OK;
}

/* ---- JSON of one row ---- */

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *gs_cm_result_json(const gs_cm_result *r) {
  json_t *j = json_object();
  json_object_set_new(j, "mode", json_string(gs_cm_mode_name(r->mode)));
  json_object_set_new(j, "world", json_integer(r->world));
  json_object_set_new(j, "hosts", json_integer(r->hosts));
  json_object_set_new(j, "ranks_per_host", json_integer(r->ranks_per_host));
  json_object_set_new(j, "servers", json_integer(r->servers));
  json_object_set_new(j, "overlap", json_boolean(r->overlap));
  json_object_set_new(j, "gradient_bytes", num(r->grad_bytes));
  json_object_set_new(j, "busiest_link_in_bytes", num(r->hot_in));
  json_object_set_new(j, "busiest_link_out_bytes", num(r->hot_out));
  json_object_set_new(j, "worker_link_in_bytes", num(r->worker_in));
  json_object_set_new(j, "worker_link_out_bytes", num(r->worker_out));
  json_object_set_new(j, "compute_s", num(r->compute_s));
  /* what a run's comm_wait_s measures: the communication the step waits for */
  json_object_set_new(j, "comm_s_predicted", num(r->exposed_s));
  json_object_set_new(j, "comm_s_without_overlap", num(r->comm_s));
  json_object_set_new(j, "reduce_s", num(r->reduce_s));
  json_object_set_new(j, "optimizer_s", num(r->optimizer_s));
  json_object_set_new(j, "latency_term_s", num(r->latency_s));
  json_object_set_new(j, "bandwidth_term_s", num(r->bandwidth_s));
  json_object_set_new(j, "step_s_predicted", num(r->step_s));
  json_object_set_new(j, "samples_per_s_predicted", num(r->samples_per_s));
  json_object_set_new(j, "scaling_efficiency_predicted", num(r->efficiency));
  json_object_set_new(j, "busiest_link_one_way_busy", num(r->link_busy));
  json_object_set_new(j, "link_s", num(r->link_s));
  json_object_set_new(j, "bottleneck", json_string(gs_cm_bottleneck_name(r->bottleneck)));
  return j;
}
