/* costmodel.h: the contract of bench/costmodel: the time cost model of one
 * training step, for ps, ring and a sharded parameter server (the
 * command line's --project and --calibrate and the "cost_model" object of
 * report.json use it; nothing below bench/ sees it, and it sees nothing of
 * the command line: it takes plain configurations). docs/model.md states
 * every formula, its units and its assumptions; this header is the
 * contract of the code.
 *
 * Pure functions (costmodel.c: the formulas per topology, fit.c,
 * calib.c, projection.c, compress.c): no clock, no socket, no global
 * state, except measure.c, which measures this machine for a calibration,
 * and compress_measure.c, which times the compression's own work. Inputs are a
 * machine (rates and latencies, SI units: seconds, bytes, bytes/second),
 * a bucket plan (the real one, from worker/sync.h's gs_plan_buckets) and a
 * job (mode, world N, hosts K with N/K ranks per host in host-major order,
 * batch, compute per sample, overlap). Outputs are bytes per host link and
 * direction, communication time, exposed communication after overlap with
 * backward (bucket by bucket), step time, samples/s, scaling efficiency
 * against world 1, and the term that bounds the step.
 *
 *   machine + plan + job --gs_cm_predict--> gs_cm_result (one row)
 *   machine + plan + worlds x modes --gs_cm_project--> gs_cm_projection
 *       --> gs_cm_print_table (FILE *), gs_cm_projection_json (json_t *)
 *   measured (world, bytes, seconds) points --gs_cm_fit_*--> alpha, beta, gamma
 *   gs_cm_calib <-> calibration JSON file (strictly validated)
 *
 * Every function that can fail returns GS_OK or a GS_E* code and fills the
 * gs_err with a sentence naming the field and what to do. */
#ifndef GS_BENCH_COSTMODEL_H
#define GS_BENCH_COSTMODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kernels/kernels.h"
#include "worker/worker.h"

/* ---- modes ---- */

typedef enum gs_cm_mode {
  GS_CM_PS = 0,      /* DataParallel master: rank 0 on host 0 reduces and updates */
  GS_CM_RING = 1,    /* ring all-reduce (reduce-scatter + all-gather), host-major */
  GS_CM_RD = 2,      /* recursive doubling all-reduce (small messages) */
  GS_CM_SPS_COLO = 3,  /* sharded ps by key range, one server on every host */
  GS_CM_SPS_HOSTS = 4, /* sharded ps by key range, servers on hosts of their own */
  GS_CM_BYTEPS = 5,    /* BytePS' summation servers: servers spare hosts and one per
                          workers' host in BytePS' split, partitions pipelined, every
                          rank's optimizer (ps/split.c, ps/sched.c) */
  GS_CM_NMODES = 6
} gs_cm_mode;
/* "ps", "ring", "rd", "sps-colo", "sps-hosts", "byteps" */
const char *gs_cm_mode_name(gs_cm_mode m);
int gs_cm_mode_parse(const char *s, gs_cm_mode *out, gs_err *e);

/* ---- inputs ---- */

/* The hardware, as calibration measures it or a user states it. */
typedef struct gs_cm_machine {
  double link_Bps;       /* b: each host link, bytes/s per direction */
  double link_latency_s; /* a: one-way latency of a host link */
  double alpha_s;        /* per-message overhead of the transport (occupies an endpoint) */
  double local_Bps;      /* same-host transport (loopback, ipc, NVLink), bytes/s */
  double reduce_Bps;     /* summing: bytes of one operand added into another per second */
  double copy_Bps;       /* memory copy, bytes/s */
  double optim_pps;      /* optimizer (average + SGD): parameters updated per second */
  double server_reduce_Bps; /* a CPU summation server's summing rate (byteps; 0: reduce_Bps,
                               the workers' own) */
} gs_cm_machine;
/* Rates > 0 and finite, latency and alpha >= 0 and finite (server_reduce_Bps
 * >= 0: 0 is reduce_Bps). */
int gs_cm_machine_check(const gs_cm_machine *m, gs_err *e);
/* {"link_Bps", "link_latency_s", "alpha_s", "local_Bps", "reduce_Bps",
 *  "copy_Bps", "optimizer_params_per_s", "server_reduce_Bps"} */
