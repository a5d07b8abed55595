/* job.h: the contract of bench/job: one job, from its start to its
 * measurements on rank 0.
 *
 * A job is world ranks of one run (a mode at a world size, a model, a
 * batch, a bucket size). It starts from a launch environment (ours, or
 * torchrun, Open MPI, MPICH, Slurm, bench --nnodes: gs_rank_env), resolves
 * where each rank's sockets go (gs_job_addrs), proves membership with the
 * job secret (secret.c), meets at rank 0's rendezvous where every rank
 * compares its settings and learns everyone's endpoints and the backend's
 * bootstrap blob (rendezvous.c), hands the backend a plain gs_sync_config
 * (job.c), runs the rank (rank.c), and gathers every rank's measurements on
 * rank 0 (gather.c), which the report turns into files. Bench's own
 * launcher spawns the ranks of a run on this machine, on emulated hosts
 * when the run has them (launch.c, cluster.c); nodes.c is its multi-node
 * form; exec.c runs a command of the user's on the hosts; ps_serve.c is a
 * ps server in a process (on a host) of its own; peer.c runs PyTorch's DDP
 * beside a sweep (--peer torch). Knows the worker's sync.h, the report
 * (which it feeds) and the emulated hosts; never a backend's insides. */
#ifndef GS_BENCH_JOB_H
#define GS_BENCH_JOB_H

#include <sys/types.h>

#include <jansson.h>

#include "bench/bench.h"
#include "bench/hosts/hosts.h"
#include "bench/report/report.h"
#include "allreduce/allreduce.h"
#include "ps/ps.h"
#include "worker/sync.h"

#define GS_ADDR_MAX 64      /* an IPv4 address as text, with room */

/* ---- one run of the sweep (run.c) ---- */
/* The settings every rank of a job must share, as "key=value" lines, for
 * the rendezvous' configuration check. */
size_t gs_run_settings(const gs_opts *o, gs_mode mode, int world, char *buf, size_t cap);
/* The run info of one combination of o's sweep (model, batch and bucket
 * from o->train); the measured facts stay zero / NaN. */
gs_run_info gs_run_info_of(const gs_opts *o, gs_mode mode, int world);
/* Our launcher's --repeat: which repetition this run is, of how many (its
 * GS_REPEAT and GS_REPEATS); launched false: another launcher's job, one run. */
void gs_run_info_repeat(gs_run_info *info, bool launched);

/* ---- rendezvous (rendezvous.c) ----
 * Rank 0 binds a ROUTER at MASTER_ADDR:MASTER_PORT; every other rank
 * connects a DEALER. Both run CURVE with keys derived from the job secret
 * (proto/proto.h): rank r's own key proves it is rank r. Then it registers
 * (rank, world, host, backend endpoint, settings) and receives a welcome
 * with everyone's endpoints, rank 0 backend's bootstrap blob and the job
 * token; or an error naming the setting that differs. At the end every
 * rank sends its measurements to rank 0, which acknowledges them so nobody
 * exits before delivery. Every frame on the rendezvous is at most
 * GS_RDV_FRAME_MAX bytes. */
#define GS_RDV_FRAME_MAX (64 << 10)
typedef struct gs_rdv gs_rdv;

typedef struct gs_rdv_me {
  int rank, world, local_rank;
  const char *host;         /* hostname */
  const char *endpoint;     /* the backend's prepare() address */
  const char *settings;     /* gs_run_settings() */
  const gs_cred *cred;      /* the job's: proves this rank (or rank 0) a member */
} gs_rdv_me;

typedef struct gs_rdv_job {
  int world;
  char (*endpoints)[GS_ENDPOINT_MAX];  /* world entries */
  char (*hosts)[GS_HOST_MAX];
  uint8_t blob[GS_BOOTSTRAP_MAX];
  size_t bloblen;
  uint64_t job;
  int local_world;          /* ranks on this host */
} gs_rdv_job;
void gs_rdv_job_free(gs_rdv_job *j);

/* Rank 0: bind (endpoint "tcp://addr:port", port may be *) for world
 * ranks of the job of cred; the address actually bound is written to
 * bound. */
int gs_rdv_listen(const char *endpoint, const gs_cred *cred, int world, char *bound, size_t cap,
                  gs_rdv **out, gs_err *e);
