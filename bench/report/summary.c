/* summary.c: one run's measurements -> its metrics (report.h). Pure: no
 * I/O, no clock, no globals; the same rows give the same summary.
 *
 * Definitions (every report uses these):
 *   step time of rank r   batch start to parameters updated (row.step_s);
 *   a step's time         the max over ranks;
 *   throughput            global samples / sum of step times, over the
 *                         steps after --warmup;
 *   busy                  compute (data + forward + backward) + reduction
 *                         + optimizer; idle = step time - busy - wait;
 *   load imbalance        max over ranks of mean busy / mean of mean busy;
 *   master traffic share  the master's bytes sent + received / everyone's
 *                         (the master: rank 0, or a dedicated ps server);
 *   cost model bytes      S = parameters x wire dtype size; per step the ps
 *                         master moves (N-1)S in and out (N.S if dedicated),
 *                         a ps worker S; with K servers a rank that hosts one
 *                         (N+K-2)/K.S (its server's (N-1)S/K and its worker's
 *                         (K-1)S/K), the others S; with servers of their
 *                         own a server N.S/K, every rank S; a ring rank
 *                         2(N-1)/N.S each way. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"
#include "ps/ps.h"

void gs_run_id(const gs_run_info *info, char *buf, size_t cap) {
  char model[128];
  snprintf(model, sizeof model, "%s", info->model);
  for (char *p = model; *p; p++)
    if (*p == ':' || *p == '/' || *p == ',' || *p == ' ') *p = '_';
  char servers[24] = "";
  if (info->ps_servers > 1 || info->ps_server_hosts)
    snprintf(servers, sizeof servers, "-s%d%s", info->ps_servers,
             info->ps_server_hosts ? "own" : "");
  if (info->ps_summation) snprintf(servers, sizeof servers, "-spare%d", info->ps_spare);
  char sync[48] = "", rep[24] = "";
  if (gs_ps_sync_stale(&info->ps_sync)) {
    sync[0] = '-';
    gs_ps_sync_text(&info->ps_sync, sync + 1, sizeof sync - 1);
    for (char *p = sync; *p; p++)
      if (*p == ':' || *p == '+') *p = '_';
  }
  if (info->ring_period > 1) snprintf(sync, sizeof sync, "-period%d", info->ring_period);
  if (info->repeats > 1) snprintf(rep, sizeof rep, "-r%d", info->repeat);
  snprintf(buf, cap, "%s%s-w%d-%s-b%d-bk%g%s%s%s%s", gs_mode_name(info->mode), servers,
           info->world, model, info->batch, info->bucket_mb, info->dedicated ? "-dedicated" : "",
           info->precision != GS_F32 ? (info->precision == GS_F16 ? "-fp16" : "-bf16") : "", sync,
           rep);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* linear interpolation between the closest ranks, as numpy's default */
static double quantile(const double *sorted, size_t n, double q) {
  if (n == 0) return 0;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double f = pos - (double)i;
  return i + 1 < n ? sorted[i] * (1 - f) + sorted[i + 1] * f : sorted[i];
}

/* sums over the measured steps, divided into means at the end */
typedef struct rank_sum {
  double compute, wait, reduce, update, busy, idle, data, forward, backward;
  double sent, recv;
  uint64_t rss;
} rank_sum;

typedef struct server_sum {
  bool seen;
  double reduce, update, sent, recv;
} server_sum;

