/* report.h: the contract of bench/report: what bench shows of its runs.
 *
 * In: every rank's measurements of a run (gs_rank_result: step rows and
 * spans, link counters, peak memory) and what the run was (gs_run_info).
 * ONE pure function (gs_summarize) turns them into the metrics of
 * docs/metrics.md (gs_summary); everything shown is drawn from summaries:
 *   the files of a run      steps.csv, runs/<id>/run.json, trace.json,
 *                           timeline.json (results.c, summary_json.c);
 *   report.json             the runs, the peers' rows, the environment and
 *                           the verdict (report.c, verdict.c);
 *   the terminal tables     tables.c; the SVG charts (charts*.c, timeline.c,
 *                           drawn with svg.c) and report.html (html.c).
 * The summary's members are named as the report.json keys, and a summary
 * read back from JSON must have every one of them: a missing or mistyped
 * value is an error naming it, never a zero. NaN stands for JSON null where
 * the schema allows null. Every file goes through bench/files. */
#ifndef GS_BENCH_REPORT_H
#define GS_BENCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "bench/bench.h"
#include "bench/costmodel/costmodel.h"
#include "bench/files/files.h"

#define GS_HOST_MAX 256

/* One rank's measurements of a run. */
typedef struct gs_rank_result {
  int rank;
  char host[GS_HOST_MAX];
  uint64_t peak_rss;
  /* emulated hosts: the first rank of each host reads its link's counters
   * over the measured steps (host -1: not read) */
  int link_host;
  uint64_t link_tx, link_rx;
  double link_window_s;
  double link_busy_tx_s, link_busy_rx_s, link_busy_s; /* busy time in the window */
  /* rank 0 with ps servers on hosts of their own: those hosts' links, read
   * over the same steps (hosts + k for server k; never on the wire) */
  struct gs_rank_result *server_links;
  int nserver_links;
  gs_step_row *rows;
  size_t nrows;
  gs_span *spans;
  size_t nspans;
  int failed;               /* the rank reported an error instead */
  char error[512];
  size_t want_rows, want_spans; /* rank 0, gathering: what the report promised, */
  uint32_t next_part;           /* and the part due next */
} gs_rank_result;
void gs_rank_result_free(gs_rank_result *r);

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
  bool ps_summation;        /* ps: BytePS' summation servers (--ps-spare-hosts) */
  int ps_spare;             /* with them: on this many spare hosts */
  double ps_partition_mb;   /* with them: --ps-partition-mb (0: the ps' rule, ps.h) */
  double ps_spare_share;    /* with them: --ps-spare-share (0: BytePS' formula) */
  const char *device;       /* the kernels' name: "cpu", "cuda" */
  const char *launcher;     /* who started the ranks: "gradsync", "torchrun", ... */
  const char *algo;         /* ring: the all-reduce that trained ("ring", "hier"); NULL: "" */
  const char *run_id;       /* the invocation's unique id (GS_RUN_ID, else the job's) */
  int threads;              /* BLAS threads per rank */
  size_t nparams;
  int nbuckets;
  double wall_start, wall_end;
  double accuracy, eval_loss; /* NaN: not measured */
  double heldout_accuracy, heldout_loss; /* --eval-data; NaN: not measured */
  /* --eval-data along the run: after step heldout_steps[i] (0-based) */
  const int64_t *heldout_steps;
  const double *heldout_curve_accuracy, *heldout_curve_loss;
  int nheldout;
  /* emulated hosts: K (0: none), link rate (bit/s) and one-way delay, and
   * how the delay was made ("netem", "none") */
  int hosts;
  double link_bps, latency_s;
  const gs_host_rates *link_host; /* hosts whose link has a rate of its own (NULL: none) */
  const char *delay;
  /* loopback (hosts 0): the transport as measured before the sweep, what
   * the cost model predicts the run with (0: not measured, no prediction) */
  double loop_alpha_s, loop_Bps;
  const size_t *bucket_bytes; /* nbuckets wire sizes in readiness order (the cost
                                 model's plan); NULL: no prediction */
  /* --compress powersgd: per bucket, the bytes and all-reduces of a
   * compressed step (the cost model's gs_cm_compressed), and the share of
   * the measured steps that compressed; NULL: every step sends bucket_bytes */
  const size_t *compressed_bytes;
  const int *compressed_collectives;
  double compressed_share;
  bool compressed_push;          /* ps: compressed_bytes are the pushes; parameters
                                    come back dense (bucket_bytes) */
  bool compressed_sums_back;     /* ps PowerSGD: the parts' sums come back too
                                    (compressed_bytes, before the parameters) */
  int repeat, repeats;      /* --repeat: this is repetition `repeat` (1..repeats) */
  gs_straggle straggle;     /* --slow, --jitter */
  gs_ps_sync ps_sync;       /* ps: the consistency model (zero: bsp) */
  int ps_host_ranks;        /* ps: ranks per host that sum first (local-reduce; 0: flat) */
  int ring_period;          /* ring: --ring-period (1: every step) */
  gs_compress compress;     /* --compress (the zero value: none) */
} gs_run_info;

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
  double slow_factor;          /* --slow: this rank's compute factor (1: not slowed) */
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
  double comm_s_predicted;     /* communication the step waits for (costmodel.h exposed_s) */
  double comm_s_measured;      /* mean wait + reduction of the ranks that wait for it */
  double comm_s_without_overlap, step_s_predicted, link_one_way_busy_predicted;
  char *bottleneck;
} gs_cost_model;

