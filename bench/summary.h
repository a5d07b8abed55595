/* summary.h (internal to bench/): the metrics of one run, as DESIGN.md and
 * the README define them, computed by ONE pure function from what the ranks
 * measured (their step rows and spans) plus what the run was.
 *
 * Everything the bench shows about a run is drawn from a gs_summary:
 * run.json and report.json (summary_json.c), the terminal tables
 * (tables.c) and the SVG charts (charts.c). The members are named as the
 * report.json keys, and a summary read back from JSON must have every one
 * of them: a missing or mistyped value is an error naming it, never a zero.
 * NaN stands for JSON null where the schema allows null. */
#ifndef GS_BENCH_SUMMARY_H
#define GS_BENCH_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "bench/internal.h"

/* What a run was: the configuration of one combination of the sweep and
 * the facts its rank 0 learned (model size, device, wall clock). */
typedef struct gs_run_info {
  gs_mode mode;
  int world;
  const char *model, *data;
  int batch;
  double bucket_mb, first_bucket_mb;
  gs_dtype precision;       /* compute dtype */
  gs_dtype wire;            /* gradient dtype on the wire: the cost model's S */
  int warmup;               /* steps left out of the summaries */
  bool overlap, dedicated;  /* dedicated: a ps server in its own process */
  int ps_servers;           /* ps: servers sharing the parameters (1: one; else ps/shard.c's
                               placement, server k a thread of rank k * world / K) */
  bool ps_server_hosts;     /* ps: the servers run in processes (on hosts) of their own */
  const char *device;       /* the kernels' name: "cpu", "cuda" */
  const char *launcher;     /* who started the ranks: "gradsync", "torchrun", ... */
  const char *algo;         /* ring: the all-reduce that trained ("ring", "hier"); NULL: "" */
  const char *run_id;       /* the invocation's unique id (GS_RUN_ID, else the job's) */
  int threads;              /* BLAS threads per rank */
  size_t nparams;
  int nbuckets;
  double wall_start, wall_end;
  double accuracy, eval_loss; /* NaN: not measured */
  /* emulated hosts: K (0: none), link rate (bit/s) and one-way delay, and
   * how the delay was made ("netem", "none") */
  int hosts;
  double link_bps, latency_s;
  const char *delay;
  const size_t *bucket_bytes; /* nbuckets wire sizes in readiness order (the cost
                                 model's plan); NULL: no prediction */
  int repeat, repeats;      /* --repeat: this is repetition `repeat` (1..repeats) */
} gs_run_info;

/* The run info of one combination of o's sweep (model, batch and bucket
 * from o->train); the measured facts stay zero / NaN. */
gs_run_info gs_run_info_of(const gs_opts *o, gs_mode mode, int world);

/* The run's id, e.g. "ps-w4-mlp_784-512-512-10-b64-bk25" (safe as a name),
 * with "-r2" for the second of several repetitions. */
void gs_run_id(const gs_run_info *info, char *buf, size_t cap);

/* One rank, per measured step (means over the steps after the warm-up). */
typedef struct gs_rank_summary {
  int rank;
  char *host;
  double bytes_sent, bytes_recv;
  double compute_s, data_s, forward_s, backward_s;
  double comm_wait_s, reduce_s, update_s;
  double comm_hidden_s;        /* the backend's communication while this rank computed */
  double busy_s, idle_s, step_s;
  double model_bytes_sent, model_bytes_recv, traffic_vs_model;
  int64_t peak_rss_bytes;
} gs_rank_summary;

/* A dedicated ps server's share, per measured step. */
typedef struct gs_server_summary {
  double bytes_sent, bytes_recv, reduce_s, update_s, busy_s;
  double model_bytes_sent, model_bytes_recv;
} gs_server_summary;

/* The cost model's bytes per step (README "Cost model"), and on emulated
 * hosts its time (summary_links.c; NaN / "" elsewhere). */