static void cost_model(const gs_run_info *info, gs_cost_model *cm) {
  int N = info->world;
  double S = (double)info->nparams * (double)gs_dtype_size(info->wire), D = 0, back = 0;
  /* compressed steps send what compression leaves (a mean over the steps) */
  for (int b = 0; info->compressed_bytes && b < info->nbuckets; b++) {
    D += info->compressed_share * ((double)info->compressed_bytes[b] -
                                   (double)info->bucket_bytes[b]);
    back += info->compressed_share * (double)info->compressed_bytes[b];
  }
  /* ps: the pushes (Sp) shrink, the parameters come back dense (and, with
   * PowerSGD, the pushes' sums before them) */
  double Sp = S + D;
  if (!info->compressed_push) S = Sp;
  cm->S_bytes = S;
  double Sd = info->compressed_sums_back ? S + back : S;
  if (info->mode == GS_MODE_PS && info->dedicated) {
    cm->master_bytes_recv = N * Sp;
    cm->master_bytes_sent = N * Sd;
    cm->worker_bytes_recv = Sd;
    cm->worker_bytes_sent = Sp;
  } else if (info->mode == GS_MODE_PS && info->ps_summation) {
    /* BytePS: a rank's pieces for every other server and its host's server's
     * answers (one rank per host); the busiest server a spare host's */
    double y = 0, x = 0;
    int n = info->hosts > 0 ? info->hosts : N;
    if (gs_ps_spare_shares(n, info->ps_spare, info->ps_spare_share, &y, &x) < 0) y = x = 0;
    cm->worker_bytes_recv = cm->worker_bytes_sent = ((1 - x) + (N - 1) * x) * S;
    cm->master_bytes_recv = cm->master_bytes_sent = info->ps_spare > 0 ? N * y * S
                                                    : cm->worker_bytes_sent;
  } else if (info->mode == GS_MODE_PS && info->ps_server_hosts) {
    cm->master_bytes_recv = cm->master_bytes_sent = N * S / info->ps_servers;
    cm->worker_bytes_recv = cm->worker_bytes_sent = S;
  } else if (info->mode == GS_MODE_PS && info->ps_servers > 1) {
    cm->master_bytes_recv = cm->master_bytes_sent = (N + info->ps_servers - 2) * S /
                                                     info->ps_servers;
    cm->worker_bytes_recv = cm->worker_bytes_sent = S;
  } else if (info->mode == GS_MODE_PS) {
    cm->master_bytes_recv = (N - 1) * Sp;
    cm->master_bytes_sent = (N - 1) * Sd;
    cm->worker_bytes_recv = N > 1 ? Sd : 0;
    cm->worker_bytes_sent = N > 1 ? Sp : 0;
  } else if (info->mode == GS_MODE_ALLREDUCE) {
    cm->master_bytes_recv = cm->master_bytes_sent = cm->worker_bytes_recv =
        cm->worker_bytes_sent = 2.0 * (N - 1) / N * S;
  }
}

