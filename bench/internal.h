/* internal.h: what the bench's files share and nobody else sees: the
 * rendezvous, the launcher, one rank's life, the per-run results. */
#ifndef GS_BENCH_INTERNAL_H
#define GS_BENCH_INTERNAL_H

#include "bench/bench.h"
#include "worker/sync.h"

#define GS_HOST_MAX 256

/* ---- rendezvous (rendezvous.c) ----
 * Rank 0 binds a ROUTER at MASTER_ADDR:MASTER_PORT; every other rank
 * connects a DEALER, registers (rank, world, host, backend endpoint,
 * settings), and receives a welcome with everyone's endpoints, rank 0
 * backend's bootstrap blob and the job token; or an error naming the
 * setting that differs. At the end every rank sends its measurements to
 * rank 0, which acknowledges them so nobody exits before delivery. */
typedef struct gs_rdv gs_rdv;

typedef struct gs_rdv_me {
  int rank, world, local_rank;
  const char *host;         /* hostname */
  const char *endpoint;     /* the backend's prepare() address */
  const char *settings;     /* gs_opts_settings() */
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

/* Rank 0: bind (endpoint "tcp://addr:port", port may be *); the address
 * actually bound is written to bound. */
int gs_rdv_listen(const char *endpoint, char *bound, size_t cap, gs_rdv **out, gs_err *e);
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

/* One rank's measurements of a run. */
typedef struct gs_rank_result {
  int rank;
  char host[GS_HOST_MAX];
  uint64_t peak_rss;
  gs_step_row *rows;
  size_t nrows;
  gs_span *spans;
  size_t nspans;
  int failed;               /* the rank reported an error instead */
  char error[512];
} gs_rank_result;
void gs_rank_result_free(gs_rank_result *r);

/* Rank > 0: send rows + spans to rank 0 and wait for its acknowledgement. */
int gs_rdv_send_stats(gs_rdv *r, int rank, const gs_rank_result *mine, int timeout_ms,
                      gs_err *e);
/* Rank 0: receive the other ranks' results into out[1..world-1]. */
int gs_rdv_gather(gs_rdv *r, int world, int timeout_ms, gs_rank_result *out, gs_err *e);
/* Best effort: tell rank 0 this rank failed (before exiting non-zero). */
void gs_rdv_report_error(gs_rdv *r, int rank, const char *phase, const char *msg);
void gs_rdv_close(gs_rdv *r);

/* ---- environment (env.c) ---- */
typedef struct gs_rank_env {
  bool present;             /* RANK etc. set: join as this rank */
  bool launched;            /* by our own launcher (GS_LAUNCHED=1) */
  const char *source;       /* "torchrun", "slurm", "openmpi", "gradsync" */
  int rank, world, local_rank, local_world;
  char master_addr[GS_HOST_MAX];
  int master_port;          /* 0: choose (our launcher only) */
  int port_fd;              /* our launcher: where rank 0 writes its port */
  const char *run_dir;      /* our launcher: where rank 0 writes run.json */
} gs_rank_env;
int gs_rank_env_read(gs_rank_env *env, gs_err *e);

/* ---- one rank (rank.c) ---- */
/* Run this process as env->rank of a job of mode m; returns an exit code. */
int gs_rank_main(const gs_opts *o, gs_mode m, const gs_rank_env *env);

/* shared by rank.c and collective.c */
int bench_kernels(const gs_opts *o, int local_rank, int threads, gs_kernels **k, gs_err *e);
int bench_default_threads(int local_world);
const gs_backend *bench_pick_backend(gs_mode m, gs_kernels *k, gs_err *e);
void bench_rdv_bind_addr(const gs_rank_env *env, char *buf, size_t cap);

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
} gs_launch;
int gs_launch_run(const gs_launch *l, char *why, size_t cap);

#endif