typedef struct gs_cost_model {
  char *formula;
  double S_bytes;
  double master_bytes_sent, master_bytes_recv, worker_bytes_sent, worker_bytes_recv;
  double comm_s_predicted;     /* communication the step waits for (model.h exposed_s) */
  double comm_s_measured;      /* mean wait + reduction of the ranks that wait for it */
  double comm_s_without_overlap, step_s_predicted, link_one_way_busy_predicted;
  char *bottleneck;
} gs_cost_model;

/* One emulated host's link over the measured steps, from its counters. */
typedef struct gs_link_summary {
  int host;
  double tx_bytes, rx_bytes;   /* per step: host -> switch, switch -> host */
  double model_tx_bytes, model_rx_bytes; /* what the cost model says they carry */
  double window_s;             /* the measured steps' wall time */
  double busy_tx, busy_rx, busy; /* fraction of window_s each direction sent; max */
} gs_link_summary;

typedef struct gs_summary {
  char *id;
  gs_mode mode;
  int world;
  char *model, *data;
  int batch, global_batch;
  double bucket_mb, first_bucket_mb;
  gs_dtype precision;
  char *device;
  bool overlap, ps_dedicated;
  int ps_servers;
  bool ps_server_hosts;
  char *launcher;
  char *algo;
  char *run_id;
  int threads_per_rank;
  int64_t steps, nparams;
  int nbuckets;
  double gradient_bytes, wall_time_s;
  double throughput_samples_per_s;
  double step_time_s_median, step_time_s_p95, step_time_s_mean;
  double imbalance;
  double scaling_efficiency;   /* NaN: no world-1 run to compare with */
  /* the single master's (rank 0's, or a dedicated server's) bytes per step:
   * its share of all traffic, and over a worker's (the mean of the other
   * ranks'); NaN where there is no single master (ring, sharded ps, world 1) */
  double master_traffic_share, master_bytes_vs_worker;
  int skipped_steps;
  double final_loss;           /* NaN: diverged */
  int64_t warmup_steps;
  double final_loss_scale;
  int64_t measured_steps;
  gs_rank_summary *per_rank;   /* world entries, rank order */
  bool has_server;             /* server is meaningful (JSON null otherwise) */
  gs_server_summary server;
  gs_cost_model cost_model;
  double *step_time_s;         /* steps entries, the warm-up included */
  double accuracy, eval_loss;  /* NaN: not measured */
  int hosts;                   /* emulated hosts (0: one machine's loopback) */
  double link_rate_bps, link_latency_s; /* meaningful when hosts > 0 */
  char *link_delay;            /* "netem" or "none" */
  gs_link_summary *links;      /* nlinks entries, by host */
  int nlinks;
  /* --repeat: this record is repetition `repeat`; the repetitions it
   * summarises (itself alone in run.json; every one in report.json, whose
   * record is the median's) with each one's throughput, step median, id */
  int repeat, nrepeats;
  double *repeat_throughput, *repeat_step_median;
  char **repeat_ids;
} gs_summary;

/* The summary of one run from every rank's measurements (ranks[0..world-1]
 * in rank order). Pure: reads nothing but its arguments. GS_EINVAL when a
 * rank reported a failure instead of measurements, or ranks are missing;
 * GS_ENOMEM. On failure *out is left empty (gs_summary_free is safe). */
int gs_summarize(const gs_run_info *info, const gs_rank_result *ranks, gs_summary *out,
                 gs_err *e);
void gs_summary_free(gs_summary *s);
/* The links and the cost model's time of a run on emulated hosts (part of
 * gs_summarize; summary_links.c). */
int gs_summary_links(const gs_run_info *info, const gs_rank_result *ranks, gs_summary *s,
                     gs_err *e);

/* scaling_efficiency of every run: throughput(N) / (N x throughput(1))
 * against the world-1 run of the same mode, or else of the local step (a
 * sweep of several modes runs world 1 once, as local: every mode's world 1
 * is that step), same model, bucket size and batch (the global batch with
 * strong scaling); NaN without one. */