/* One emulated host's link over the measured steps, from its counters. */
typedef struct gs_hostlink_summary {
  int host;
  double tx_bytes, rx_bytes;   /* per step: host -> switch, switch -> host */
  double model_tx_bytes, model_rx_bytes; /* what the cost model says they carry */
  double window_s;             /* the measured steps' wall time */
  double busy_tx, busy_rx, busy; /* fraction of window_s each direction sent; max */
  double rate_bps;             /* this link's rate (--link, or --link-host's for it) */
} gs_hostlink_summary;

/* One gradient bucket of a run (summary_buckets.c): means over the measured
 * steps and the ranks, in seconds from the step's start. */
typedef struct gs_bucket_timing {
  int bucket;                  /* readiness order: 0 holds the last layers */
  double bytes;                /* on the wire per step (the plan's) */
  double ready_s;              /* backward had made every gradient in it */
  double comm_start_s, comm_end_s; /* its first communication began, its last ended */
  double comm_s;               /* the time its communication spans took */
  double hidden_s;             /* of comm_s, what ran while the rank computed */
} gs_bucket_timing;

/* Stragglers and stale models (summary_stale.c; docs/stragglers.md): what
 * a run shows of who waited, of staleness and of convergence in time. */
#define GS_LOSS_CURVE_MAX 600  /* a loss curve's points: at most this + 1 */
typedef struct gs_stale_summary {
  char *throughput_basis;      /* "steps" (synchronous) or "window" (docs/metrics.md) */
  int64_t *staleness_hist;     /* applied gradients by staleness 0..nhist-1 */
  int nhist;
  double *waited_for_s;        /* world x world: [r * world + q], rank r waiting on rank q */
  double *waited_backend_s;    /* world: waiting on the server or the collective itself */
  double *loss_t_s, *loss;     /* the smoothed training loss at seconds from the start */
  int nloss;
  /* --eval-data along the run: after step heldout_step[i] (0-based, rank
   * 0's), which ended heldout_t_s[i] seconds from the start as loss_t_s */
  int64_t *heldout_step;
  double *heldout_t_s, *heldout_accuracy, *heldout_loss;
  int nheldout;
  double target_loss;          /* NaN: none */
  char *target_from;           /* "--target-loss", the id of the run it came from, "" */
  double time_to_target_s;     /* NaN: not reached (or no target) */
  double model_samples_per_s;  /* the straggler model's prediction (NaN: none) */
  char *model_formula;
} gs_stale_summary;

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
  int ps_spare_hosts;          /* BytePS' summation servers on this many spare hosts
                                  (--ps-spare-hosts); -1: not those */
  double ps_partition_mb;      /* their partitions' most MiB (0: not those) */
  char *launcher;
  char *algo;
  char *run_id;
  char *slow;                  /* --slow as RANKS:FACTOR ("" none) */
  char *ps_sync;               /* "bsp", "ssp:2", "async", "bsp+backup:1" (ring, local: "") */
  int staleness_max;           /* over every rank's applied gradients, every step */
  double staleness_mean;       /* NaN: none applied (or not a stale model) */
  int dropped_gradients;       /* backup workers: gradients not applied */
  int ring_period;             /* ring: parameters averaged every H steps (1: gradients
                                  every step; 0: not a ring run) */
  double jitter_cv;            /* --jitter */
  char *compress;              /* --compress: "none", "fp16", "powersgd:2", "topk:0.1" */
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
  double heldout_accuracy, heldout_loss; /* --eval-data; NaN: not measured */
  int hosts;                   /* emulated hosts (0: one machine's loopback) */
  double link_rate_bps, link_latency_s; /* meaningful when hosts > 0 */
  char *link_delay;            /* "netem" or "none" */
  gs_hostlink_summary *links;      /* nlinks entries, by host */
  int nlinks;
  /* per bucket (summary_buckets.c); none at world 1 or without spans */
  gs_bucket_timing *bucket_timing;
  int nbucket_timing;
  double backward_start_s, backward_end_s; /* means, from the step's start */
  /* --repeat: this record is repetition `repeat`; the repetitions it
   * summarises (itself alone in run.json; every one in report.json, whose
   * record is the median's) with each one's throughput, step median, id */
  int repeat, nrepeats;
  double *repeat_throughput, *repeat_step_median;
  char **repeat_ids;
  gs_stale_summary stale;
} gs_summary;