json_t *gs_cm_machine_json(const gs_cm_machine *m);

/* The gradient traffic of one step: bucket sizes in bytes on the wire, in
 * readiness order (bucket 0 holds the last layers and is ready first). */
typedef struct gs_cm_plan {
  size_t *bytes;         /* nbuckets entries (owned) */
  int nbuckets;
  size_t nparams;        /* parameters the optimizer updates */
  size_t elem_bytes;     /* wire dtype size */
  double total;          /* S: sum of bytes */
  /* the model's tensors, where the plan was made from them (0 / NULL: not known) */
  int ntensors;
  int *first_tensor;     /* per bucket, the tensor whose gradient completes it (its
                            lowest: backward walks from the last tensor) (owned) */
  double *tensor_macs;   /* per tensor, a profile's layer work per sample (owned;
                            NULL for models that are timed, not counted) */
  double *tensor_bwd_s;  /* per tensor, the backward a profile measured before its
                            gradient was ready (owned; NULL: not a profile) */
  double prof_fwd_s, prof_bwd_s; /* a profile's measured compute per sample (0: none) */
} gs_cm_plan;
/* DDP's plan (gs_plan_buckets) over parameter sizes in model order
 * (elements). Caps in MiB, as --first-bucket-mb / --bucket-mb. */
int gs_cm_plan_from_sizes(const size_t *param_sizes, int nparams, size_t elem_bytes,
                          double first_mb, double cap_mb, gs_cm_plan *out, gs_err *e);
/* The plan a run of `model` (any --model spec: resnet50, vgg16, bert-base,
 * lenet, mlp:...) uses, taken from the trainer itself. It builds a
 * throwaway trainer, so it briefly holds the model's parameter and
 * gradient buffers (12 bytes per parameter: 1.7 GB for vgg16). */
int gs_cm_plan_model(const char *model, gs_dtype wire, double first_mb, double cap_mb,
                     gs_cm_plan *out, gs_err *e);
void gs_cm_plan_free(gs_cm_plan *p);

/* ---- when gradients are ready (readiness.c) ----
 * Per tensor, in the model's order, tensor_ready[i] is the fraction of
 * backward done when tensor i's gradient is final: non-increasing in i
 * (backward walks from the last tensor), in [0, 1]. A bucket is ready with
 * its first_tensor. */
#define GS_CM_MAX_TENSORS 1024
int gs_cm_ready_check(const double *tensor_ready, int ntensors, const char *what, gs_err *e);
/* The default: each bucket ready at the share of the plan's bytes up to
 * and including it (nbuckets entries). */
void gs_cm_ready_by_bytes(const gs_cm_plan *p, double *bucket_ready);
/* From layer work (gs_cm_plan.tensor_macs), or from a profile's measured
 * backward (gs_cm_plan.tensor_bwd_s, seconds in place of multiply-adds):
 * backward spends on each tensor its share of the work, last tensor first. */
int gs_cm_ready_from_macs(const double *macs, int ntensors, double *tensor_ready, gs_err *e);
/* The plan's per-bucket readiness (gs_cm_job.ready, nbuckets entries).
 * GS_EINVAL when the plan does not know its tensors or ntensors differs
 * (a calibration of another model), naming both counts. */
int gs_cm_plan_ready(const gs_cm_plan *p, const double *tensor_ready, int ntensors,
                     double *bucket_ready, gs_err *e);

