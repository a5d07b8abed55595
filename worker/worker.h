/* worker.h: the training side of gradsync: model, data, sampler, optimizer
 * state, loss scaling and per-step measurements, driven by a gs_sync.
 *
 * A trainer owns one flat parameter buffer and one flat gradient buffer on
 * its kernels' device, in PyTorch's parameter order (fc1.weight, fc1.bias,
 * ...). The bench creates a trainer, asks it for the pieces a backend needs
 * (gs_trainer_sync_config), opens a backend with them, and calls
 * gs_trainer_run, which loops:
 *
 *     next batch of this rank's shard (DistributedSampler semantics)
 *     begin_step; forward; loss * scale; backward, bucket_ready(b) as soon
 *     as every gradient of bucket b is written; end_step
 *     record a gs_step_row, call the step callback (CSV, progress)
 *
 * The trainer knows nothing of ZeroMQ, NCCL or processes. World 1 without
 * any backend uses gs_sync_single(), the single-process reference. */
#ifndef GS_WORKER_H
#define GS_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "worker/sync.h"

/* Stragglers (straggle.c): ranks whose compute is stretched with real
 * arithmetic, not sleep, so that the CPU is busy as a slow GPU or a shared
 * host would be. Each step's compute (forward + backward) of rank r becomes
 *     base x factor(r) x (1 + jitter_cv x |z|)
 * where factor(r) is `factor` for the ranks listed in slow[] and 1 for the
 * others, and z is a standard normal drawn from (seed, rank, step): the
 * noise is the same on every run and only adds work (a rank cannot compute
 * faster than it can). The extra work runs between forward and backward,
 * before any bucket is handed over, so every mode waits for it as it would
 * for a slower GPU. A zero struct means no stragglers. */
#define GS_SLOW_MAX 64
typedef struct gs_straggle {
  int nslow;
  int slow[GS_SLOW_MAX];   /* ranks, ascending, no duplicates */
  double factor;           /* >= 1 for the slow ranks (0 or 1: none) */
  double jitter_cv;        /* >= 0 */
} gs_straggle;

/* "RANK[,RANK...]:FACTOR" (e.g. "3:2.5", "1,3:4") into s's slow and
 * factor (jitter_cv untouched). FACTOR in [1, 1000], ranks in 0..1048575.
 * GS_EINVAL with a message naming the bad part. */
int gs_straggle_parse(const char *spec, gs_straggle *s, gs_err *e);
/* The spec back as text ("1,3:4"), "" without slow ranks. */
void gs_straggle_text(const gs_straggle *s, char *buf, size_t cap);
/* The factor of rank r (1 unless listed). */
double gs_straggle_factor(const gs_straggle *s, int rank);
/* The compute multiplier of rank r at step: factor(r) x (1 + jitter_cv |z|). */
double gs_straggle_multiplier(const gs_straggle *s, uint64_t seed, int rank, int64_t step);
/* Busy the calling thread with floating-point arithmetic for seconds. */
void gs_busy_work(double seconds);

typedef struct gs_train_opts {
  const char *model;       /* "mlp:784-2048-2048-10", "lenet", "resnet50", "vgg16", "bert-base",
                              "profile:FILE" */
  const char *data;        /* "synthetic", "idx:IMAGES,LABELS", "cifar10:FILE[,FILE...]" */
  int batch;               /* per rank */
  int64_t steps;           /* optimizer steps to run (epochs roll over as needed) */
  float lr, momentum, weight_decay;
  uint64_t seed;
  bool shuffle;            /* DistributedSampler(shuffle=...) */
  bool drop_last;
  gs_dtype precision;      /* compute and gradient-wire dtype */
  float loss_scale;        /* initial (dynamic) or fixed scale; 1 for fp32.
                              <= 0: the precision's default: fp16 65536
                              dynamic (GradScaler), bf16 and fp32 1 fixed */
  bool dynamic_scale;
  double compute_ms;       /* profiles: emulated compute per step (real GEMM work) */
  double compute_scale;    /* profiles: > 0, each layer's measured time x this at batch
                              (from the profile's batch) instead of compute_ms; 0: off */
  int rank, world;
  double bucket_mb, first_bucket_mb;   /* DDP: 25, 1 */
  gs_compress compress;    /* DDP's communication hook (compress.h); its seed
                              is taken from seed above */
  const char *load_params; /* directory of .npy files, or NULL */
  int64_t synthetic_samples; /* size of the synthetic dataset */
  gs_straggle straggle;    /* slowed ranks and compute noise (none: zero) */
  const char *freeze;      /* layers that do not train, "fc1,conv2" (requires_grad=False:
                              no gradient traffic, their initial bits kept); NULL: none */
} gs_train_opts;