/* The summary of one run from every rank's measurements (ranks[0..world-1]
 * in rank order). Pure: reads nothing but its arguments. GS_EINVAL when a
 * rank reported a failure instead of measurements, or ranks are missing;
 * GS_ENOMEM. On failure *out is left empty (gs_summary_free is safe). */
int gs_summarize(const gs_run_info *info, const gs_rank_result *ranks, gs_summary *out,
                 gs_err *e);
void gs_summary_free(gs_summary *s);
/* The first step the summaries measure: --warmup's, unless the run has
 * no step after it, when every step is measured. The ranks read their
 * links' counters at the same step, so that both cover one window. */
int64_t gs_first_measured(int64_t warmup, int64_t steps);
/* The links and the cost model's time of a run on emulated hosts (part of
 * gs_summarize; summary_links.c). */
int gs_summary_links(const gs_run_info *info, const gs_rank_result *ranks, gs_summary *s,
                     gs_err *e);
/* Each bucket's timing (part of gs_summarize; summary_buckets.c): from the
 * ranks' spans of the measured steps [first, steps), per bucket its
 * "ready" mark and its communication spans (any span of the bucket but
 * "ready" and "optimizer"); and its report.json "bucket_timing" object
 * (null without timings), written and read back. */
int gs_summary_buckets(const gs_run_info *info, const gs_rank_result *ranks, size_t first,
                       size_t steps, gs_summary *s, gs_err *e);
/* Per bucket, the fraction of backward done when it was ready (the cost
 * model's gs_cm_job.ready): its mean "ready" mark within the mean backward
 * span, in [0, 1] and non-decreasing. GS_EINVAL when one of the nbuckets
 * went unseen or backward has no span. */
int gs_bucket_ready_fractions(const gs_summary *s, int nbuckets, double *ready, gs_err *e);
json_t *gs_bucket_timing_json(const gs_summary *s);
int gs_bucket_timing_read(json_t *run, const char *where, gs_summary *s, gs_err *e);

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

/* summary_stale.c: the stale members of a summary (part of gs_summarize,
 * after gs_summary_links), freeing them, and the sweep's targets: target
 * > 0 is --target-loss, else each run's target is 1.10 x the final
 * smoothed loss of the synchronous run (ring every step, else ps bsp) of
 * its world, model, data and batch; time_to_target_s follows. Whether
 * runs are about stragglers or staleness (a run of several ranks with
 * --slow, --jitter, a stale model, or --target-loss): then the comparison
 * and the verdict say how long each took to the target. */
int gs_stale_summarize(const gs_run_info *info, const gs_rank_result *ranks, size_t steps,
                       gs_summary *s, gs_err *e);
void gs_stale_free(gs_stale_summary *st);
void gs_stale_targets(gs_summary *runs, size_t n, double target);
bool gs_stale_about_stragglers(const gs_summary *runs, size_t n);
/* summary_json_stale.c: their report.json keys (beside the run's: put
 * adds, get demands every one). */
int gs_stale_json_put(json_t *j, const gs_summary *s, gs_err *e);
int gs_stale_json_get(json_t *j, gs_summary *s, const char *where, gs_err *e);
/* tables_stale.c: the run's stale lines (under its table, tables.c) and
 * the comparison of time to target; verdict_stale.c: the verdict's
 * sentence on time to target (text appended to buf). */
void gs_stale_print(FILE *f, const gs_summary *s);
void gs_stale_print_comparison(FILE *f, const gs_summary *runs, size_t n);
void gs_stale_verdict(const gs_summary *runs, size_t n, char *buf, size_t cap);
/* A run's name in those (tables_stale.c): "ring", "ring period 4", "ps
 * ssp:2", "local". */
