/* tables.c: the terminal tables, drawn from gs_summary: one run (per-rank
 * times in ms per step, bytes per step, the cost model beside them) and the
 * runs side by side (ps vs ring per world). */
#include <math.h>
#include <string.h>

#include "bench/summary.h"

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

void gs_summary_print(FILE *f, const gs_summary *s) {
  char servers[32] = "";
  if (s->ps_servers > 1 || s->ps_server_hosts)
    snprintf(servers, sizeof servers, " x %d server%s%s", s->ps_servers,
             s->ps_servers > 1 ? "s" : "", s->ps_server_hosts ? " of their own" : "");
  fprintf(f, "\n== %s%s  world %d  %s  batch %d/rank  %s  %s%s ==\n", gs_mode_name(s->mode),
          servers, s->world, s->model, s->batch, gs_dtype_name(s->precision),
          s->overlap ? "overlap" : "no overlap", s->ps_dedicated ? ", dedicated server" : "");
  char sb[32];
  human_bytes(s->gradient_bytes, sb, sizeof sb);
  fprintf(f, "  throughput %.0f samples/s   step median %.2f ms  p95 %.2f ms   imbalance %.2f"
          "   master traffic share %.1f%%   S = %s in %d bucket(s)\n",
          s->throughput_samples_per_s, s->step_time_s_median * 1e3, s->step_time_s_p95 * 1e3,
          s->imbalance, 100 * s->master_traffic_share, sb, s->nbuckets);
  fprintf(f, "  %-6s %9s %9s %9s %9s %9s %9s %9s %11s %11s %9s %10s\n", "rank", "compute", "wait",
          "reduce", "update", "busy", "idle", "step", "sent/step", "recv/step", "vs model",
          "peak RSS");
  fprintf(f, "  %-6s %9s %9s %9s %9s %9s %9s %9s %11s %11s %9s %10s\n", "", "ms", "ms", "ms", "ms",
          "ms", "ms", "ms", "", "", "", "");
  for (int r = 0; r < s->world; r++) {
    const gs_rank_summary *p = &s->per_rank[r];
    char s1[32], s2[32], s3[32];
    human_bytes(p->bytes_sent, s1, sizeof s1);
    human_bytes(p->bytes_recv, s2, sizeof s2);
    human_bytes((double)p->peak_rss_bytes, s3, sizeof s3);
    fprintf(f, "  %-6d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11s %11s %8.3fx %10s\n",
            p->rank, 1e3 * p->compute_s, 1e3 * p->comm_wait_s, 1e3 * p->reduce_s,
            1e3 * p->update_s, 1e3 * p->busy_s, 1e3 * p->idle_s, 1e3 * p->step_s, s1, s2,
            p->traffic_vs_model, s3);
  }
  if (s->has_server) {
    const gs_server_summary *v = &s->server;
    char s1[32], s2[32];
    human_bytes(v->bytes_sent, s1, sizeof s1);
    human_bytes(v->bytes_recv, s2, sizeof s2);
    fprintf(f, "  %-6s %9s %9s %9.2f %9.2f %9.2f %9s %9s %11s %11s\n", "server", "", "",
            1e3 * v->reduce_s, 1e3 * v->update_s, 1e3 * v->busy_s, "", "", s1, s2);
  }
  if (s->precision != GS_F32 || s->skipped_steps > 0)
    fprintf(f, "  precision %s: %d skipped step(s) (inf/NaN), loss scale at the end %g\n",
            gs_dtype_name(s->precision), s->skipped_steps, s->final_loss_scale);
  if (!isnan(s->accuracy))
    fprintf(f, "  eval accuracy %.2f%% loss %.4f (on up to 10000 training samples)\n",
            100 * s->accuracy, s->eval_loss);
  const gs_cost_model *cm = &s->cost_model;
  if (!(cm->S_bytes > 0) || s->mode == GS_MODE_LOCAL) return;
  char m1[32], m2[32];
  human_bytes(cm->master_bytes_sent, m1, sizeof m1);
  human_bytes(cm->worker_bytes_sent, m2, sizeof m2);
  fprintf(f, "  cost model: %s\n              master %s each way, other ranks %s each way per "
          "step (vs model = measured sent+recv / model)\n",
          cm->formula, m1, m2);
  print_links(f, s);
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
          "measured step, from each link's counters:\n", s->hosts, extra, s->link_rate_bps / 1e6,
          s->link_latency_s * 1e6, s->link_delay);
  fprintf(f, "  host       sent      model       recv      model   busy: sending  receiving  "
          "either\n");
  for (int i = 0; i < s->nlinks; i++) {
    const gs_link_summary *l = &s->links[i];
    char a[32], b[32], c[32], d[32];
    human_bytes(l->tx_bytes, a, sizeof a);
    human_bytes(l->model_tx_bytes, b, sizeof b); /* "-": no model (a dedicated server) */
    human_bytes(l->rx_bytes, c, sizeof c);
    human_bytes(l->model_rx_bytes, d, sizeof d);
    char host[16];
    snprintf(host, sizeof host, "%d%s", l->host, l->host >= s->hosts ? " S" : "");
    fprintf(f, "  %-4s %10s %10s %10s %10s   %13.0f%% %9.0f%% %6.0f%%\n", host, a, b, c, d,
            100 * l->busy_tx, 100 * l->busy_rx, 100 * l->busy);
  }
  const gs_cost_model *cm = &s->cost_model;
  if (isfinite(cm->comm_s_predicted) && isfinite(cm->comm_s_measured))
    fprintf(f, "  communication per step: model %.2f ms, measured %.2f ms (%+.0f%%); the model's "
            "bottleneck: %s\n", cm->comm_s_predicted * 1e3, cm->comm_s_measured * 1e3,
            100 * (cm->comm_s_measured / cm->comm_s_predicted - 1), cm->bottleneck);
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
    fprintf(f, "  %-16s %-24.24s %6d %5d %10.1f %9.2f %9s %8s %8s %14s\n", mode ? mode : "peer",
            model ? model : "", batch, world, tp,
            1e3 * json_number_value(json_object_get(p, "step_time_s_median")), "-", "-", "-",
            "-");
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
    return;
  }
  fprintf(f, "\n== ps vs ring%s ==\n", json_array_size(peers) ? " (and peers, measured in this "
          "same invocation)" : "");
  if (notice && *notice) fprintf(f, "  NOTE: %s.\n", notice);
  fprintf(f, "  %-16s %-24s %6s %5s %10s %9s %9s %8s %8s %14s\n", "mode", "model", "batch",
          "world", "samples/s", "step ms", "imbalance", "scaling", "master", "rank 0 B/step");
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    char sc[16] = "-";
    if (!isnan(r->scaling_efficiency)) snprintf(sc, sizeof sc, "%.2f", r->scaling_efficiency);
    const gs_rank_summary *r0 = &r->per_rank[0];
    fprintf(f, "  %-16s %-24.24s %6d %5d %10.1f %9.2f %9.2f %8s %7.1f%% %14.0f\n",
            gs_mode_name(r->mode), r->model, r->batch, r->world, r->throughput_samples_per_s,
            1e3 * r->step_time_s_median, r->imbalance, sc, 100 * r->master_traffic_share,
            r0->bytes_sent + r0->bytes_recv);
  }
  size_t k;
  json_t *p;
  json_array_foreach(peers, k, p) print_peer(f, p, runs, n, true);
  /* ring / ps ratio for each world both ran */
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->mode != GS_MODE_RING) continue;
    for (size_t j = 0; j < n; j++) {
      const gs_summary *q = &runs[j];
      if (q->mode != GS_MODE_PS || !same_config(q, r)) continue;
      double tp = q->throughput_samples_per_s;
      if (tp > 0)
        fprintf(f, "  world %d %s: ring is %.2fx the throughput of ps; ps imbalance %.2f vs "
                "ring %.2f\n", r->world, r->model, r->throughput_samples_per_s / tp,
                q->imbalance, r->imbalance);
    }
  }
  json_array_foreach(peers, k, p) print_peer(f, p, runs, n, false);
}