/* Whether --freeze spec names layers of model (comma list; each a layer,
 * "fc1", or a tensor, "fc1.weight") and leaves something to train: GS_OK,
 * or GS_EINVAL naming what is wrong and the model's layers. NULL or "": OK. */
int gs_freeze_check(const char *model, const char *spec, gs_err *e);

/* The training defaults of bench's flag table (bench/cli/opts.c, shown by bench
 * --help); tests/bench/cli/test_opts.c checks that the two agree. */
void gs_train_opts_default(gs_train_opts *o);

/* One rank's record of one step. Times are seconds; t_start/t_end are
 * gs_wall() so ranks of one host line up on a timeline. */
typedef struct gs_step_row {
  int64_t step;
  int32_t rank, epoch;
  double t_start, t_end;
  double step_s;           /* batch start to parameters updated */
  double data_s;           /* fetching the batch */
  double forward_s, backward_s;
  double wait_s, reduce_s, update_s;   /* from the backend (gs_sync_stats) */
  uint64_t bytes_sent, bytes_recv;
  float loss;              /* this rank's mean loss on its batch */
  float scale;             /* loss scale used in this step */
  int32_t skipped;         /* step skipped for inf/NaN */
  int32_t correct, samples;  /* argmax hits in this rank's batch */
  uint64_t rss_bytes;      /* peak resident set so far */
  /* a dedicated ps server's share (rank 0 only) */
  int32_t has_server;
  double server_reduce_s, server_update_s;
  uint64_t server_bytes_sent, server_bytes_recv;
  /* --verify: the hash of the parameters after the step (0: not hashed);
   * the trainer leaves it 0, bench fills it in for the gather */
  uint64_t param_hash;
  /* ps ssp/async/backup: this step's gradient's staleness (updates it
   * missed), -1: dropped (backup workers); 0 elsewhere */
  int32_t staleness;
} gs_step_row;

/* One timeline span (Chrome trace "X" event). */
typedef struct gs_span {
  double t0, t1;           /* gs_wall() seconds */
  int32_t track;           /* 0 training thread, 1 backend thread */
  int32_t bucket;          /* -1 when not about one bucket */
  char name[24];
} gs_span;

typedef struct gs_trainer gs_trainer;

int gs_trainer_create(const gs_train_opts *o, gs_kernels *k, gs_trainer **out, gs_err *e);
void gs_trainer_destroy(gs_trainer *t);

/* Fill what a backend needs: params, grads, n, buckets, sgd, wire dtype,
 * scaler, k, and the span hook. The caller adds rank/world/endpoints.
 * With --freeze these are the parameters that train only (a compact copy,
 * the frozen tensors left out; gs_trainer_tensor_bucket says which). */
void gs_trainer_sync_config(gs_trainer *t, gs_sync_config *c);

/* Called after every step (from the training thread); non-zero stops the
 * run with that code. */
typedef int (*gs_step_cb)(void *ctx, const gs_step_row *row);
int gs_trainer_run(gs_trainer *t, gs_sync *s, gs_step_cb cb, void *ctx, gs_err *e);

/* Everything recorded so far (valid until destroy). */
const gs_step_row *gs_trainer_rows(const gs_trainer *t, size_t *n);
const gs_span *gs_trainer_spans(const gs_trainer *t, size_t *n);