void gs_summary_scaling(gs_summary *runs, size_t n, bool strong);
/* The run of mode at world among runs (at world 1 the local run when the
 * mode has none of its own) with the configuration of like; NULL: none. */
const gs_summary *gs_summary_find(const gs_summary *runs, size_t n, gs_mode mode, int world,
                                  const gs_summary *like);

/* --repeat (repeats.c): the repetitions of each configuration (runs[0..n),
 * as they came) become one record, the repetition of median throughput,
 * carrying every repetition's throughput, step median and id; the others
 * are freed. *out (malloc'ed, *nout records, in the order of the first
 * repetition) owns what it holds; runs is emptied. GS_ENOMEM. */
int gs_summary_repeats(gs_summary *runs, size_t n, gs_summary **out, size_t *nout, gs_err *e);
/* The spread of a record's repetitions: min and max of their throughput
 * (its own throughput twice when it has none). */
void gs_summary_spread(const gs_summary *s, double *lo, double *hi);

/* JSON (summary_json.c): the run object of report.json (a new reference,
 * NULL with e set when a value that may not be null is not finite), and
 * back: every member must be there with its type (GS_EPROTO naming the
 * key and the run otherwise). */
json_t *gs_summary_json(const gs_summary *s, gs_err *e);
int gs_summary_from_json(json_t *j, gs_summary *out, gs_err *e);

/* Terminal tables (tables.c): one run, and the runs side by side with the
 * peers' rows (report.json's "peers"; NULL: none) and a notice beside
 * them (NULL or "": none); with one run and no peer, the notice alone. */
void gs_summary_print(FILE *f, const gs_summary *s);
/* One line as a run of the sweep ends (run done of total). */
void gs_summary_print_line(FILE *f, const gs_summary *s, int done, int total);
void gs_summary_print_comparison(FILE *f, const gs_summary *runs, size_t n, json_t *peers,
                                 const char *notice);

/* SVG charts (charts.c): scaling.svg, efficiency.svg, breakdown.svg,
 * bytes.svg and memory.svg in dir; scaling.svg draws peers (report.json's
 * "peers"; NULL: none) beside the modes. */
int gs_charts_write(const char *dir, const gs_summary *runs, size_t n, json_t *peers,
                    gs_err *e);
/* charts_ranks.c: memory.svg (peak RSS per rank); timeline-<id>.svg, a
 * few measured steps of one run rank by rank, from its timeline data; and the
 * collective benchmark's busbw.svg from the tables gs_collective_tables
 * read (every collective's table of dir, collective-*.json for all_reduce
 * and <collective>-*.json for the others, that invocation run_id wrote, or
 * all of them when run_id is NULL; as a new array), one series per
 * collective, mode and world. */
int gs_charts_memory(const char *dir, const gs_summary *runs, size_t n, gs_err *e);
/* charts_hosts.c: hosts.svg (step time against hosts, measured and the
 * cost model) and links.svg (each host's link busy), for runs on emulated
 * hosts; nothing otherwise. */
int gs_charts_hosts(const char *dir, const gs_summary *runs, size_t n, gs_err *e);
/* A timeline's data (the last few measured steps of each rank: when each
 * began, its compute, wait, reduction and optimizer; the backend thread's
 * spans), times from the first shown step's start: runs/<id>/timeline.json.
 * NULL when there is nothing to show. Drawn by gs_charts_timeline on a
 * time axis of span_s (at least its own span, gs_timeline_span), so that
 * the runs of one comparison share one scale. */
json_t *gs_timeline_json(const gs_run_info *info, const gs_rank_result *ranks);
double gs_timeline_span(json_t *tl);
int gs_charts_timeline(const char *dir, const char *id, json_t *tl, double span_s, gs_err *e);
json_t *gs_collective_tables(const char *dir, const char *run_id);
int gs_charts_busbw(const char *dir, json_t *tables, gs_err *e);

#endif