/* A fresh random job token (rank 0 makes it before its backend's
 * bootstrap, so a server it starts already knows it). */
uint64_t gs_rdv_new_token(void);
/* Rank 0: collect world-1 registrations, check them against me, welcome
 * everyone with the endpoints, the blob and the job token. */
int gs_rdv_host(gs_rdv *r, const gs_rdv_me *me, uint64_t token, const void *blob,
                size_t bloblen, int timeout_ms, gs_rdv_job *job, gs_err *e);
/* Other ranks: register with rank 0 at master and wait for the welcome. */
int gs_rdv_join(const char *master, const gs_rdv_me *me, int timeout_ms, gs_rdv **out,
                gs_rdv_job *job, gs_err *e);

/* What the gather needs of the rendezvous socket (gather.c). */
void *gs_rdv_socket(gs_rdv *r);
uint64_t gs_rdv_job_token(const gs_rdv *r);
/* Rank 0: whether a message's connection proved the rank it claims (else
 * a line says what was ignored, for the first few). */
struct gs_wire_msg;
bool gs_rdv_proven(gs_rdv *r, const struct gs_wire_msg *m, const char *phase);
/* Best effort: tell rank 0 this rank failed (before exiting non-zero). */
void gs_rdv_report_error(gs_rdv *r, int rank, const char *phase, const char *msg);
void gs_rdv_close(gs_rdv *r);

/* ---- the measurements' hand-over (gather.c) ---- */
/* Rank > 0: send rows + spans to rank 0, in parts, and wait for its
 * acknowledgement. */
int gs_rdv_send_stats(gs_rdv *r, int rank, const gs_rank_result *mine, int timeout_ms,
                      gs_err *e);
/* What rank 0 accepts of one rank: what the job's configuration allows. */
typedef struct gs_gather_limits {
  size_t rows, spans;
} gs_gather_limits;
/* Rank 0: receive the other ranks' results into out[1..world-1], each from
 * the connection that proved its rank; a rank whose report is malformed or
 * beyond lim is marked failed, with the reason. */
int gs_rdv_gather(gs_rdv *r, int world, const gs_gather_limits *lim, int timeout_ms,
                  gs_rank_result *out, gs_err *e);
/* One part of rank x->rank's report (its Stats header and payload) into x:
 * 1 when the report is complete, or rejected (x->failed, x->error saying
 * why), 0 when more parts are due; GS_ENOMEM stops the gather. */
struct Gradsync__Stats;
int gs_gather_take(const struct Gradsync__Stats *st, const uint8_t *data, size_t len,
                   const gs_gather_limits *lim, gs_rank_result *x, gs_err *e);
/* The wire form of a rank's measurements, in parts: one packed
 * gradsync.Measurements of the rows from *row and the spans from *span
 * that fit in cap bytes (at least one row or span when any is left; the
 * cursors move past them). GS_EINVAL when one alone does not fit. */
int gs_measurements_pack_part(const gs_rank_result *mine, size_t *row, size_t *span,
                              uint8_t *buf, size_t cap, size_t *len, gs_err *e);
/* Append one part to x, whose header promised steps rows and nspans spans
 * (x->rows and x->spans are allocated for them on the first part): every
 * row is rank's and the next step, every span well-formed, nothing beyond
 * the promise. GS_EPROTO with why, GS_ENOMEM. */
int gs_measurements_unpack_part(const uint8_t *data, size_t len, uint64_t steps,
                                uint64_t nspans, int rank, gs_rank_result *x, char *why,
                                size_t cap);

/* ---- the table of backends (backends.c) ----
 * One row per backend: the mode (and device) it runs, its options of its
 * own filled from the flags, the flags only it takes. What it runs is its
 * own declaration (sync.h gs_backend.caps); gs_caps_check is the one
 * refusal. */
typedef struct gs_run_backend {
  const gs_backend *backend;
  gs_mode mode;              /* the mode it runs (single at world 1 of training) */
  gs_ps_opts ps;             /* its options, when it is the ps */
  gs_allreduce_opts allreduce; /* when it is the CPU all-reduce */
  const void *opts;          /* what gs_sync_config.opts takes: &ps, &allreduce or NULL */
} gs_run_backend;
/* The row of a run of mode at world on device (GS_DEV_CPU, GS_DEV_CUDA, or
 * -1: not known yet), its options from o's flags. b->opts points into b:
 * point it again after a copy. */