/* Parameters, one NumPy .npy per tensor named as PyTorch's state_dict keys
 * ("fc1.weight.npy"), written to a temporary directory then renamed. */
int gs_trainer_save(gs_trainer *t, const char *dir, gs_err *e);

/* Accuracy and mean loss of the current parameters over the first n
 * samples of the dataset (n <= 0: all), no gradient. */
int gs_trainer_evaluate(gs_trainer *t, int64_t n, double *accuracy, double *loss, gs_err *e);
/* The same over every sample of another dataset (--data's spec, shaped for
 * this model): a held-out split. */
int gs_trainer_evaluate_data(gs_trainer *t, const char *spec, double *accuracy, double *loss,
                             gs_err *e);
/* The same for n sets of parameters at once, the data read once: params[i]
 * a host copy of every parameter (gs_trainer_copy_params), or NULL for the
 * current ones; accuracy[i] and loss[i] for each. */
int gs_trainer_evaluate_data_at(gs_trainer *t, const char *spec, const float *const *params,
                                int n, double *accuracy, double *loss, gs_err *e);

/* Model facts for reports and the rendezvous' configuration check. */
size_t gs_trainer_nparams(const gs_trainer *t);
int gs_trainer_ntensors(const gs_trainer *t);
const char *gs_trainer_tensor_name(const gs_trainer *t, int i);
/* Where tensor i starts in the flat buffers (elements). */
size_t gs_trainer_tensor_offset(const gs_trainer *t, int i);
/* A profile's multiply-adds per sample for the layer work that produces
 * tensor i's gradient (its emulated compute follows them); 0 for models
 * whose compute is real (timed, not counted). */
double gs_trainer_tensor_macs(const gs_trainer *t, int i);
/* A profile's measured backward time charged to tensor i (the time before
 * its gradient is ready since the one before; seconds at the profile's
 * batch), 0 for models whose compute is real. */
double gs_trainer_tensor_backward_s(const gs_trainer *t, int i);
/* A profile's measured forward and backward per sample (false, zeros, for
 * models whose compute is real). */
bool gs_trainer_profile_compute(const gs_trainer *t, double *fwd_s, double *bwd_s);
int gs_trainer_nbuckets(const gs_trainer *t);
/* The bucket tensor i's gradient travels in; -1 for a frozen tensor. */
int gs_trainer_tensor_bucket(const gs_trainer *t, int i);

/* Every parameter (nparams floats, frozen ones too) where the kernels run,
 * as the model reads them: after a step, that step's update. */
const float *gs_trainer_params(const gs_trainer *t);
/* The current parameters (nparams floats) into host memory. */
int gs_trainer_copy_params(const gs_trainer *t, float *host, gs_err *e);
/* One line for logs: model, parameters, tensors, buckets, data. */
const char *gs_trainer_describe(const gs_trainer *t);
/* Samples in this rank's shard per epoch (DistributedSampler's num_samples;
 * 0 for profiles, which read no data). */
int64_t gs_trainer_shard_size(const gs_trainer *t);

/* The single-process backend: no communication, SGD (and the scaler's
 * verdict) applied in end_step. Valid for world 1 only. */
int gs_sync_single(const gs_sync_config *c, gs_sync **out, gs_err *e);
/* The same as a backend ("local"): prepare binds nothing, open is
 * gs_sync_single; what it runs is everything one process can. */
extern const gs_backend gs_single_backend;

/* The gradient of this rank's batch of step `step` (its shard's batches in
 * order, epochs rolling over, as gs_trainer_run takes them) at the current
 * parameters, into the gradient buffer (gs_trainer_sync_config's grads),
 * with the current loss scale: what step `step` of gs_trainer_run hands its
 * backend, without the backend, the straggler work and the row. */
int gs_trainer_gradient(gs_trainer *t, int64_t step, gs_err *e);