typedef struct gs_cm_job {
  gs_cm_mode mode;
  int world, hosts;      /* N, K: N/K ranks on every host, rank r on host r / (N/K) */
  int servers;           /* sps-hosts: server hosts (>= 1); byteps: spare hosts (>= 0);
                            ignored by other modes (sps-colo has one server per host) */
  double spare_share;    /* byteps: one spare host's share of the parameters (0: BytePS'
                            2(n-1)/(n^2+kn-2k), n the hosts, k the spare hosts) */
  size_t partition_bytes; /* byteps: a bucket goes in partitions of at most this (0: the
                             ps' rule, ps.h gs_ps_partition_bytes: 4 MiB, a 32nd of S) */
  const gs_cm_plan *plan;
  const double *ready;   /* NULL, or per bucket the fraction of backward done when it is
                            ready (non-decreasing in [0, 1]); NULL: in proportion to bytes */
  int batch;             /* per rank */
  double fwd_s, bwd_s;   /* compute per sample */
  bool overlap;          /* a bucket may leave as soon as backward produced it */
  bool barrier;          /* ps family: the server waits for every bucket before it
                            updates (loss scaling), as ps.h does with fp16 / bf16 */
  /* ring, compressed (gs_cm_compressed): NULL for one all-reduce per bucket
   * and nothing else on the communication thread */
  const int *collectives;   /* per bucket, the all-reduces it takes (powersgd: up to 3) */
  const double *extra_s;    /* per bucket, seconds of compression on the communication
                               thread, which nothing else uses meanwhile (ps: before
                               the push) */
  const size_t *push_bytes; /* ps: per bucket, a push's bytes where they are not the
                               plan's (top-k's sparse pushes, PowerSGD's parts; the
                               sum, the optimizer and the pull stay the plan's);
                               NULL: the plan's */
  const size_t *back_bytes; /* ps: per bucket, bytes a rank gets back before the
                               parameters, a round trip earlier (PowerSGD's sums of
                               its parts); NULL: none */
  bool host_reduce;      /* ps family and ring: the n ranks of a host reduce in shared
                            memory first (ps/hostagg.c: one push per host, parameters
                            shared inside it; the ring: allreduce/hier.c), so the links
                            carry what K hosts of one rank each would (ps: (K-1) S at
                            the master, ring: 2(K-1)/K S); rd ignores it */
} gs_cm_job;

/* ---- outputs ---- */

typedef enum gs_cm_bottleneck {
  GS_CM_B_COMPUTE = 0,
  GS_CM_B_MASTER_LINK,      /* ps: host 0's link (or loopback when K = 1) */
  GS_CM_B_MASTER_REDUCE,    /* ps: the master's reduction and optimizer */
  GS_CM_B_RING_LATENCY,     /* ring: 2(N-1)(alpha + a) per bucket */
  GS_CM_B_RING_BANDWIDTH,   /* ring: 2(N-1)/N S / b */
  GS_CM_B_RING_REDUCE,      /* ring: (N-1)/N S summed and copied */
  GS_CM_B_RD_LATENCY,
  GS_CM_B_RD_BANDWIDTH,
  GS_CM_B_RD_REDUCE,
  GS_CM_B_HOST_LINK,        /* sps-colo: every host's link */
  GS_CM_B_SERVER_LINK,      /* sps-hosts: a server host's link */
  GS_CM_B_WORKER_LINK,      /* sps-hosts: a worker host's link */
  GS_CM_B_SERVER_REDUCE,    /* sharded ps: one server's reduction and optimizer */
  GS_CM_B_OPTIMIZER,        /* ring, rd: every rank's optimizer */
  GS_CM_B_COMPRESSION,      /* ring: the compression's own work (gs_cm_job.extra_s) */
  GS_CM_B_COUNT
} gs_cm_bottleneck;
/* "compute", "master link", "master reduction", "ring latency term", ... */
const char *gs_cm_bottleneck_name(gs_cm_bottleneck b);