int gs_backends_pick(const gs_opts *o, gs_mode mode, int world, int device, gs_run_backend *b,
                     gs_err *e);
/* What o's flags ask of a run on b (every axis the flags say). */
void gs_backends_want(const gs_opts *o, const gs_run_backend *b, gs_want *w);
/* Whether b runs what o asks: GS_EINVAL with words naming the flags. */
int gs_backends_check_run(const gs_opts *o, const gs_run_backend *b, gs_err *e);
/* Every run of o's sweep (each mode at each world) against its row. */
int gs_backends_check(const gs_opts *o, gs_err *e);
/* Flags that only one mode's backend takes, given while no mode of the
 * sweep takes them. */
int gs_backends_own_flags(const gs_opts *o, gs_err *e);
/* Whether a run of mode hands buckets over as backward fills them: --overlap
 * or --no-overlap, else the mode's own (the ring's on, as DDP; the ps' off,
 * as DataParallel, but on for BytePS' summation servers, which push as
 * backward produces). */
bool gs_backends_overlap(const gs_opts *o, gs_mode mode);

/* ---- one job start (job.c) ---- */
/* Which rank this process is, from the launch environment (rank_env.c). */
typedef struct gs_rank_env {
  bool present;             /* RANK etc. set: join as this rank */
  bool launched;            /* by our own launcher (GS_LAUNCHED=1) */
  const char *source;       /* "torchrun", "openmpi", "mpich", "slurm", "env" (RANK set
                               by hand), "bench --nnodes", "gradsync" (our launcher) */
  int rank, world, local_rank, local_world;  /* local_rank -1, local_world 0: unknown */
  int node_rank;            /* GROUP_RANK / SLURM_NODEID; -1: unknown */
  char master_addr[GS_HOST_MAX];
  int master_port;          /* the rendezvous' port; 0: choose (our launcher only) */
  bool port_derived;        /* not MASTER_PORT itself (torchrun's agent store, Slurm) */
  int port_fd;              /* our launcher: where rank 0 writes its port */
  const char *run_dir;      /* our launcher: where rank 0 writes run.json */
  /* our launcher on emulated hosts (cluster.c): this rank's host h of K,
   * its address there; hosts 0: none */
  int host, hosts;
  char host_addr[GS_ADDR_MAX];
  double delay_line_s;      /* > 0: the links' delay is the wire's delay line (no netem) */
} gs_rank_env;
int gs_rank_env_read(gs_rank_env *env, gs_err *e);

/* Where this rank's sockets go. */
typedef struct gs_job_addrs {
  bool loopback;                     /* loopback only: our launcher, or MASTER_ADDR loopback */
  bool wildcard;                     /* --bind 0.0.0.0 */
  char master[GS_ADDR_MAX];          /* MASTER_ADDR, resolved */
  char bind[GS_ADDR_MAX];            /* what the backends' sockets bind */
  char advertise[GS_ADDR_MAX];       /* what peers are told to connect to */
  char rendezvous[GS_ENDPOINT_MAX];  /* rank 0 binds it; the others connect to master */
} gs_job_addrs;
/* The binding rule (addrs.c's comment) for this environment and --bind
 * (NULL: not given). */
int gs_job_addrs_resolve(const gs_rank_env *env, const char *bind, gs_job_addrs *a, gs_err *e);
/* Whether ip (IPv4, as text) is a loopback address, 127.0.0.0/8 (addrs.c). */
bool gs_addr_loopback(const char *ip);

/* The job secret (secret.c): --secret-file F (mode 0600 or stricter),
 * else GS_JOB_SECRET, else, when listens is NULL (every socket of this
 * rank on loopback), the user's own secret file, made on first use; when
 * listens names what this rank binds beyond loopback, an error asking for
 * a secret. At least 16 bytes. Derives the job's credential (encrypt:
 * --encrypt). */
int gs_job_secret(const char *file, const char *listens, bool encrypt, gs_cred *c, gs_err *e);
/* A fresh random secret, as hex, for a job our launcher starts (secret.c). */
void gs_secret_new(char out[2 * GS_KEY_BYTES + 1]);
/* Run ids (run_ids.c; steps.csv, report.json): random for an invocation of
 * bench, or the same on every rank of a job started by another launcher (a
 * hash of the job token, which it does not reveal). */