/* ---- apply-order logs and their replay (apply_log.c, replay.c) ----
 * An async, ssp or backup-worker ps server applies gradients in an order
 * that arrival decided. Its log records that order, update by update: for
 * each update the (rank, step, base version) of every gradient it summed,
 * in summation order, and a hash of the parameters after it; its header
 * the training configuration that makes each gradient again (model, data,
 * batch, seed, sampler, optimizer, world, BLAS threads). Replaying it in
 * one process recomputes every gradient from the version it was computed
 * on and that rank's batch of that step, sums and applies them as the
 * server did (gs_update_apply), and checks the parameters after every
 * update against the hash. Text, one update a line:
 *
 *   gradsync-apply-order 1
 *   world 4
 *   ...                                 (key value lines, see apply_log.c)
 *   update 1 hash 9f0c...e1 grads 3:0:0
 *   update 2 hash 1a2b...7c grads 0:1:1 2:1:1 (rank:step:base)
 *
 * The sharded ps (K servers, each over a contiguous range of the
 * parameters, each with its own clock) writes K logs, one per server:
 * header lines "shards K" and "shard k"; its updates, versions, bases and
 * hashes are that server's, of its range. A gradient's full parameter
 * vector is then each server's version that the rank pushed to it as its
 * base, in range order, and a replay of the K logs together finds an order
 * of all servers' updates in which every such version exists. Backup
 * workers drop parts at one server that another applied, and write no
 * sharded log.
 */
typedef struct gs_apply_grad {
  int rank;
  int64_t step;
  uint64_t base;
} gs_apply_grad;
typedef struct gs_apply_update {
  uint64_t version, hash;
  size_t first;              /* its gradients: grads[first .. first + n) */
  int n;
} gs_apply_update;
typedef struct gs_apply_log {
  gs_train_opts train;       /* model and data point into the strings below */
  char *model, *data, *sync, *load; /* owned; load: --load-params or NULL */
  char *freeze;              /* owned; --freeze or NULL */
  int world, threads;
  int shard, shards;         /* the sharded ps: server `shard`'s log of `shards` (each
                                logs its range, versions and parameters); 0 of 1: the
                                one server */
  size_t nparams;            /* this log's parameters (a shard's: its range) */
  gs_apply_update *up;
  size_t nup, capup;
  gs_apply_grad *grads;
  size_t ngrads, capgrads;
  bool lost;                 /* an update could not be recorded (memory) */
} gs_apply_log;
/* A log for a run of t's configuration (t->world ranks; sync: "async", ...;
 * nparams 0: the first update's count). */
int gs_apply_log_init(gs_apply_log *l, const gs_train_opts *t, int threads, const char *sync,
                      size_t nparams, gs_err *e);
/* gs_applied_fn: record one update (ctx: the log). */
void gs_apply_log_add(void *ctx, const gs_applied *a);
/* The log as text (malloc'ed, *len bytes), or NULL with e set. */
char *gs_apply_log_text(const gs_apply_log *l, size_t *len, gs_err *e);
/* Read a log written by gs_apply_log_text: every line checked, sizes
 * bounded; GS_EINVAL naming the file, the line and what is wrong. */
int gs_apply_log_read(const char *path, gs_apply_log *l, gs_err *e);
int gs_apply_log_parse(const char *text, size_t len, const char *name, gs_apply_log *l,
                       gs_err *e);
void gs_apply_log_free(gs_apply_log *l);
/* The parameters' hash the log keeps (FNV-1a over their bytes). */
uint64_t gs_params_hash(const float *p, size_t n);

typedef struct gs_replay_result {
  uint64_t updates;          /* replayed, every one matching its hash */
  uint64_t gradients;        /* recomputed */
  uint64_t hash;             /* of the final parameters */
} gs_replay_result;
/* Replay the logs of one run, l[k] that of shard k of n (n = l[0].shards;
 * 1 for the one server), with kernels k (k's BLAS threads as the log says:
 * the caller's concern); save_dir: write the final parameters there (NULL:
 * not). GS_EINVAL where the logs are not one run's; GS_EPROTO naming the
 * first update whose parameters differ. */
int gs_replay(const gs_apply_log *l, int n, gs_kernels *k, const char *save_dir,
              gs_replay_result *r, gs_err *e);

#endif