typedef struct gs_cm_result {
  gs_cm_mode mode;
  int world, hosts, ranks_per_host, servers;
  bool overlap;
  double grad_bytes;            /* S */
  /* bytes per step on host links, per direction (in: into the host) */
  double hot_in, hot_out;       /* the busiest host: host 0 (ps), a server host
                                   (sps-hosts), any host (ring, rd, sps-colo) */
  double worker_in, worker_out; /* a host without master or server (ps, sps-hosts);
                                   equal to hot_* where every host is alike */
  /* seconds per step */
  double compute_s;             /* batch x (forward + backward) per sample */
  double comm_s;                /* communication if nothing overlapped: from the end
                                   of backward until the parameters are back (ps: the
                                   master's reduction and optimizer included) */
  double exposed_s;             /* communication the step waits for (with overlap) */
  double reduce_s;              /* reduction at the master (ps), at one server
                                   (sharded), at every rank (ring, rd) */
  double optimizer_s;           /* likewise for the optimizer */
  double step_s, samples_per_s;
  double efficiency;            /* step(world 1) / step(N): throughput(N) / (N x throughput(1)) */
  double latency_s, bandwidth_s;/* the alpha and a parts and the byte parts of every
                                   bucket's communication stages, summed */
  double link_busy;             /* fraction of the step the busiest link direction is busy */
  double link_s;                /* the busiest link direction's bytes over the link rate: the
                                   least communication its links allow (byteps: BytePS'
                                   t_opt = 2n(n-1)S / ((n^2+kn-2k) b); ring: 2(N-1)/N S / b) */
  gs_cm_bottleneck bottleneck;  /* the resource with the most busy time in the step */
} gs_cm_result;

/* One step of one job. GS_EINVAL on nonsense (world 0, hosts not dividing
 * world, rates <= 0, unknown mode, empty plan...), naming the field. */
int gs_cm_predict(const gs_cm_machine *m, const gs_cm_job *j, gs_cm_result *r, gs_err *e);

/* Hosts a job occupies: K, plus the server hosts of sps-hosts (numbered
 * K .. K+servers-1). */
int gs_cm_nhosts(const gs_cm_job *j);
/* Bytes per step host `host`'s link carries into and out of the host
 * (what its veth counters should read, protocol overhead aside). */
int gs_cm_link_bytes(const gs_cm_job *j, int host, double *in, double *out, gs_err *e);

/* The report.json "cost_model" object of one run: the job's shape and the
 * prediction (numbers as numbers, seconds and bytes). "comm_s_predicted" is
 * exposed_s (what a run's comm_wait_s measures, under the job's overlap),
 * "comm_s_without_overlap" is comm_s. The caller adds "comm_s_measured". */
json_t *gs_cm_result_json(const gs_cm_result *r);

/* ---- fitting measured points ---- */

typedef struct gs_cm_point {
  int world;             /* ranks of the measurement (1 for point to point) */
  double bytes, seconds;
} gs_cm_point;

typedef struct gs_cm_fit {
  double alpha_s;        /* seconds per message (intercept) */
  double beta_s;         /* seconds per byte moved (1 / bandwidth) */
  double gamma_s;        /* seconds per byte reduced (gs_cm_fit_reduce) */
  double rms_rel, max_rel; /* residuals relative to the measured times */
  int npoints;
} gs_cm_fit;

/* Weighted least squares: coef (p) minimising sum_i w_i^2 (y_i - X_i.coef)^2,
 * X row-major n x p (p <= 8). GS_EINVAL when the points do not determine
 * the coefficients (fewer points than unknowns, collinear columns). */
int gs_cm_lsq(const double *X, const double *y, const double *w, int n, int p, double *coef,
              gs_err *e);
/* t = alpha + beta m: a transport's point-to-point (or ping-pong half) times.
 * Weighted by 1/t, so small and large messages count alike. resid (n,
 * may be NULL) gets (measured - fitted) / measured. */
int gs_cm_fit_p2p(const gs_cm_point *pts, int n, gs_cm_fit *f, double *resid, gs_err *e);
/* Ring all-reduce times at several sizes and worlds (one host):
 * t = 2(N-1) alpha + 2(N-1)/N m beta + (N-1)/N m (1/reduce + 1/copy), the
 * last term known from m (its bytes/s) because it is collinear with beta. */
int gs_cm_fit_ring(const gs_cm_point *pts, int n, const gs_cm_machine *known, gs_cm_fit *f,
                   double *resid, gs_err *e);
/* t = c + gamma m: a reduction kernel's times (c lands in alpha_s). */
int gs_cm_fit_reduce(const gs_cm_point *pts, int n, gs_cm_fit *f, double *resid, gs_err *e);

/* ---- calibration record (a small JSON file) ---- */

