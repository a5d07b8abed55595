/* summary_links.c: a run on emulated hosts, summarised: what each host's
 * link carried (the kernel's counters, read by the first rank of each host
 * over the measured steps), how busy it was, and what the cost model
 * (costmodel.h) says the step's communication should cost on those links. Pure,
 * like summary.c: the same measurements give the same summary.
 *
 *   busy                  = the fraction of the window the link was sending,
 *                           receiving, or either (busy_tx, busy_rx, busy),
 *                           from its counters sampled every 5 ms (hosts.h
 *                           gs_hostlink_acc)
 *   comm_s_predicted      = the model's exposed communication (costmodel.h),
 *                           with the link rate and delay of the run and
 *                           this run's own compute, reduction and
 *                           optimizer rates, and its buckets ready when
 *                           the run's backward had them ready (the mean
 *                           over its steps, summary_buckets.c)
 *   comm_s_measured       = the mean over the ranks that wait for the
 *                           reduction (ps: the workers; ring and sharded ps:
 *                           everyone) of their wait plus their own reduction
 *                           per step
 * A sharded ps is the model's sps-colo when its K servers are one per host
 * (K = hosts; ps/shard.c places them so); other K have no prediction. With
 * servers of their own it is sps-hosts, and the links listed are the
 * ranks' hosts' and then the servers' (rank 0 reads theirs). A run on one
 * machine's loopback is the model's one host, its transport as the sweep
 * measured it before the runs (gs_run_info loop_*); it has no links. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"
#include "bench/hosts/hosts.h"
#include "bench/report/report.h"

/* What the run does not measure: a ZeroMQ message's fixed cost, and the
 * same-host and copy rates (they matter only with several ranks per host);
 * figures of the order `bench --collective` shows on one machine. */
#define ALPHA_S 50e-6
#define LOCAL_BPS 2e9
#define COPY_BPS 5e9

static double clamp01(double x) { return x < 0 ? 0 : x > 1 ? 1 : x; }