#define GS_RUN_ID_CHARS 16
void gs_run_id_new(char out[GS_RUN_ID_CHARS + 1]);
void gs_run_id_of_job(uint64_t token, char out[GS_RUN_ID_CHARS + 1]);

typedef struct gs_job {
  gs_rank_env env;
  gs_job_addrs addr;
  gs_cred cred;
  int rank, world, local_rank;
  int local_world;          /* 0 until the rendezvous counted it */
  int timeout_ms;
  /* rank 0: the first round's job token, drawn at the start so that the
   * run's name (gs_job_results_dir) is known before the rendezvous; later
   * rounds (the collective benchmark's) draw fresh ones */
  uint64_t first_token;
  int rounds;
  bool ipc;                 /* --transport ipc: data sockets are Unix sockets */
  char hostname[GS_HOST_MAX];
  gs_rdv *rdv;
  /* the round under way: gs_job_meet .. gs_job_open */
  const gs_backend *be;
  void *state;
  bool prepared;
  gs_rdv_job round;
  const char **eps;
} gs_job;

/* Resolve the addresses and the credential; rank 0 of a multi-rank job
 * opens the rendezvous (and tells our launcher its port). */
int gs_job_start(gs_job *j, const gs_opts *o, const gs_rank_env *env, gs_err *e);
/* BLAS threads per rank (rank_threads.c): --threads, or the cores over the
 * ranks on this host (over the world while that is not known). */
int gs_job_threads(const gs_job *j, const gs_opts *o);
/* --threads, or this machine's cores over `ranks` ranks sharing them (our
 * launcher's ranks share them all, on emulated hosts too: the world). */
int gs_threads_per_rank(const gs_opts *o, int ranks);
/* One round: fill cfg's job fields (rank, world, timeout, bind address,
 * local ranks), prepare be, bootstrap on rank 0, rendezvous with settings
 * compared, then cfg holds the endpoints, the blob and the job token.
 * *phase (may be NULL) names the step under way: "backend", "rendezvous". */
int gs_job_meet(gs_job *j, const gs_backend *be, gs_sync_config *cfg, const char *settings,
                const char **phase, gs_err *e);
/* Open the round's backend session (it owns the prepared state from now). */
int gs_job_open(gs_job *j, const gs_sync_config *cfg, gs_sync **out, gs_err *e);
/* End the round (a state prepared but not opened is discarded). */
void gs_job_end(gs_job *j);
/* End the round and leave the rendezvous. */
void gs_job_close(gs_job *j);
/* Best effort: tell rank 0 this rank failed in phase. */
void gs_job_report_error(gs_job *j, const char *phase, const char *msg);
/* Rank 0 of a job that another launcher started, without --out: its results
 * directory, results/<time>-<launcher>-<run id>, the run id's first 6
 * characters (report.json's run_id, a hash of the job token): two jobs
 * started in the same second in one directory get one each. The other
 * ranks write no results (false there; buf left ""). */
bool gs_job_results_dir(const gs_job *j, char *buf, size_t cap);

/* ---- one rank (rank.c) ---- */
/* Run this process as env->rank of a job of mode m; returns an exit code. */
int gs_rank_main(const gs_opts *o, gs_mode m, const gs_rank_env *env);
/* The kernels of --device for this local rank. */
int gs_bench_kernels(const gs_opts *o, int local_rank, int threads, gs_kernels **k, gs_err *e);
/* SIGINT / SIGTERM set gs_interrupted; SIGPIPE is ignored. */
void gs_bench_signals(void);
/* The exit status of a run stopped by a signal: 128 + its number (130
 * SIGINT, 143 SIGTERM), as shells report it. */
int gs_interrupt_status(void);

/* ---- a stale ps run's apply-order log (apply_order.c) ---- */
/* Whether a run writes one: ps with ssp, async or backup workers, fp32
 * without loss scaling; one server (rank 0's thread, --ps-dedicated, or a
 * --ps-server-hosts server) or K (in ranks or processes of their own; not
 * with backup workers), each server's log recorded where it runs. */