void gs_stale_label(const gs_summary *r, char *buf, size_t cap);
/* charts_stale.c: loss.svg (every run's smoothed loss against wall-clock
 * time) and staleness.svg (each stale run's histogram); nothing when no
 * run has a loss curve / a stale model. */
int gs_charts_stale(const char *dir, const gs_summary *runs, size_t n, gs_err *e);

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
/* charts_ranks.c: memory.svg (peak RSS per rank); timeline.c:
 * timeline-<id>.svg, a few measured steps of one run rank by rank, from its
 * timeline data; charts_busbw.c: the collective benchmark's busbw.svg from
 * the tables gs_collective_tables read (every collective's table of dir,
 * collective-*.json for all_reduce and <collective>-*.json for the others,
 * that invocation run_id wrote, or all of them when run_id is NULL; as a
 * new array), one series per collective, mode and world. */
int gs_charts_memory(const char *dir, const gs_summary *runs, size_t n, gs_err *e);
/* charts_hosts.c: hosts.svg (step time against hosts, measured and the
 * cost model) and links.svg (each host's link busy), for runs on emulated
 * hosts; nothing otherwise. */
int gs_charts_hosts(const char *dir, const gs_summary *runs, size_t n, gs_err *e);
/* charts_buckets.c: buckets-<id>.svg (each bucket's ready mark and
 * communication against backward, per run) and bucket-sweep.svg (step time
 * against --bucket-mb with the cost model's, for a sweep of several). */
int gs_charts_buckets(const char *dir, const gs_summary *runs, size_t n, gs_err *e);
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

/* projection.svg (charts_projection.c): bench --project's samples per
 * second and scaling efficiency of nmodes modes against world size. */
int gs_charts_projection(const char *dir, const gs_cm_projection *p, int nmodes, gs_err *e);

/* charts_spare.c: spare.svg, BytePS' summation servers over their spare
 * hosts k: a sweep's measured step and communication beside t_opt and the
 * ring's (nothing without such runs), or a projection's predicted ones. A
 * run's communication: from its first bucket's first communication to its
 * last's end (NaN without bucket timing); its link time: the busiest link
 * direction's model bytes over that link's rate (NaN without links). */
int gs_charts_spare(const char *dir, const gs_summary *runs, size_t n, gs_err *e);
int gs_charts_spare_projection(const char *dir, const gs_cm_projection *p, gs_err *e);
double gs_summary_comm_window(const gs_summary *s);
double gs_summary_link_time(const gs_summary *s);

/* ---- the files of one run (results.c): ----
 *   steps.csv             one row per rank per step, appended as the run goes
 *                         (another launcher's: rank 0's, then everyone's);
 *   runs/<id>/run.json    the run's summary (gs_summary as JSON);
 *   runs/<id>/trace.json  the run's Chrome trace (one process per rank);
 *   runs/<id>/timeline.json  a few of its steps rank by rank, drawn by the
 *                         report (timeline-<id>.svg). */
/* steps.csv: one formatted row of a run (returns its length, -1 when cap
 * is short). */
int gs_csv_row(char *buf, size_t cap, const gs_run_info *run, const gs_step_row *row,
               uint64_t param_hash);
/* dir/steps.csv made afresh with its header (O_EXCL | O_NOFOLLOW: an
 * earlier run's, or a link of that name, is an error saying so); returns
 * the open descriptor for rows as they go. Our launcher's sweep makes it
 * once; a job that another launcher started, on rank 0, and at the end
 * replaces it atomically with every rank's gathered rows. */
int gs_csv_start(const char *dir, gs_err *e);
/* A rank of our launcher's: dir/steps.csv to append to, only when it is
 * still the regular file of this user that the sweep made (not a link). */
int gs_csv_open(const char *dir, gs_err *e);
int gs_results_write_steps(const char *dir, const gs_run_info *info,
                           const gs_rank_result *ranks, gs_err *e);

/* Write run.json (s), trace.json (the ranks' spans) and timeline.json under
 * dir/runs/<s->id>/, atomically; read a run.json back (every metric must
 * be there: see gs_summary_from_json). */
int gs_results_write_run(const char *dir, const gs_summary *s, const gs_run_info *info,
                         const gs_rank_result *ranks, gs_err *e);
int gs_results_read_run(const char *dir, const gs_run_info *info, gs_summary *out, gs_err *e);

/* Whether dir holds a run already (steps.csv or report.json, or a link of
 * either name). */
bool gs_holds_run(const char *dir);

/* ---- the report of a sweep ---- */
/* link_text.c: the sentence saying where the ranks talk and why (the
 * sweep's header, report.json's "links_chosen"); a link rate for people
 * ("1 Gbit/s"). */