typedef struct gs_cm_calib {
  char transport[64];    /* what alpha and local_Bps were measured over */
  double alpha_s, local_Bps, reduce_Bps, copy_Bps, optim_pps;
  double server_reduce_Bps; /* one CPU core summing 4 MiB partitions, as a summation
                            server does ("server_reduce_Bps", optional: 0 when absent) */
  bool has_link;         /* a network part (what-if, or fitted on emulated hosts) */
  double link_Bps, link_latency_s;
  char model[64];        /* the model compute was measured for */
  char precision[8];     /* "fp32", "fp16", "bf16" */
  double fwd_s, bwd_s;   /* compute per sample */
  int nready;            /* 0, or the model's tensors, with ready[] measured: */
  double ready[GS_CM_MAX_TENSORS]; /* per tensor, as gs_cm_ready_check (median of
                            the timed steps); "compute.ready_fraction" in the file */
  char comment[256];     /* free text ("" for none) */
} gs_cm_calib;
/* Strict: every required field present, numbers finite and in range, no
 * unknown key (a typo is an error, not a silent default). `what` names the
 * source in messages (a path). */
int gs_cm_calib_check(const gs_cm_calib *c, gs_err *e);
int gs_cm_calib_from_json(json_t *j, const char *what, gs_cm_calib *c, gs_err *e);
json_t *gs_cm_calib_json(const gs_cm_calib *c);
int gs_cm_calib_read(const char *path, gs_cm_calib *c, gs_err *e);
/* Checked, then written atomically. */
int gs_cm_calib_write(const char *path, const gs_cm_calib *c, gs_err *e);
/* The machine of a calibration (its link part only when has_link). */
void gs_cm_calib_machine(const gs_cm_calib *c, gs_cm_machine *m);

/* ---- projection: many worlds, several modes ---- */

typedef struct gs_cm_proj_in {
  const char *model;     /* label for the table and JSON */
  const gs_cm_plan *plan;
  const int *worlds;
  int nworlds;
  int ranks_per_host;    /* n; a world below n runs on one host */
  const gs_cm_mode *modes; /* NULL: ps, ring, sps-colo, sps-hosts */
  int nmodes;
  int server_hosts;      /* sps-hosts: 0 = as many as worker hosts */
  int batch;
  double fwd_s, bwd_s;
  int overlap;           /* -1: each mode's default (ps family off as DataParallel,
                            ring and rd on as DDP), 0 off, 1 on */
  bool barrier;
  const double *ready;   /* NULL, or per bucket as gs_cm_job.ready */
  const char *ready_by;  /* where ready came from, for the table and JSON (NULL: bytes) */
  bool host_reduce;      /* every mode as gs_cm_job.host_reduce (ranks_per_host > 1) */
  int spare_max;         /* BytePS over k = 0 .. spare_max spare hosts at every world (as
                            many as its hosts when larger); < 0: none */
  double spare_share;    /* as gs_cm_job's */
  size_t partition_bytes;
} gs_cm_proj_in;

typedef struct gs_cm_projection {
  gs_cm_machine machine;
  char model[64];
  int batch, ranks_per_host;
  bool host_reduce;
  double fwd_s, bwd_s;
  size_t nparams, elem_bytes;
  double grad_bytes;
  int nbuckets;
  char ready_by[128];    /* how each bucket's readiness was found */
  double *ready;         /* per bucket, the fraction of backward done when it is ready
                            (owned; bytes' fractions when the input gave none) */
  gs_cm_result *rows;    /* world-major: for each world, one row per mode */
  int nrows;
  /* BytePS over the spare hosts (spare_max >= 0): for each world of more
   * than one host, the ring's row, then byteps at k = 0 .. spare hosts;
   * the best k of a world is the fewest spare hosts whose step is within
   * GS_CM_SPARE_EVEN of the shortest (more machines for less than that are
   * not worth it), its speed-up the ring's step over its */
  gs_cm_result *spare_rows;
  int nspare_rows;
  int *spare_best;       /* per world (nworlds entries, -1: none), k */
  double *spare_speedup; /* per world: ring step / byteps step at the best k (NaN: none) */
  int *spare_worlds;
  int nspare_worlds;
} gs_cm_projection;
#define GS_CM_SPARE_EVEN 0.01