/* The machine and job of the run as the cost model sees them. */
static int model_of(const gs_run_info *info, const gs_summary *s, gs_cm_machine *m,
                    gs_cm_job *j, gs_cm_plan *plan) {
  bool loop = info->hosts < 1;
  if (!info->bucket_bytes || info->nbuckets < 1 || (loop && !(info->loop_Bps > 0)) ||
      s->measured_steps < 1 || info->mode == GS_MODE_SINGLE || info->dedicated || info->batch < 1)
    return -1;
  int N = info->world, K = info->mode == GS_MODE_PS ? info->ps_servers : 1;
  bool own = info->mode == GS_MODE_PS && info->ps_server_hosts;
  bool byteps = info->mode == GS_MODE_PS && info->ps_summation;
  if (K > 1 && (K != info->hosts || loop) && !own && !byteps) return -1;
  if (info->link_host && info->link_host->n > 0) return -1; /* one rate for every link */
  const gs_rank_summary *r0 = &s->per_rank[0];
  double S = s->gradient_bytes;
  /* reduction: ps sums N operands at the master (of S / K at each of K
   * servers, rank 0 hosting the first), a ring rank (N-1)/N S; BytePS: a
   * rank's server (N-1) of its share x S (none at x = 0: the servers are
   * processes of their own, the rank's reduction its optimizer's check) */
  double y = 0, x = 0;
  int nh = loop ? N : info->hosts;
  if (byteps && gs_ps_spare_shares(nh, info->ps_spare, info->ps_spare_share, &y, &x) < 0)
    return -1;
  double reduced = byteps ? (N - 1) * x * S
                   : info->mode == GS_MODE_PS ? (N - 1) * S / K : (N - 1.0) / N * S;
  if (byteps) K = 1; /* every rank's optimizer, on every parameter */
  *m = (gs_cm_machine){
      .link_Bps = loop ? info->loop_Bps : gs_hosts_counted_Bps((uint64_t)info->link_bps),
      .link_latency_s = loop ? 0 : info->latency_s, .alpha_s = loop ? info->loop_alpha_s : ALPHA_S,
      .local_Bps = loop ? info->loop_Bps : LOCAL_BPS,
      .reduce_Bps = r0->reduce_s > 0 && reduced > 0 ? reduced / r0->reduce_s : 1e12,
      .copy_Bps = COPY_BPS,
      .optim_pps = r0->update_s > 0 ? (double)info->nparams / K / r0->update_s : 1e12};
  plan->bytes = (size_t *)info->bucket_bytes;
  plan->nbuckets = info->nbuckets;
  plan->nparams = info->nparams;
  plan->elem_bytes = gs_dtype_size(info->wire);
  plan->total = 0;
  for (int b = 0; b < info->nbuckets; b++) plan->total += (double)info->bucket_bytes[b];
  double fwd = 0, bwd = 0;
  for (int r = 0; r < N; r++) {
    fwd += (s->per_rank[r].data_s + s->per_rank[r].forward_s) / N;
    bwd += s->per_rank[r].backward_s / N;
  }
  gs_cm_mode mode = info->mode != GS_MODE_PS ? GS_CM_RING
                    : byteps ? GS_CM_BYTEPS
                    : own ? GS_CM_SPS_HOSTS : K > 1 ? GS_CM_SPS_COLO : GS_CM_PS;
  /* BytePS on loopback: every rank a host of its own, as the ps splits it */
  *j = (gs_cm_job){.mode = mode, .world = N, .servers = byteps ? info->ps_spare : K,
                   .hosts = byteps ? nh : loop ? 1 : info->hosts, .plan = plan,
                   .batch = info->batch,
                   .spare_share = info->ps_spare_share,
                   .partition_bytes = (size_t)(info->ps_partition_mb * (1 << 20)),
                   .fwd_s = fwd / info->batch, .bwd_s = bwd / info->batch,
                   .overlap = info->overlap, .barrier = info->precision != GS_F32,
                   /* what trained: hosts reduced first (ps/hostagg.c, allreduce/hier.c) */
                   .host_reduce = info->algo && (!strcmp(info->algo, "local-reduce") ||
                                                 !strcmp(info->algo, "hier"))};
  return 0;
}

static void predict(const gs_run_info *info, gs_summary *s) {
  gs_cost_model *cm = &s->cost_model;
  int N = info->world,
      first = info->mode == GS_MODE_PS && info->ps_servers <= 1 && !info->ps_server_hosts &&
              !info->ps_summation;
  double wait = 0;
  for (int r = first; r < N; r++)
    wait += (s->per_rank[r].comm_wait_s + s->per_rank[r].reduce_s) / (N - first);
  cm->comm_s_measured = N > first ? wait : NAN;
  gs_cm_machine m;
  gs_cm_job j;
  gs_cm_plan plan;
  gs_cm_result r;
  gs_err e = {0};
  if (model_of(info, s, &m, &j, &plan) < 0) return;
  double *ready = malloc((size_t)info->nbuckets * sizeof *ready);
  if (ready && gs_bucket_ready_fractions(s, info->nbuckets, ready, &e) < 0) {
    free(ready); /* a bucket went unseen: in proportion to bytes */
    ready = NULL;
    gs_err_clear(&e);
  }
  j.ready = ready;
  /* compressed steps: their own plan, weighted by their share of the steps;
   * the run's reduction rate already holds the compression's work */
  gs_cm_plan cplan = plan;
  gs_cm_job cj = j;
  gs_cm_result c;
  double w = info->compressed_bytes ? info->compressed_share : 0;
  bool ok = gs_cm_predict(&m, &j, &r, &e) == GS_OK;
  c = r;
  if (ok && w > 0) {
    cplan.bytes = (size_t *)info->compressed_bytes;
    cplan.elem_bytes = sizeof(float);
    cplan.total = 0;
    for (int b = 0; b < info->nbuckets; b++) cplan.total += (double)cplan.bytes[b];
    cj.plan = &cplan;
    if (info->compressed_push) {  /* ps: compressed pushes, dense parameters back */
      cj.plan = &plan;
      cj.push_bytes = info->compressed_bytes;
      if (info->compressed_sums_back) cj.back_bytes = info->compressed_bytes;
    }
    cj.collectives = info->compressed_collectives;
    ok = cplan.total > 0 && gs_cm_predict(&m, &cj, &c, &e) == GS_OK;
  }
  free(ready);
  if (!ok) return;
#define MIX(f) ((1 - w) * r.f + w * c.f)
  cm->comm_s_predicted = MIX(exposed_s);
  cm->comm_s_without_overlap = MIX(comm_s);
  cm->step_s_predicted = MIX(step_s);
  cm->link_one_way_busy_predicted = MIX(link_busy);
#undef MIX
  free(cm->bottleneck);
  cm->bottleneck = strdup(gs_cm_bottleneck_name(w > 0.5 ? c.bottleneck : r.bottleneck));
  j.ready = cj.ready = NULL; /* freed; bytes on links do not depend on it */
  for (int i = 0; i < s->nlinks; i++) {
    double in = NAN, out = NAN, cin = NAN, cout = NAN;
    if (gs_cm_link_bytes(&j, s->links[i].host, &in, &out, &e) == GS_OK &&
        gs_cm_link_bytes(&cj, s->links[i].host, &cin, &cout, &e) == GS_OK) {
      s->links[i].model_rx_bytes = (1 - w) * in + w * cin;
      s->links[i].model_tx_bytes = (1 - w) * out + w * cout;
    }
  }
}