#define GS_LINK_SENTENCE_MAX 1400
const char *gs_link_sentence(const gs_opts *o, char *buf, size_t cap);
void gs_rate_text(double bps, char *buf, size_t cap);

/* verdict.c: what the sweep found, in a few plain sentences computed from
 * its runs (the records of gs_summary_repeats): ring against ps at the
 * largest world both ran, with the spread of the repetitions, and the
 * bottleneck each run measured (a link's busy share and bytes, the
 * master's CPU, cores shared by the ranks, or none); on loopback with more
 * ranks than cores, first that the comparison is not meaningful there and
 * why. cores: this machine's online cores; link: gs_link_sentence's. The
 * figures it quotes are in its JSON (report.json's "verdict"). */
typedef struct gs_verdict {
  char text[2048];
  int world;                  /* the world compared; 0: no pair of ps and ring */
  int hosts;                  /* its emulated hosts (0: loopback) */
  bool meaningful;            /* false: loopback with more ranks than cores */
  bool within_noise;          /* the repetitions' ranges of ps and ring overlap */
  double ratio, ratio_lo, ratio_hi; /* ring / ps throughput: medians; slowest/fastest */
  double ps_link_busy, ps_link_bytes_vs_worker; /* host 0's link in ps (NaN: loopback) */
  double ring_link_busy_lo, ring_link_busy_hi, ring_link_bytes_spread;
  double ring_hidden_share;   /* the ring's communication that ran behind backward */
  char ps_bottleneck[48], ring_bottleneck[48];
} gs_verdict;
void gs_verdict_of(const gs_summary *runs, size_t n, long cores, const char *link,
                   gs_verdict *v);
json_t *gs_verdict_json(const gs_verdict *v);
/* The verdict's text, wrapped, after a title line. */
void gs_verdict_print(FILE *f, const char *text);
/* verdict_buckets.c: for a --bucket-mb sweep, per mode, world and model
 * the best bucket size measured and why each other size lost (more
 * buckets, each paying the collective's fixed costs; or a last bucket
 * exposed after backward, with the measured tail); "" without a sweep.
 * report.json's "bucket_verdict". */
void gs_bucket_verdict(const gs_summary *runs, size_t n, char *text, size_t cap);

/* report.json from the runs' summaries, the peers' rows (peer.c; NULL:
 * none), the environment and the configuration (a new reference; NULL with
 * e set). */
json_t *gs_report_json(const gs_opts *o, const gs_summary *runs, size_t n, json_t *peers,
                       bool interrupted, gs_err *e);
/* Write report.json, the SVG charts and trace.json into dir. */
int gs_report_write(const char *dir, const gs_opts *o, const gs_summary *runs, size_t n,
                    json_t *peers, bool interrupted, gs_err *e);
/* The collective benchmark's report: busbw.svg and report.html from the
 * tables of dir that invocation run_id wrote (every collective of it; none
 * of an earlier invocation into the same directory); nothing when there is
 * none. */
int gs_report_collective(const char *dir, const gs_opts *o, const char *run_id, gs_err *e);
/* A run's ranks on one host outnumber this machine's online cores: a
 * notice for the comparison (the runs then measure scheduling as much as
 * synchronization) written into buf, or false with buf empty. */
bool gs_oversubscribed(const gs_summary *runs, size_t n, char *buf, size_t cap);
/* --report DIR: print the tables of DIR/report.json's runs to out and draw
 * its charts again; every metric must be in the file (GS_EPROTO naming the
 * missing one otherwise). */
int gs_report_redraw(const char *dir, FILE *out, gs_err *e);
/* DIR/report.json: the document (a new reference) and its runs' summaries
 * (malloc'ed, *n of them; gs_summaries_free); every metric must be there. */
int gs_report_load(const char *dir, json_t **doc, gs_summary **runs, size_t *n, gs_err *e);
/* compare.c, --compare DIR[,DIR...]: the runs of several sweeps' reports
 * side by side: the stragglers table, the time to the target (target > 0:
 * --target-loss, else from a synchronous run among them) and loss.svg,
 * staleness.svg and compare.json written into out_dir. */
int gs_report_compare(const char *const *dirs, int ndirs, const char *out_dir, double target,
                      FILE *out, gs_err *e);
/* Free n summaries and the array. */
void gs_summaries_free(gs_summary *runs, size_t n);
/* --version: version, git revision, build type, CPU code path, libraries,
 * and whether a GPU is usable (or why not). */
void gs_version_print(FILE *f);

#endif