bool gs_apply_order_wanted(const gs_opts *o, gs_mode mode, int world);
/* The server whose log rank records (0: the one server, in rank 0 or its
 * dedicated process; k: server k of several, a thread of this rank, when
 * bench's launcher started it: launched), or -1 (none here; servers of
 * their own record theirs, ps_serve.c). */
int gs_apply_order_shard(const gs_opts *o, int rank, int world, bool launched);
/* The log's file name in the run's directory: apply_order.txt, or server
 * k's of several apply_order-shard<k>.txt (the replay finds them there). */
void gs_apply_order_name(int shard, int shards, char *buf, size_t cap);
typedef struct gs_apply_order {
  gs_apply_log log;
  char dir[4200], below[600]; /* written as dir/below/apply_order.txt */
} gs_apply_order;
/* Server `shard`'s log of a run of t's configuration (info names its
 * directory under dir), and *hook for the server
 * (gs_sync_config.applied, gs_ps_serve_alone) that records it and, at the
 * server's orderly end, writes it (gs_apply_order_end). threads: a rank's
 * BLAS threads, which the replay uses (log.threads until the end). */
int gs_apply_order_start(const gs_opts *o, const gs_train_opts *t, int shard, int threads,
                         const char *dir, const gs_run_info *info, gs_apply_order *ao,
                         gs_applied_hook *hook, gs_err *e);
/* gs_applied_end_fn: dir/runs/<the run's id>/<its name>, atomically. */
int gs_apply_order_end(void *ctx, gs_err *e);
void gs_apply_order_free(gs_apply_order *ao);

/* ---- held-out accuracy along the run (heldout.c) ---- */
/* Rank 0 with --eval-data: copies of its parameters after every K-th step
 * (--eval-every K; by default 20 points along the run) and after the last,
 * evaluated once training is over. */
typedef struct gs_heldout {
  int64_t every;    /* 0: no curve, the end's figure alone */
  size_t nparams;
  float **snap;     /* n host copies (and one slot more) */
  int64_t *step;    /* the step each copy is after (0-based) */
  int n, cap;
  double *acc, *loss; /* n + 1, the last the run's end (after finish) */
} gs_heldout;
int gs_heldout_start(gs_heldout *h, const gs_opts *o, int64_t steps, size_t nparams,
                     gs_err *e);
/* after step (0-based) of steps: params where k runs */
int gs_heldout_take(gs_heldout *h, gs_kernels *k, const float *params, int64_t step,
                    int64_t steps, gs_err *e);
/* evaluates every copy and the current parameters on spec; info's
 * heldout_* point into h until gs_heldout_free */
int gs_heldout_finish(gs_heldout *h, gs_trainer *t, const char *spec, gs_run_info *info,
                      gs_err *e);
void gs_heldout_free(gs_heldout *h);

/* ---- the host-aggregated ps (ps_hostagg.c) ---- */
/* b->ps.host_ranks for a ps rank (cfg: its configuration as the backend
 * will see it, k its kernels): the ranks per host where --ps-local-reduce
 * asks for it, or where it is the default (emulated hosts of several ranks
 * each, or --transport shm: one host) and it runs what the run asks (the
 * ps' capabilities); else 0. Asked for where the hosts are unknown or of
 * one rank: GS_EINVAL saying what to do. */
int gs_bench_ps_hostagg(const gs_opts *o, const gs_rank_env *env, const gs_job *j,
                        const gs_kernels *k, const gs_sync_config *cfg, gs_run_backend *b,
                        bool shm, gs_err *e);

/* ---- ps servers of their own (ps_serve.c) ---- */
/* The server role: serve GS_PS_SERVE's server of the run; an exit code. */
int gs_ps_serve_main(const gs_opts *o);
/* The ps servers in processes of their own a run of o has: BytePS' spare
 * hosts' (the run's --ps-spare-hosts), else --ps-servers with
 * --ps-server-hosts. */
int gs_ps_own_servers(const gs_opts *o);
/* A rank's view: the o->ps_servers servers' addresses, from GS_PS_SERVERS
 * (o->ps_servers strings, freed with gs_ps_serve_endpoints_free). */
int gs_ps_serve_endpoints(const gs_opts *o, char ***out, gs_err *e);
void gs_ps_serve_endpoints_free(const gs_opts *o, char **eps);