int gs_cm_project(const gs_cm_machine *m, const gs_cm_proj_in *in, gs_cm_projection *out,
                  gs_err *e);
void gs_cm_projection_free(gs_cm_projection *p);
/* A terminal table with its assumptions in a header. */
void gs_cm_print_table(FILE *f, const gs_cm_projection *p);
/* BytePS over k (spare_rows): a table per world and the answer, the best
 * k and its speed-up over the ring (nothing when there are no rows). */
void gs_cm_print_spare(FILE *f, const gs_cm_projection *p);
/* {"model", "machine": {...}, "plan": {...}, "rows": [gs_cm_result_json...]} */
json_t *gs_cm_projection_json(const gs_cm_projection *p);

/* ---- measuring this machine for a calibration (measure.c) ---- */

/* What to measure: the compute of train's model at its batch and
 * precision (one rank, world 1) with threads BLAS threads; the link part
 * measured between two emulated hosts at link_bps (and latency_s) when
 * measure_link, else as given when link_bps > 0, else none. */
typedef struct gs_cm_measure_cfg {
  gs_train_opts train;
  int threads;
  bool measure_link;
  uint64_t link_bps;
  double latency_s;
} gs_cm_measure_cfg;

/* how the figures of a calibration were obtained, for its printed table */
typedef struct gs_calib_notes {
  double transport_rms, reduce_rms, copy_rms; /* relative fit residuals (NaN: no fit) */
  double loop_small_s;                        /* half a 64 B round trip over loopback */
  bool link_measured;                         /* --hosts 2: the link part was measured */
  size_t optim_params;
  int compute_steps, threads;
  double seconds;                             /* the whole measurement */
} gs_calib_notes;

/* Measure this machine as cfg says. A wrong model is GS_EINVAL with a
 * message naming --model. */
int gs_calibrate_measure(const gs_cm_measure_cfg *cfg, gs_cm_calib *c, gs_calib_notes *n,
                         gs_err *e);
/* Only the transport: ZeroMQ over tcp loopback, its per-message cost and
 * bytes per second (a fraction of a second; what a run on one machine's
 * loopback is predicted with). */
int gs_calibrate_transport(double *alpha_s, double *Bps, gs_err *e);
/* That measurement handed from a launcher to the ranks it starts: set
 * (a non-finite or non-positive rate clears it) before they start; read
 * by each, false with zeros where none was set or the value is not one
 * set() wrote. */
void gs_loopback_costmodel_set(double alpha_s, double Bps);
bool gs_loopback_costmodel(double *alpha_s, double *Bps);
/* Only the compute part (model, precision, forward and backward per
 * sample, readiness per tensor) into c; the rest of c stays. */
int gs_calibrate_compute(const gs_cm_measure_cfg *cfg, gs_cm_calib *c, gs_calib_notes *n,
                         gs_err *e);
/* the table: each field as the file names it, its value in SI units, a
 * readable value and how it was measured */
void gs_calibrate_print(FILE *f, const gs_cm_calib *c, const gs_calib_notes *n);

/* ---- compression (compress.c: bytes; compress_measure.c: its work) ---- */

/* What one compressed step puts on the wire, bucket by bucket, as
 * compress.h sends it: none, the bucket in the precision's dtype; fp16 /
 * bf16, in 2 bytes an element; powersgd:R, the tensors it leaves as they
 * are, then P and Q (rows x r and cols x r floats for every tensor it
 * compresses, r = min(R, rows, cols)), one all-reduce for each part that is
 * not empty; topk:F (ps pushes only), compress.h's gs_topk_bytes: 8 bytes a
 * kept entry, parameters back dense. compute_s is the compression's own
 * work per bucket and step (GEMMs, orthogonalization, selection, error
 * feedback), 0 until measured. */
typedef struct gs_cm_compressed {
  gs_compress c;
  gs_cm_plan plan;       /* bytes per bucket on the wire (owned); total: S compressed */
  int *collectives;      /* per bucket (owned) */
  double *compute_s;     /* per bucket (owned) */
  gs_cm_plan plain;      /* the same buckets uncompressed, in the precision's dtype */
} gs_cm_compressed;