static const char *formula(const gs_run_info *info) {
  if (info->mode == GS_MODE_PS && info->compressed_sums_back)
    return info->dedicated ? "ps PowerSGD, dedicated server: server receives N*S' (the parts) "
                             "and sends N*(S+S') (their sums, then the parameters), each worker "
                             "pushes S' and pulls S+S'"
                           : "ps PowerSGD, server in rank 0: rank 0 receives (N-1)*S' (the "
                             "parts) and sends (N-1)*(S+S') (their sums, then the parameters), "
                             "each worker pushes S' and pulls S+S'";
  if (info->mode == GS_MODE_PS && info->compressed_push)
    return info->dedicated ? "ps top-k, dedicated server: server receives N*S' (sparse pushes) "
                             "and sends N*S, each worker pushes S' and pulls S"
                           : "ps top-k, server in rank 0: rank 0 receives (N-1)*S' (sparse "
                             "pushes) and sends (N-1)*S, each worker pushes S' and pulls S";
  if (info->mode == GS_MODE_PS && info->dedicated)
    return "ps, dedicated server: server receives and sends N*S, each worker S (per step)";
  if (info->mode == GS_MODE_PS && info->ps_summation)
    return "BytePS' summation servers, k spare hosts: a workers' host sends and receives "
           "2n(n-1)/(n^2+kn-2k)*S, a spare host as much (n hosts of one rank)";
  if (info->mode == GS_MODE_PS && info->ps_server_hosts)
    return "sharded ps, K servers of their own: a server receives and sends N*S/K, each rank S";
  if (info->mode == GS_MODE_PS && info->ps_servers > 1)
    return "sharded ps, K servers in ranks k*N/K: a server's rank receives and sends "
           "(N+K-2)/K*S, each other rank S";
  if (info->mode == GS_MODE_PS)
    return "ps, server in rank 0: rank 0 receives and sends (N-1)*S, each worker S";
  if (info->mode == GS_MODE_ALLREDUCE && info->compress.kind == GS_COMPRESS_TOPK)
    return "ring top-k: an all-gather, every rank sends and receives (N-1)*P (P: a rank's "
           "payload; S = N*P/2 the all-reduce of as many bytes)";
  if (info->mode == GS_MODE_ALLREDUCE) return "ring: every rank sends and receives 2(N-1)/N*S";
  return "local: no communication";
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

static int cmp_span_start(const void *a, const void *b) {
  const gs_span *x = a, *y = b;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* a span of the backend's thread (track 1) that moves data: not a ps
 * server's optimizer, which also runs there */
static bool comm_span(const gs_span *s) {
  return s->track == 1 && strncmp(s->name, "optimizer", sizeof s->name);
}

/* The backend's communication (its thread's spans, track 1) that ran while
 * rank r computed (data, forward, backward) in each measured step: the
 * overlap, as a sum over the steps. Spans of one thread do not overlap
 * each other; both lists are walked once in time order. */
static double hidden_comm(const gs_rank_result *x, size_t first, size_t steps) {
  size_t n = 0;
  for (size_t i = 0; i < x->nspans; i++) n += comm_span(&x->spans[i]);
  gs_span *sp = n ? malloc(n * sizeof *sp) : NULL;
  if (!sp) return 0;
  n = 0;
  for (size_t i = 0; i < x->nspans; i++)
    if (comm_span(&x->spans[i])) sp[n++] = x->spans[i];
  qsort(sp, n, sizeof *sp, cmp_span_start);
  double sum = 0;
  size_t j = 0;
  for (size_t t = first; t < steps; t++) {
    const gs_step_row *row = &x->rows[t];
    double a = row->t_start, z = a + row->data_s + row->forward_s + row->backward_s;
    while (j < n && sp[j].t1 <= a) j++;
    for (size_t k = j; k < n && sp[k].t0 < z; k++) {
      double lo = sp[k].t0 > a ? sp[k].t0 : a, hi = sp[k].t1 < z ? sp[k].t1 : z;
      if (hi > lo) sum += hi - lo;
    }
  }
  free(sp);
  return sum;
}

/* Every rank delivered rows; the run's steps are the fewest any has. */
static int steps_of(const gs_run_info *info, const gs_rank_result *ranks, size_t *steps,
                    gs_err *e) {
  if (info->world < 1) return GS_FAIL(e, GS_EINVAL, "summary: world %d", info->world);
  *steps = SIZE_MAX;
  for (int r = 0; r < info->world; r++) {
    if (ranks[r].failed)
      return GS_FAIL(e, GS_EINVAL, "rank %d failed instead of reporting measurements: %s", r,
                     ranks[r].error);
    if (ranks[r].rank != r)
      return GS_FAIL(e, GS_EINVAL, "summary: measurements of rank %d in place of rank %d",
                     ranks[r].rank, r);
    if (ranks[r].nrows && !ranks[r].rows)
      return GS_FAIL(e, GS_EINVAL, "summary: rank %d has %zu rows and no data", r,
                     ranks[r].nrows);
    if (ranks[r].nrows < *steps) *steps = ranks[r].nrows;
  }
  return GS_OK;
}

int64_t gs_first_measured(int64_t warmup, int64_t steps) {
  return warmup >= 0 && warmup < steps ? warmup : 0;
}

/* One run's sums over its measured steps, and what the summary makes of
 * them before it divides them into means. */
typedef struct run_sums {
  size_t steps, first, m;   /* every rank's steps, the first measured, how many measured */
  double div;               /* m, or 1 when nothing was measured */
  double total_time, total_samples;
  int skipped;
  rank_sum *rs;             /* world entries */
  server_sum srv;
  double *sorted;           /* the measured steps' times, ascending */
  double busy_max, busy_mean, traffic_all, master_bytes, worker_bytes;
} run_sums;

/* The run's names and settings, as text the summary owns; false: out of
 * memory. */
static bool describe(const gs_run_info *info, gs_summary *s) {
  char id[512];
  gs_run_id(info, id, sizeof id);
  s->id = strdup(id);
  s->model = dup_or_empty(info->model);
  s->data = dup_or_empty(info->data);
  s->device = dup_or_empty(info->device);
  s->launcher = dup_or_empty(info->launcher ? info->launcher : "gradsync");
  s->algo = dup_or_empty(info->algo ? info->algo : "");
  s->run_id = dup_or_empty(info->run_id ? info->run_id : "");
  char slow[GS_SLOW_MAX * 8 + 32];
  gs_straggle_text(&info->straggle, slow, sizeof slow);
  s->slow = strdup(slow);
  s->jitter_cv = info->straggle.jitter_cv;
  char sync[48] = "";
  if (info->mode == GS_MODE_PS && info->world > 1)
    gs_ps_sync_text(&info->ps_sync, sync, sizeof sync);
  s->ps_sync = strdup(sync);
  s->ring_period = info->ring_period;
  char spec[32];
  s->compress = strdup(gs_compress_spec(&info->compress, spec, sizeof spec));
  s->cost_model.formula = strdup(formula(info));
  return s->id && s->model && s->data && s->device && s->launcher && s->algo && s->run_id &&
         s->slow && s->ps_sync && s->cost_model.formula;
}

/* Gradients applied and dropped, and how stale the applied ones were, over
 * every step of every rank. */
static void count_staleness(const gs_run_info *info, const gs_rank_result *ranks,
                            size_t steps, gs_summary *s) {
  int64_t applied = 0;
  double stale_sum = 0;
  for (int r = 0; r < info->world; r++)
    for (size_t t = 0; t < steps; t++) {
      int x = ranks[r].rows[t].staleness;
      if (x < 0) s->dropped_gradients++;
      else applied++, stale_sum += x;
      if (x > s->staleness_max) s->staleness_max = x;
    }
  s->staleness_mean = applied && gs_ps_sync_stale(&info->ps_sync) ? stale_sum / (double)applied
                                                                   : NAN;
}

/* The summary's per-step and per-rank arrays and the sums' own; false: out
 * of memory. */
static bool alloc_sums(const gs_rank_result *ranks, gs_summary *s, run_sums *x) {
  int N = s->world;
  s->step_time_s = calloc(x->steps + 1, sizeof *s->step_time_s);
  s->per_rank = calloc((size_t)N, sizeof *s->per_rank);
  x->sorted = calloc(x->steps + 1, sizeof *x->sorted);
  x->rs = calloc((size_t)N, sizeof *x->rs);
  bool ok = s->step_time_s && s->per_rank && x->sorted && x->rs;
  for (int r = 0; ok && r < N; r++) ok = (s->per_rank[r].host = dup_or_empty(ranks[r].host));
  return ok;
}

static void free_sums(run_sums *x) {
  free(x->sorted);
  free(x->rs);
}

/* One measured step of one rank into its sums; step: the step's time (the
 * slowest rank's), of which the rest is idle. */
static void add_row(rank_sum *x, const gs_step_row *row, double step) {
  double compute = row->data_s + row->forward_s + row->backward_s;
  double busy = compute + row->reduce_s + row->update_s;
  double idle = step - busy - row->wait_s;
  x->data += row->data_s;
  x->forward += row->forward_s;
  x->backward += row->backward_s;
  x->compute += compute;
  x->wait += row->wait_s;
  x->reduce += row->reduce_s;
  x->update += row->update_s;
  x->busy += busy;
  x->idle += idle > 0 ? idle : 0;
  x->sent += (double)row->bytes_sent;
  x->recv += (double)row->bytes_recv;
  if (row->rss_bytes > x->rss) x->rss = row->rss_bytes;
}

/* A server's share of rank 0's step (a server in rank 0's process, or the
 * dedicated one it reports), when the row has one. */
static void add_server(server_sum *srv, const gs_step_row *r0) {
  if (!r0->has_server) return;
  srv->seen = true;
  srv->reduce += r0->server_reduce_s;
  srv->update += r0->server_update_s;
  srv->sent += (double)r0->server_bytes_sent;
  srv->recv += (double)r0->server_bytes_recv;
}

/* Every step's time (the slowest rank's), and over the measured steps the
 * time, the samples, each rank's sums and the server's; the measured
 * steps' times sorted for the quantiles. */
static void sum_steps(const gs_rank_result *ranks, gs_summary *s, run_sums *x) {
  int N = s->world;
  for (size_t t = 0; t < x->steps; t++) {
    double mx = 0, samples = 0;
    for (int r = 0; r < N; r++) {
      const gs_step_row *row = &ranks[r].rows[t];
      if (row->step_s > mx) mx = row->step_s;
      samples += row->samples;
    }
    s->step_time_s[t] = mx;
    x->skipped += ranks[0].rows[t].skipped != 0;
    if (t < x->first) continue;
    x->total_time += mx;
    x->total_samples += samples;
    for (int r = 0; r < N; r++) add_row(&x->rs[r], &ranks[r].rows[t], mx);
    add_server(&x->srv, &ranks[0].rows[t]);
  }
  memcpy(x->sorted, s->step_time_s + x->first, x->m * sizeof *x->sorted);
  qsort(x->sorted, x->m, sizeof *x->sorted, cmp_double);
  x->div = x->m ? (double)x->m : 1;
}

/* Whether rank r hosts what the cost model calls the master: rank 0 with
 * the server in it, or a rank that runs one of K servers; no rank when the
 * servers have processes of their own. */
static bool rank_is_master(const gs_run_info *info, int r) {
  return info->mode == GS_MODE_PS && (info->ps_server_hosts || info->ps_summation) ? false
         : info->mode == GS_MODE_PS && info->ps_servers > 1
             ? gs_ps_runs_server(r, info->world, info->ps_servers)
             : r == 0 && !(info->mode == GS_MODE_PS && info->dedicated);
}

/* Each rank's means per measured step beside the cost model's bytes for
 * its role; the busiest rank's busy, the mean busy, everyone's traffic. */
static void per_rank_means(const gs_run_info *info, const gs_rank_result *ranks, gs_summary *s,
                           run_sums *sm) {
  int N = s->world;
  const gs_cost_model *cm = &s->cost_model;
  double div = sm->div;
  for (int r = 0; r < N; r++) {
    const rank_sum *x = &sm->rs[r];
    gs_rank_summary *p = &s->per_rank[r];
    bool master = rank_is_master(info, r);
    double busy = x->busy / div;
    sm->busy_mean += busy / N;
    if (busy > sm->busy_max) sm->busy_max = busy;
    sm->traffic_all += (x->sent + x->recv) / div;
    p->rank = r;
    p->bytes_sent = x->sent / div;
    p->bytes_recv = x->recv / div;
    p->compute_s = x->compute / div;
    p->data_s = x->data / div;
    p->forward_s = x->forward / div;
    p->backward_s = x->backward / div;
    p->comm_wait_s = x->wait / div;
    p->comm_hidden_s = hidden_comm(&ranks[r], sm->first, sm->steps) / div;
    p->reduce_s = x->reduce / div;
    p->update_s = x->update / div;
    p->busy_s = busy;
    p->idle_s = x->idle / div;
    p->step_s = sm->m ? sm->total_time / div : 0.0;
    p->model_bytes_sent = master ? cm->master_bytes_sent : cm->worker_bytes_sent;
    p->model_bytes_recv = master ? cm->master_bytes_recv : cm->worker_bytes_recv;
    double model = p->model_bytes_sent + p->model_bytes_recv;
    p->traffic_vs_model = model > 0 ? (x->sent + x->recv) / div / model : 0.0;
    p->peak_rss_bytes = (int64_t)(x->rss > ranks[r].peak_rss ? x->rss : ranks[r].peak_rss);
    p->slow_factor = gs_straggle_factor(&info->straggle, r);
  }
}

/* The server's means when rank 0 reported one (its traffic joins
 * everyone's), and the master's bytes per step against a worker's: the
 * server's against every rank's mean, else rank 0's against the others'. */
static void server_means(gs_summary *s, run_sums *sm) {
  int N = s->world;
  double div = sm->div;
  const rank_sum *rs = sm->rs;
  if (!sm->srv.seen) {
    sm->master_bytes = (rs[0].sent + rs[0].recv) / div;
    for (int r = 1; r < N; r++) sm->worker_bytes += (rs[r].sent + rs[r].recv) / div / (N - 1);
    return;
  }
  const server_sum *srv = &sm->srv;
  const gs_cost_model *cm = &s->cost_model;
  gs_server_summary *v = &s->server;
  s->has_server = true;
  v->bytes_sent = srv->sent / div;
  v->bytes_recv = srv->recv / div;
  v->reduce_s = srv->reduce / div;
  v->update_s = srv->update / div;
  v->busy_s = (srv->reduce + srv->update) / div;
  v->model_bytes_sent = cm->master_bytes_sent;
  v->model_bytes_recv = cm->master_bytes_recv;
  sm->traffic_all += v->bytes_sent + v->bytes_recv;
  sm->master_bytes = v->bytes_sent + v->bytes_recv;
  for (int r = 0; r < N; r++) sm->worker_bytes += (rs[r].sent + rs[r].recv) / div / N;
}

/* The run's settings and its figures over the measured steps. */
static void run_figures(const gs_run_info *info, const gs_rank_result *ranks, gs_summary *s,
                        const run_sums *sm) {
  int N = s->world;
  size_t steps = sm->steps, m = sm->m;
  /* one master: ps with one server (in rank 0 or a process of its own) */
  bool one_master = info->mode == GS_MODE_PS && N > 1 && info->ps_servers <= 1 &&
                    !info->ps_server_hosts && !info->ps_summation;
  s->mode = info->mode;
  s->batch = info->batch;
  s->global_batch = info->batch * N;
  s->bucket_mb = info->bucket_mb;
  s->first_bucket_mb = info->first_bucket_mb;
  s->precision = info->precision;
  s->overlap = info->overlap;
  s->ps_dedicated = info->dedicated;
  s->ps_servers = info->ps_servers > 1 ? info->ps_servers : 1;
  s->ps_server_hosts = info->ps_server_hosts;
  s->ps_spare_hosts = info->mode == GS_MODE_PS && info->ps_summation ? info->ps_spare : -1;

  s->threads_per_rank = info->threads;
  s->steps = (int64_t)steps;
  s->nparams = (int64_t)info->nparams;
  s->nbuckets = info->nbuckets;
  s->gradient_bytes = s->cost_model.S_bytes;
  /* the partitions' size the ps cut: --ps-partition-mb, or its rule */
  s->ps_partition_mb = s->ps_spare_hosts < 0 ? 0
                       : info->ps_partition_mb > 0 ? info->ps_partition_mb
                       : (double)gs_ps_partition_bytes(0, s->gradient_bytes) / (1 << 20);
  s->wall_time_s = info->wall_end - info->wall_start;
  s->throughput_samples_per_s = sm->total_time > 0 ? sm->total_samples / sm->total_time : 0.0;
  s->step_time_s_median = quantile(sm->sorted, m, 0.5);
  s->step_time_s_p95 = quantile(sm->sorted, m, 0.95);
  s->step_time_s_mean = m ? sm->total_time / sm->div : 0.0;
  s->imbalance = sm->busy_mean > 0 ? sm->busy_max / sm->busy_mean : 1.0;
  s->scaling_efficiency = NAN;
  s->master_traffic_share = one_master && sm->traffic_all > 0 ? sm->master_bytes /
                                                                  sm->traffic_all
                                                              : NAN;
  s->master_bytes_vs_worker = one_master && sm->worker_bytes > 0 ? sm->master_bytes /
                                                                     sm->worker_bytes
                                                                 : NAN;
  s->skipped_steps = sm->skipped;
  s->final_loss = steps ? ranks[0].rows[steps - 1].loss : 0;
  s->warmup_steps = (int64_t)sm->first;
  s->final_loss_scale = steps ? (double)ranks[0].rows[steps - 1].scale : 1.0;
  s->measured_steps = (int64_t)m;
}

/* The record of one repetition: this run's throughput, step median and id
 * (repeats.c merges records); false: out of memory. */
static bool one_repeat(const gs_run_info *info, gs_summary *s) {
  s->repeat = info->repeat > 0 ? info->repeat : 1;
  s->nrepeats = 1;
  s->repeat_throughput = malloc(sizeof *s->repeat_throughput);
  s->repeat_step_median = malloc(sizeof *s->repeat_step_median);
  s->repeat_ids = calloc(1, sizeof *s->repeat_ids);
  if (!s->repeat_throughput || !s->repeat_step_median || !s->repeat_ids ||
      !(s->repeat_ids[0] = strdup(s->id)))
    return false;
  s->repeat_throughput[0] = s->throughput_samples_per_s;
  s->repeat_step_median[0] = s->step_time_s_median;
  return true;
}

/* What the run's evaluations measured (NaN: not measured). */
static void evaluations(const gs_run_info *info, gs_summary *s) {
  bool measured = !isnan(info->accuracy) && info->accuracy >= 0;
  s->accuracy = measured ? info->accuracy : NAN;
  s->eval_loss = measured ? info->eval_loss : NAN;
  measured = !isnan(info->heldout_accuracy) && info->heldout_accuracy >= 0;
  s->heldout_accuracy = measured ? info->heldout_accuracy : NAN;
  s->heldout_loss = measured ? info->heldout_loss : NAN;
}

int gs_summarize(const gs_run_info *info, const gs_rank_result *ranks, gs_summary *out,
                 gs_err *e) {
  memset(out, 0, sizeof *out);
  size_t steps = 0;
  GS_TRY(steps_of(info, ranks, &steps, e));
  run_sums sm = {.steps = steps,
                 .first = (size_t)gs_first_measured(info->warmup, (int64_t)steps)};
  sm.m = steps - sm.first;
  gs_summary *s = out;
  s->world = info->world; /* before per_rank exists: gs_summary_free walks world entries */
  if (!describe(info, s) || !alloc_sums(ranks, s, &sm)) {
    free_sums(&sm);
    gs_summary_free(s);
    return GS_FAIL(e, GS_ENOMEM, "out of memory summarising the run");
  }
  count_staleness(info, ranks, steps, s);
  sum_steps(ranks, s, &sm);
  cost_model(info, &s->cost_model);
  per_rank_means(info, ranks, s, &sm);
  server_means(s, &sm);
  run_figures(info, ranks, s, &sm);
  bool ok = one_repeat(info, s);
  free_sums(&sm);
  if (!ok) {
    gs_summary_free(s);
    return GS_FAIL(e, GS_ENOMEM, "out of memory summarising the run");
  }
  evaluations(info, s);
  /* buckets first: the links' prediction takes readiness from them */
  int rc = gs_summary_buckets(info, ranks, sm.first, steps, s, e);
  if (rc == GS_OK) rc = gs_summary_links(info, ranks, s, e);
  if (rc == GS_OK) rc = gs_stale_summarize(info, ranks, steps, s, e);
  if (rc < 0) gs_summary_free(s);
  return rc;
}

void gs_summary_free(gs_summary *s) {
  if (!s) return;
  if (s->per_rank)
    for (int r = 0; r < s->world; r++) free(s->per_rank[r].host);
  free(s->per_rank);
  free(s->id);
  free(s->model);
  free(s->data);
  free(s->device);
  free(s->launcher);
  free(s->algo);
  free(s->run_id);
  free(s->slow);
  free(s->ps_sync);
  free(s->compress);
  free(s->cost_model.formula);
  free(s->cost_model.bottleneck);
  free(s->step_time_s);
  free(s->link_delay);
  free(s->links);
  free(s->bucket_timing);
  for (int i = 0; s->repeat_ids && i < s->nrepeats; i++) free(s->repeat_ids[i]);
  free(s->repeat_ids);
  free(s->repeat_throughput);
  free(s->repeat_step_median);
  gs_stale_free(&s->stale);
  memset(s, 0, sizeof *s);
}

/* the world-1 run of the same mode and configuration (else the local
 * step's), for scaling */
static const gs_summary *baseline(const gs_summary *runs, size_t n, const gs_summary *run,
                                  bool strong) {
  const gs_summary *local = NULL;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->world != 1 || (r->mode != run->mode && r->mode != GS_MODE_SINGLE) ||
        strcmp(r->model, run->model) || r->bucket_mb != run->bucket_mb ||
        r->precision != run->precision)
      continue;
    if (strong ? r->global_batch != run->global_batch : r->batch != run->batch) continue;
    if (r->mode == run->mode) return r;
    if (!local) local = r;
  }
  return local;
}

const gs_summary *gs_summary_find(const gs_summary *runs, size_t n, gs_mode mode, int world,
                                  const gs_summary *like) {
  const gs_summary *local = NULL;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->world != world || strcmp(r->model, like->model) || r->batch != like->batch ||
        r->bucket_mb != like->bucket_mb || r->precision != like->precision)
      continue;
    if (r->mode == mode) return r;
    if (world == 1 && r->mode == GS_MODE_SINGLE && !local) local = r;
  }
  return local;
}

void gs_summary_scaling(gs_summary *runs, size_t n, bool strong) {
  for (size_t i = 0; i < n; i++) {
    const gs_summary *b = baseline(runs, n, &runs[i], strong);
    double t1 = b ? b->throughput_samples_per_s : 0;
    runs[i].scaling_efficiency =
        t1 > 0 ? runs[i].throughput_samples_per_s / (runs[i].world * t1) : NAN;
  }
}
