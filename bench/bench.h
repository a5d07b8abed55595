/* bench.h: what every part of the `bench` command shares: the modes it
 * compares and the configuration the command line resolved (gs_opts).
 *
 * One executable plays these roles (cli/roles.c picks one per process):
 *   launcher    (no rank in the environment) expands the sweep (--mode,
 *               --world, --model, --batch, --bucket-mb lists), spawns the
 *               ranks of each run on this machine, watches them, and writes
 *               the reports from what rank 0 of each run gathered (cli/);
 *   rank        (RANK/WORLD_SIZE from our launcher, torchrun, Slurm, Open
 *               MPI or MPICH) trains as one rank: rendezvous, backend,
 *               trainer, and for rank 0 the gathering of every rank's
 *               measurements (job/);
 *   collective  (--collective) the nccl-tests style benchmark of the
 *               backends alone, as launcher or rank (coll/);
 *   nodes       (--nnodes) bench's own multi-node launcher (job/);
 *   exec        (-- CMD) a command of the user's on emulated hosts (job/);
 *   ps server   (GS_PS_SERVE, set by our launcher) a --ps-server-hosts
 *               server in a process of its own (job/);
 *   calibrate, project  (--calibrate, --project) the cost model's
 *               commands, which start no rank (cli/, costmodel/);
 *   report      (--report DIR) a finished sweep's tables and charts drawn
 *               again (report/).
 * Data flows downward: cli -> coll -> job -> report -> costmodel, hosts,
 * files. hosts/ and costmodel/ never see gs_opts: they take plain
 * configurations of their own. */
#ifndef GS_BENCH_H
#define GS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench/hosts/hosts.h"
#include "kernels/kernels.h"
#include "ps/ps.h"
#include "worker/worker.h"

#define GS_LIST_MAX 16

/* How a sweep's links came to be: given (--link RATE), chosen by default
 * (auto: emulated hosts where this process may build them), loopback by
 * default (auto, and the machine does not allow them), or --link none.
 * Until the launcher decides, auto is GS_LINK_AUTO. */
typedef enum gs_link_choice {
  GS_LINK_AUTO = 0, GS_LINK_GIVEN, GS_LINK_AUTO_HOSTS, GS_LINK_AUTO_LOOPBACK, GS_LINK_NONE
} gs_link_choice;

/* The modes, by the words users give --mode and reports print: ps, ring
 * (the all-reduce: its default algorithm's name), local (one process, no
 * backend: the single-process reference). The words are written here
 * only; which backend runs a mode is the table's (job/backends.c). */
typedef enum gs_mode { GS_MODE_PS = 0, GS_MODE_ALLREDUCE = 1, GS_MODE_SINGLE = 2 } gs_mode;
static inline const char *gs_mode_name(gs_mode m) {
  return m == GS_MODE_PS ? "ps" : m == GS_MODE_ALLREDUCE ? "ring" : "local";
}
/* The mode a word names (--mode, report.json's "mode"), or -1; NULL: -1. */
static inline int gs_mode_parse(const char *word) {
  for (int m = GS_MODE_PS; word && m <= GS_MODE_SINGLE; m++)
    if (!strcmp(word, gs_mode_name((gs_mode)m))) return m;
  return -1;
}

