/* tables.c: the terminal tables, drawn from gs_summary: one run (per-rank
 * times in ms per step, bytes per step, the cost model beside them) and the
 * runs side by side (ps vs ring per world). */
#include <math.h>
#include <string.h>

#include "bench/report/report.h"

static void human_bytes(double b, char *buf, size_t cap) {
  if (isnan(b)) {
    snprintf(buf, cap, "-");
    return;
  }
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) {
    b /= 1024;
    i++;
  }
  snprintf(buf, cap, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

static void print_links(FILE *f, const gs_summary *s);

/* BytePS' summation servers: the partitions, their communication per step
 * and how much of it ran under forward and backward (bucket_timing: the
 * partitions' spans, ps/sched.c), beside t_opt on links */
static void print_partitions(FILE *f, const gs_summary *s) {
  double comm = 0, hidden = 0, window = gs_summary_comm_window(s), topt = gs_summary_link_time(s);
  for (int i = 0; i < s->nbucket_timing; i++) {
    comm += s->bucket_timing[i].comm_s;
    hidden += s->bucket_timing[i].hidden_s;
  }
  fprintf(f, "  BytePS' summation servers on %d spare host%s, partitions of at most %.3g MiB: "
          "%.1f ms of communication per step, %.1f%% of it under forward and backward",
          s->ps_spare_hosts, s->ps_spare_hosts == 1 ? "" : "s", s->ps_partition_mb,
          1e3 * (isfinite(window) ? window : comm), comm > 0 ? 100 * hidden / comm : 0);
  if (isfinite(topt) && isfinite(window))
    fprintf(f, "; t_opt %.1f ms (%.2fx)", 1e3 * topt, window / topt);
  fprintf(f, "\n");
}
static void print_model_time(FILE *f, const gs_summary *s);

/* "ps x 4 servers of their own" */
static void mode_label(const gs_summary *s, char *buf, size_t cap) {
  if (s->ps_spare_hosts >= 0)
    snprintf(buf, cap, "%s, %d spare host%s", gs_mode_name(s->mode), s->ps_spare_hosts,
             s->ps_spare_hosts == 1 ? "" : "s");
  else if (s->ps_servers > 1 || s->ps_server_hosts)
    snprintf(buf, cap, "%s x %d server%s%s", gs_mode_name(s->mode), s->ps_servers,
             s->ps_servers > 1 ? "s" : "", s->ps_server_hosts ? " of their own" : "");
  else
    snprintf(buf, cap, "%s", gs_mode_name(s->mode));
}

void gs_summary_print_line(FILE *f, const gs_summary *s, int done, int total) {
  char mode[64], where[48] = "loopback";
  mode_label(s, mode, sizeof mode);
  if (s->hosts > 0) snprintf(where, sizeof where, "%d emulated hosts", s->hosts);
  fprintf(f, "run %d of %d: %s world %d on %s: %.4g samples/s, step median %.4g ms%s\n", done,
          total, mode, s->world, where, s->throughput_samples_per_s,
          1e3 * s->step_time_s_median, s->mode == GS_MODE_SINGLE ? " (the local step)" : "");
}

void gs_summary_print(FILE *f, const gs_summary *s) {
  char mode[64];
  mode_label(s, mode, sizeof mode);
  fprintf(f, "\n== %s  world %d  %s  batch %d/rank  %s  %s%s ==\n", mode, s->world, s->model,
          s->batch, gs_dtype_name(s->precision), s->mode == GS_MODE_SINGLE ? "one process"
          : s->overlap ? "overlap" : "no overlap", s->ps_dedicated ? ", dedicated server" : "");
  char sb[32], master[64] = "n/a (no single master)";
  human_bytes(s->gradient_bytes, sb, sizeof sb);
  if (isfinite(s->master_bytes_vs_worker))
    snprintf(master, sizeof master, "%.2fx a worker's (%.1f%% of all)", s->master_bytes_vs_worker,
             100 * s->master_traffic_share);
  fprintf(f, "  throughput %.0f samples/s   step median %.2f ms  p95 %.2f ms   imbalance %.2f"
          "   master's bytes %s   S = %s in %d bucket(s)", s->throughput_samples_per_s,
          s->step_time_s_median * 1e3, s->step_time_s_p95 * 1e3, s->imbalance, master, sb,
          s->nbuckets);
  if (s->nrepeats > 1) {
    double lo, hi;
    gs_summary_spread(s, &lo, &hi);
    fprintf(f, "\n  the median of %d runs (throughput %.4g-%.4g samples/s); the rows are that "
            "run's", s->nrepeats, lo, hi);
  }
  fprintf(f, "\n");
  fprintf(f, "  %-6s %9s %9s %9s %9s %9s %9s %9s %9s %11s %11s %9s %10s %6s\n", "rank",
          "compute", "wait", "hidden", "reduce", "update", "busy", "idle", "step", "sent/step",
          "recv/step", "vs model", "peak RSS", "slow");
  fprintf(f, "  %-6s %9s %9s %9s %9s %9s %9s %9s %9s %11s %11s %9s %10s %6s\n", "", "ms", "ms",
          "ms", "ms", "ms", "ms", "ms", "ms", "", "", "", "", "x");
  for (int r = 0; r < s->world; r++) {
    const gs_rank_summary *p = &s->per_rank[r];
    char s1[32], s2[32], s3[32], vm[16] = "-";
    human_bytes(p->bytes_sent, s1, sizeof s1);
    human_bytes(p->bytes_recv, s2, sizeof s2);
    human_bytes((double)p->peak_rss_bytes, s3, sizeof s3);
    if (p->model_bytes_sent + p->model_bytes_recv > 0)
      snprintf(vm, sizeof vm, "%.3fx", p->traffic_vs_model);
    fprintf(f, "  %-6d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11s %11s %9s %10s %6.3g\n",
            p->rank, 1e3 * p->compute_s, 1e3 * p->comm_wait_s, 1e3 * p->comm_hidden_s,
            1e3 * p->reduce_s, 1e3 * p->update_s, 1e3 * p->busy_s, 1e3 * p->idle_s,
            1e3 * p->step_s, s1, s2, vm, s3, p->slow_factor);
  }
  fprintf(f, "  (ms per step, the mean of the measured steps; wait: exposed communication, the "
          "time the step waited for it; hidden: communication that ran while the rank "
          "computed; slow: --slow's compute factor)\n");
  if (s->ps_spare_hosts >= 0) print_partitions(f, s);
  if (!isnan(s->staleness_mean))
    fprintf(f, "  ps %s: applied gradients %.3g updates stale on average, %d at most; %d "
            "dropped\n", s->ps_sync, s->staleness_mean, s->staleness_max, s->dropped_gradients);
  if (s->slow[0] || s->jitter_cv > 0)
    fprintf(f, "  stragglers: --slow %s --jitter %g\n", s->slow[0] ? s->slow : "none",
            s->jitter_cv);
  gs_stale_print(f, s);
  if (s->has_server) {
    const gs_server_summary *v = &s->server;
    char s1[32], s2[32];
    human_bytes(v->bytes_sent, s1, sizeof s1);
    human_bytes(v->bytes_recv, s2, sizeof s2);
    fprintf(f, "  %-6s %9s %9s %9s %9.2f %9.2f %9.2f %9s %9s %11s %11s\n", "server", "", "", "",
            1e3 * v->reduce_s, 1e3 * v->update_s, 1e3 * v->busy_s, "", "", s1, s2);
  }
  if (s->precision != GS_F32 || s->skipped_steps > 0)
    fprintf(f, "  precision %s: %d skipped step(s) (inf/NaN), loss scale at the end %g\n",
            gs_dtype_name(s->precision), s->skipped_steps, s->final_loss_scale);
  if (!isnan(s->accuracy))
    fprintf(f, "  eval accuracy %.2f%% loss %.4f (on up to 10000 training samples)\n",
            100 * s->accuracy, s->eval_loss);
  if (!isnan(s->heldout_accuracy))
    fprintf(f, "  held-out accuracy %.2f%% loss %.4f (--eval-data)\n", 100 * s->heldout_accuracy,
            s->heldout_loss);
  const gs_cost_model *cm = &s->cost_model;
  if (!(cm->S_bytes > 0) || s->mode == GS_MODE_SINGLE || s->world < 2) return;
  char m1[32], m2[32];
  human_bytes(cm->master_bytes_sent, m1, sizeof m1);
  human_bytes(cm->worker_bytes_sent, m2, sizeof m2);
  if (s->mode == GS_MODE_ALLREDUCE) {
    fprintf(f, "  cost model: %s\n              every rank %s each way per step (vs model = "
            "measured sent+recv / model)\n", cm->formula, m1);
  } else if (cm->master_bytes_recv != cm->master_bytes_sent) {  /* ps top-k */
    char m3[32], m4[32];
    human_bytes(cm->master_bytes_recv, m3, sizeof m3);
    human_bytes(cm->worker_bytes_recv, m4, sizeof m4);
    fprintf(f, "  cost model: %s\n              master receives %s and sends %s, other ranks "
            "send %s and receive %s per step (vs model = measured sent+recv / model)\n",
            cm->formula, m3, m1, m2, m4);
  } else
    fprintf(f, "  cost model: %s\n              %s %s each way, other ranks %s each way per "
            "step (vs model = measured sent+recv / model)\n", cm->formula,
            isfinite(s->master_bytes_vs_worker) ? "master" : s->ps_server_hosts ? "a server"
            : "a server's rank", m1, m2);
  print_links(f, s);
  print_model_time(f, s);
}

/* emulated hosts: what each link carried (its counters) against the cost
 * model, how busy it was, and the model's communication time */
static void print_links(FILE *f, const gs_summary *s) {
  if (s->hosts <= 0) return;
  /* links past the ranks' hosts are ps servers' of their own */
  int servers = s->nlinks > s->hosts ? s->nlinks - s->hosts : 0;
  char extra[48] = "";
  if (servers) snprintf(extra, sizeof extra, " and %d ps server host%s (S)", servers,
                        servers > 1 ? "s" : "");
  fprintf(f, "  %d emulated hosts%s, links %.4g Mbit/s each way, delay %.4g us (%s); per "
          "measured step, from each link's counters (busy: the share of the measured steps a "
          "link carried data):\n", s->hosts, extra, s->link_rate_bps / 1e6,
          s->link_latency_s * 1e6, s->link_delay);
  fprintf(f, "  host       sent      model       recv      model   busy: sending  receiving  "
          "either\n");
  for (int i = 0; i < s->nlinks; i++) {
    const gs_hostlink_summary *l = &s->links[i];
    char a[32], b[32], c[32], d[32];
    human_bytes(l->tx_bytes, a, sizeof a);
    human_bytes(l->model_tx_bytes, b, sizeof b); /* "-": no model (a dedicated server) */
    human_bytes(l->rx_bytes, c, sizeof c);
    human_bytes(l->model_rx_bytes, d, sizeof d);
    char host[16];
    snprintf(host, sizeof host, "%d%s", l->host, l->host >= s->hosts ? " S" : "");
    char own[48] = ""; /* --link-host: a link of its own rate */
    if (l->rate_bps > 0 && l->rate_bps != s->link_rate_bps)
      snprintf(own, sizeof own, "   link %.4g Mbit/s", l->rate_bps / 1e6);
    fprintf(f, "  %-4s %10s %10s %10s %10s   %13.0f%% %9.0f%% %6.0f%%%s\n", host, a, b, c, d,
            100 * l->busy_tx, 100 * l->busy_rx, 100 * l->busy, own);
  }
}

/* the model's communication and step beside the measured ones (on
 * emulated hosts from their links, on loopback from its transport) */
static void print_model_time(FILE *f, const gs_summary *s) {
  const gs_cost_model *cm = &s->cost_model;
  if (!isfinite(cm->comm_s_predicted) || !isfinite(cm->comm_s_measured)) return;
  fprintf(f, "  exposed communication per step (what a step waits for): model %.2f ms, "
          "measured %.2f ms (%+.0f%%); all of it, overlapped or not (model): %.2f ms; the "
          "model's bottleneck: %s%s\n", cm->comm_s_predicted * 1e3, cm->comm_s_measured * 1e3,
          100 * (cm->comm_s_measured / cm->comm_s_predicted - 1),
          cm->comm_s_without_overlap * 1e3, cm->bottleneck,
          s->hosts > 0 ? "" : " (loopback: one host, its transport measured before the runs)");
}

/* the same configuration but for the mode: the pairs the comparison sets
 * side by side */
static bool same_config(const gs_summary *a, const gs_summary *b) {
  return a->world == b->world && !strcmp(a->model, b->model) && a->batch == b->batch &&
         a->bucket_mb == b->bucket_mb;
}

/* a peer's row in the comparison's columns, and how ps and ring compare
 * with it at its world */
static void print_peer(FILE *f, json_t *p, const gs_summary *runs, size_t n, bool row) {
  const char *mode = json_string_value(json_object_get(p, "mode"));
  const char *model = json_string_value(json_object_get(p, "model"));
  int world = (int)json_integer_value(json_object_get(p, "world"));
  int batch = (int)json_integer_value(json_object_get(p, "batch"));
  double tp = json_number_value(json_object_get(p, "throughput_samples_per_s"));
  if (row) {
    fprintf(f, "  %-16.16s %-24.24s %6d %5d %5d %23.1f %9.2f %9s %8s %14s\n",
            mode ? mode : "peer", model ? model : "", batch, world,
            (int)json_array_size(json_object_get(p, "links")), tp, /* its emulated hosts */
            1e3 * json_number_value(json_object_get(p, "step_time_s_median")), "-", "-", "n/a");
    return;
  }
  for (size_t i = 0; i < n && tp > 0; i++)
    if (runs[i].world == world && runs[i].batch == batch && model && !strcmp(runs[i].model, model))
      fprintf(f, "    world %d: %s is %.2fx the throughput of %s\n", world,
              gs_mode_name(runs[i].mode), runs[i].throughput_samples_per_s / tp, mode);
}

void gs_summary_print_comparison(FILE *f, const gs_summary *runs, size_t n, json_t *peers,
                                 const char *notice) {
  if (n < 2 && !json_array_size(peers)) { /* nothing to compare: the notice alone */
    if (notice && *notice) fprintf(f, "\n  NOTE: %s.\n", notice);
    gs_stale_print_comparison(f, runs, n);
    return;
  }
  int reps = 1;
  for (size_t i = 0; i < n; i++)
    if (runs[i].nrepeats > reps) reps = runs[i].nrepeats;
  fprintf(f, "\n== ps vs ring%s ==\n", json_array_size(peers) ? " (and peers, measured in this "
          "same invocation)" : "");
  if (reps > 1)
    fprintf(f, "  samples/s: the median of %d runs, [the slowest-the fastest]; step: the median "
            "step of the median run\n", reps);
  else
    fprintf(f, "  samples/s: measured steps' samples over their time; step: the median step\n");
  if (notice && *notice) fprintf(f, "  NOTE: %s.\n", notice);
  fprintf(f, "  %-16s %-24s %6s %5s %5s %23s %9s %9s %8s %14s\n", "mode", "model", "batch",
          "world", "hosts", "samples/s", "step ms", "imbalance", "scaling", "master/worker");
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    char sc[16] = "-", mw[16] = "n/a", tp[48], mode[64];
    mode_label(r, mode, sizeof mode);
    if (!isnan(r->scaling_efficiency)) snprintf(sc, sizeof sc, "%.2f", r->scaling_efficiency);
    if (isfinite(r->master_bytes_vs_worker))
      snprintf(mw, sizeof mw, "%.2fx", r->master_bytes_vs_worker);
    double lo, hi;
    gs_summary_spread(r, &lo, &hi);
    if (r->nrepeats > 1)
      snprintf(tp, sizeof tp, "%.0f [%.0f-%.0f]", r->throughput_samples_per_s, lo, hi);
    else
      snprintf(tp, sizeof tp, "%.1f", r->throughput_samples_per_s);
    fprintf(f, "  %-16.16s %-24.24s %6d %5d %5d %23s %9.2f %9.2f %8s %14s\n", mode, r->model,
            r->batch, r->world, r->hosts, tp, 1e3 * r->step_time_s_median, r->imbalance, sc, mw);
  }
  size_t k;
  json_t *p;
  json_array_foreach(peers, k, p) print_peer(f, p, runs, n, true);
  /* ring / ps ratio for each world both ran (world 1 is one local run) */
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->mode != GS_MODE_ALLREDUCE || r->world < 2) continue;
    for (size_t j = 0; j < n; j++) {
      const gs_summary *q = &runs[j];
      if (q->mode != GS_MODE_PS || !same_config(q, r) || q->ps_servers > 1 ||
          q->ps_server_hosts || q->ps_spare_hosts >= 0)
        continue;
      double tp = q->throughput_samples_per_s;
      if (tp > 0)
        fprintf(f, "  world %d %s: ring is %.2fx the throughput of ps; imbalance ps %.2f, ring "
                "%.2f\n", r->world, r->model, r->throughput_samples_per_s / tp, q->imbalance,
                r->imbalance);
    }
  }
  json_array_foreach(peers, k, p) print_peer(f, p, runs, n, false);
  gs_stale_print_comparison(f, runs, n);
}