/* The plan of c over a model's tensors and buckets (worker/sync.h's
 * gs_bucket, gs_compress_tensor as the trainer makes them); nparams: the
 * parameters the optimizer updates. GS_EINVAL when a tensor does not lie in
 * one bucket. */
int gs_cm_compress_plan(const gs_compress *c, gs_dtype precision,
                        const gs_compress_tensor *tensors, int ntensors,
                        const gs_bucket *buckets, int nbuckets, size_t nparams,
                        gs_cm_compressed *out, gs_err *e);
void gs_cm_compressed_free(gs_cm_compressed *c);
/* Top-k in the ring is an all-gather of every rank's payload P (plan
 * bytes), (N-1) P through every link: the bytes of the all-reduce that
 * moves as much, N P / 2 (2(N-1)/N x N P/2), per bucket into out (nb). */
void gs_cm_topk_ring_bytes(const gs_cm_plan *plan, int world, size_t *out);

/* plain: job j as it runs uncompressed; comp: the same job with c's plan,
 * collectives and compute (ring only; other modes take the bytes alone).
 * pays: the compressed step is predicted shorter by more than
 * GS_CM_EVEN; even: the two are within GS_CM_EVEN of each other, closer
 * than the model can tell apart. */
#define GS_CM_EVEN 0.05
typedef struct gs_cm_compress_verdict {
  gs_cm_result plain, comp;
  double compute_s;      /* the compression's work per step (sum over buckets) */
  bool pays, even;
} gs_cm_compress_verdict;
int gs_cm_compress_predict(const gs_cm_machine *m, const gs_cm_job *j,
                           const gs_cm_compressed *c, gs_cm_compress_verdict *v, gs_err *e);

/* The plan of a run of `train`'s model with its --compress and buckets,
 * and powersgd's work per bucket measured on this machine with `threads`
 * BLAS threads: `reps` steps timed after one that builds its state, the
 * median per bucket, over an all-reduce that does nothing (the arithmetic
 * every rank repeats whatever the world). Holds the model's buffers
 * meanwhile, as gs_cm_plan_model does. */
int gs_cm_compress_measure(const gs_train_opts *train, int threads, int reps,
                           gs_cm_compressed *out, gs_err *e);

/* ---- stragglers (stragglers.c) ----
 * The step time and samples/s of one consistency model when rank r
 * computes c0_s x factor[r] x (1 + jitter_cv |z|) per step: sync (ring, ps
 * bsp; period H > 1: ring averaging every H steps) waits for the slowest
 * rank, backup for the (world-backup)-th arrival and applies that many
 * batches, ssp runs at the slowest rank's mean rate, async at every rank's
 * own. comm_s: the communication one update waits for. */
typedef enum gs_cm_straggle_kind {
  GS_CM_STRAGGLE_SYNC, GS_CM_STRAGGLE_BACKUP, GS_CM_STRAGGLE_SSP, GS_CM_STRAGGLE_ASYNC,
} gs_cm_straggle_kind;
typedef struct gs_cm_straggle_in {
  gs_cm_straggle_kind kind;
  int world, backup, period;
  double batch;                /* samples per rank per step (a mean: last batches are short) */
  const double *factor;        /* world entries, >= 1 */
  double jitter_cv, c0_s;
  double comm_s;               /* per update; ring period H: per averaging */
  double max_updates_per_s;    /* async: the updates the servers' links carry (0: no bound) */
  int beside;                  /* async: the first `beside` workers share the server's host:
                                  their updates cross no link, so no bound, and ... */
  double comm_beside_s;        /* ... they communicate this long per update instead */
} gs_cm_straggle_in;
typedef struct gs_cm_straggle_out {
  double step_s;               /* wall time per world x batch samples applied */
  double samples_per_s;        /* samples applied per second */
  const char *formula;         /* static text */
} gs_cm_straggle_out;
int gs_cm_straggle(const gs_cm_straggle_in *in, gs_cm_straggle_out *out, gs_err *e);

#endif