typedef struct gs_opts {
  /* sweep axes: every combination is one run */
  gs_mode modes[3];
  int nmodes;
  int worlds[GS_LIST_MAX];
  int nworlds;
  const char *models[GS_LIST_MAX];
  int nmodels;
  int batches[GS_LIST_MAX];
  int nbatches;
  double bucket_mbs[GS_LIST_MAX];
  int nbucket_mbs;
  bool strong;               /* --strong: the global batch stays batch x worlds[0] */
  int repeats;               /* --repeat K: each configuration K times, interleaved */
  int repeat;                /* the launcher's repetition under way, 1..repeats */

  /* training (one run's values live in train, filled per combination) */
  gs_train_opts train;
  int warmup;                /* steps left out of the summaries */
  char precision_name[8];
  bool loss_scale_set;

  /* backends */
  int overlap;               /* -1: the mode's default (ps off, ring on) */
  int resend;                /* --resend: 1, --no-resend: 0; unset (-1) resolves to
                                training on, --collective off */
  bool dedicated;            /* --ps-dedicated */
  int ps_servers;            /* --ps-servers K: servers sharing the parameters (ps only) */
  bool ps_server_hosts;      /* --ps-server-hosts: they run in processes (hosts) of their own */
  int ps_hostagg;       /* --ps-local-reduce 1, --no-ps-local-reduce 0; -1: on where
                                emulated hosts hold several ranks each (ps/hostagg.c) */
  gs_ps_sync ps_sync;        /* --ps-sync, --ps-backup (ps only) */
  int ps_spares[GS_LIST_MAX]; /* --ps-spare-hosts: BytePS' summation servers on that many
                                spare hosts beside the workers' (a sweep axis of ps runs) */
  int nps_spares;            /* 0: not asked for */
  int ps_spare;              /* the run's (sweep.c sets it per ps run); -1: none */
  double ps_spare_share;     /* --ps-spare-share: a spare server's share (0: BytePS') */
  double ps_partition_mb;    /* --ps-partition-mb: a partition's most MiB (0: 4) */
  double ps_credit_mb;       /* --ps-credit-mb: MiB of pushes below the scheduler (0: all) */
  int ring_period;           /* --ring-period H (ring only; 1: every step) */
  double target_loss;        /* --target-loss X (0: from the synchronous run) */
  double timeout_s;
  const char *device;        /* cpu | cuda | auto */
  const char *bind;          /* --bind: address the sockets bind (NULL: job.c's rule) */
  const char *secret_file;   /* --secret-file: the job secret (else GS_JOB_SECRET) */
  const char *transport;     /* --transport tcp | ipc | shm (ipc, shm: ranks of one machine) */
  bool encrypt;              /* --encrypt: CURVE on every data socket */
  int threads;               /* BLAS threads per rank; 0: cores / local ranks */

  /* emulated hosts (job/cluster.c): 0 hosts and no link: one machine's loopback */
  int hosts;                 /* --hosts K: K hosts per run (0: --link alone, one per rank) */
  const char *link_arg;      /* --link RATE as given (tc units: 100mbit, 1gbit); NULL for
                                auto and none */
  bool link_none;            /* --link none: loopback, whatever the machine allows */
  gs_link_choice link_choice; /* how the sweep's link was chosen (job/cluster.c) */
  char link_why[1100];       /* auto on loopback: why, and how to get links */
  const char *latency_arg;   /* --latency D as given (100us, 2ms) */
  uint64_t link_bps;         /* resolved: bit/s each direction; 0: no emulated hosts */
  const char *link_host_arg; /* --link-host H=RATE[,...] as given (NULL: none) */
  gs_host_rates link_host;   /* resolved: hosts whose link has a rate of its own */
  double host_cpus;          /* --host-cpus: cores each emulated host may use (0: uncapped) */
  double latency_s;          /* resolved: one-way host-to-host delay */

  /* the cost model's commands (cli/costmodel_cmd.c): no rank starts */
  bool calibrate;            /* --calibrate: measure this machine, write a calibration */
  bool project;              /* --project: predict big worlds from a calibration */
  const char *calibration;   /* --calibration F (NULL: calibrate afresh) */
  int hosts_per;             /* --hosts-per N: ranks per host in a projection */
  double step_compute_ms;    /* --step-compute-ms: a projection's compute per step
                                (0: the calibration's) */
  const char *ready_by;      /* --ready-by layers|bytes: a projection's readiness */

  /* bench's own multi-node launch (0 nodes: not asked for) */
  int nnodes, node_rank, nproc_per_node;
  const char *master_addr;   /* NULL: MASTER_ADDR */
  int master_port;           /* 0: MASTER_PORT */

  /* output */
  const char *out;           /* results directory */
  const char *save_params;
  const char *replay;        /* --replay FILE: an apply-order log, replayed (cli/replay_cmd.c) */
  bool quiet;
  bool version;              /* --version: print what this build is, and stop */
  const char *command_line;  /* argv as typed, for report.json */
  double started;            /* wall-clock seconds when bench started */
  int64_t log_every;         /* progress line every N steps (0: a tenth of the run) */
  bool json;                 /* collective: print where the JSON table went */
  bool verify;               /* hash parameters every step (steps.csv) */
  bool eval;                 /* accuracy after training */
  const char *eval_data;     /* --eval-data SPEC: held-out accuracy after training */
  int64_t eval_every;        /* and after every N steps along the run (0: 20 points) */
  const char *peer;          /* --peer torch: PyTorch DDP measured beside (NULL: none) */
  const char *report;        /* --report DIR: tables and charts again from DIR/report.json */
  const char *compare;       /* --compare DIR[,DIR...]: several reports' runs side by side */
  char **exec;               /* -- CMD ARGS: run that on the emulated hosts (NULL: bench) */

  /* collective benchmark (nccl-tests flags) */
  const char *collective;    /* --collective as given, or NULL */
  int coll;                  /* allreduce.h gs_coll it names (coll/collective.c); a
                                comma list runs each in turn: colls[0..ncolls) */
  int colls[8], ncolls;
  int root;                  /* -r: broadcast's and reduce's root */
  size_t min_bytes, max_bytes;
  double factor;
  int iters, warmup_iters;
  bool check;
  int algo;                  /* --algo: allreduce.h gs_algo (the ring's) */
  const char *redop_arg, *dtype_arg;  /* -o, -d as given (coll/collective.c checks them) */
  int redop;                 /* kernels.h gs_redop */
  gs_dtype dtype;            /* the wire dtype -d names (F64, I32: buffers of it) */

  /* what was given on the command line (join mode re-checks these) */
  bool world_given, mode_given, repeat_given;
  const char *loss_scale_arg; /* --loss-scale as given; resolved with the precision */
  /* the copies the comma lists were split in (freed by gs_opts_free) */
  char *owned[2 * GS_LIST_MAX];
  int nowned;
} gs_opts;

#endif