int gs_summary_links(const gs_run_info *info, const gs_rank_result *ranks, gs_summary *s,
                     gs_err *e) {
  gs_cost_model *cm = &s->cost_model;
  cm->comm_s_predicted = cm->comm_s_measured = cm->comm_s_without_overlap = NAN;
  cm->step_s_predicted = cm->link_one_way_busy_predicted = NAN;
  cm->bottleneck = strdup("");
  s->hosts = info->hosts > 0 ? info->hosts : 0;
  s->link_rate_bps = info->hosts > 0 ? info->link_bps : 0;
  s->link_latency_s = info->hosts > 0 ? info->latency_s : 0;
  s->link_delay = strdup(info->hosts > 0 && info->delay ? info->delay : "none");
  if (!cm->bottleneck || !s->link_delay) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (s->hosts == 0) {
    predict(info, s);
    return GS_OK;
  }
  /* servers on hosts of their own: hosts + k, read by rank 0 */
  int servers = ranks[0].nserver_links;
  s->links = calloc((size_t)(s->hosts + servers), sizeof *s->links);
  if (!s->links) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  double steps = s->measured_steps > 0 ? (double)s->measured_steps : 1;
  for (int h = 0; h < s->hosts + servers; h++) {
    const gs_rank_result *x = NULL;
    for (int r = 0; r < info->world && !x; r++)
      if (ranks[r].link_host == h) x = &ranks[r];
    if (h >= s->hosts) x = &ranks[0].server_links[h - s->hosts];
    if (!x || !(x->link_window_s > 0))
      return GS_FAIL(e, GS_EINVAL, "summary: host %d's link counters were not reported (its "
                     "first rank reads them)", h);
    gs_hostlink_summary *l = &s->links[s->nlinks++];
    l->host = h;
    l->tx_bytes = (double)x->link_tx / steps;
    l->rx_bytes = (double)x->link_rx / steps;
    l->model_tx_bytes = l->model_rx_bytes = NAN;
    l->window_s = x->link_window_s;
    l->busy_tx = clamp01(x->link_busy_tx_s / l->window_s);
    l->busy_rx = clamp01(x->link_busy_rx_s / l->window_s);
    l->busy = clamp01(x->link_busy_s / l->window_s);
    l->rate_bps = h < s->hosts ? (double)gs_host_rates_of(info->link_host, h,
                                                          (uint64_t)info->link_bps)
                               : info->link_bps;
  }
  predict(info, s);
  return GS_OK;
}