/* ---- emulated hosts in a job (cluster.c) ---- */
/* --hosts / --link / --latency: parse and check them against the sweep
 * (every world splits evenly over the hosts). */
int gs_cluster_resolve(gs_opts *o, gs_err *e);
/* --link auto (the default) in a training sweep of bench's own launcher:
 * emulated hosts at 1 Gbit/s where this process may build them, else
 * loopback with o->link_why saying why and how to get links. Sets
 * o->link_choice (and link_arg, link_bps); nothing for a given --link. */
void gs_cluster_auto(gs_opts *o);
/* "100us", "2ms": --latency's one-way delay in seconds */
int gs_cluster_parse_delay(const char *s, double *out, gs_err *e);
/* The hosts one run of the sweep gets: 0 for none (no --link, local mode,
 * world 1). */
int gs_cluster_hosts(const gs_opts *o, gs_mode mode, int world);

/* ---- the launcher (launch.c) ---- */
/* Spawn world ranks of one run on this machine with argv + overrides and
 * wait for them; 0 when every rank succeeded. */
typedef struct gs_launch {
  int argc;
  char **argv;              /* this process's argv, re-used for the ranks */
  const char *run_dir;
  int world;
  double timeout_s;
  const char *extra[32];    /* override flags appended to argv */
  int nextra;
  int hosts;                /* > 0: on that many emulated hosts (cluster.c) */
  uint64_t link_bps;
  const gs_host_rates *link_host; /* links of a rate of their own (NULL: none) */
  double latency_s;
  double host_cpus;         /* cores each host may use (0: uncapped) */
  bool exec;                /* argv is a command of the user's (exec.c), not bench:
                               no rendezvous port to wait for, MASTER_PORT exec_port */
  int exec_port;
  struct gs_hostlink_stat *links; /* non-NULL, on hosts: what each host's link carried
                                 while the ranks ran (t: the window), *nlinks hosts */
  int *nlinks;
  int ps_servers_own;       /* > 0: that many ps servers in processes of their own
                               (--ps-server-hosts), on hosts of their own beyond the
                               ranks' when there are emulated hosts */
} gs_launch;
int gs_launch_run(const gs_launch *l, char *why, size_t cap);
/* Wait for n spawned ranks (pids[i] is rank first_rank + i; 0: none to
 * wait for). rc non-zero: a failure already happened, so the survivors
 * get the timeout to stop, then are killed; an interrupt is forwarded.
 * any_end: whichever rank ends first (not only a failing one or rank 0),
 * the others get the timeout, and one killed then fails the run. The
 * first failure's exit code (2 for a usage error, else 1), why naming
 * every rank that failed. */
int gs_launch_watch(pid_t *pids, int n, int first_rank, int rc, double timeout_s, bool any_end,
                    char *why, size_t cap);

/* ---- a command of the user's on emulated hosts (exec.c) ---- */
const char *gs_exec_flag_refused(const char *name);
int gs_exec_resolve(const gs_opts *o, gs_err *e);
int gs_exec_main(const gs_opts *o);
/* argv (NULL-terminated) once per rank of world on hosts emulated hosts
 * with o's links, as a command after -- runs (the torchrun variables,
 * GLOO_SOCKET_IFNAME=eth0); what each host's link carried in links
 * (GS_HOSTS_MAX of them), *nlinks hosts. gs_launch_run's result. */
int gs_exec_on_hosts(const gs_opts *o, char **argv, int world, int hosts,
                     struct gs_hostlink_stat *links, int *nlinks, char *why, size_t cap);

/* ---- bench's own multi-node launcher (nodes.c) ---- */
/* --nnodes N --node-rank R --nproc-per-node K: start this node's K ranks
 * (global ranks R*K .. R*K+K-1 of N*K) as torchrun would, and wait. */
int gs_nodes_main(const gs_opts *o, char **argv);

/* --peer torch (peer.c): whether the peer can run what o asks (a usage
 * error GS_EINVAL otherwise, torch missing included), and one run of it at
 * world with o->train's model, batch and bucket: its result as a row of
 * report.json's "peers" (a new reference). */
extern const char *const GS_PEER_LABEL;
int gs_peer_check(const gs_opts *o, gs_err *e);
int gs_peer_run(const gs_opts *o, int world, json_t **row, gs_err *e);

#endif
