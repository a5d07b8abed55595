/* rank.c: the life of one rank.
 *
 *   start (job.c: addresses, rank 0's rendezvous; the kernels of
 *   --device, device.c; the trainer: model, data, buckets) -> the backend's
 *   row and options (backends.c, plus what only a rank knows) -> meet: one
 *   round of the job: backend prepare, rendezvous (everyone learns the
 *   endpoints, the bootstrap blob and the job token, or a clear mismatch
 *   error) -> train: open, a steps.csv row per step as it goes, close ->
 *   after training (save, evaluate) -> gather: rank 0 collects every
 *   rank's rows and spans (gather.c) -> summary (summary.c) and the run's
 *   results (run.json, trace), written atomically.
 *
 * Under our launcher every rank appends to the sweep's steps.csv, and the
 * launcher writes the report. Under any other (torchrun, mpirun, srun,
 * bench --nnodes), whose ranks may not share a disk, only rank 0 writes:
 * steps.csv begun afresh with its own rows as they go, then replaced with
 * every rank's gathered rows, and the whole results directory of a local
 * run (report.json, charts, trace), the launcher named in it.
 *
 * Any failure prints one line naming this rank, the phase and the cause,
 * tells rank 0 when it can, and exits non-zero; an interrupt (SIGINT /
 * SIGTERM) stops at the next wait and exits 130 (143). steps.csv is flushed per
 * row, so a killed run keeps every completed step. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "bench/costmodel/costmodel.h"
#include "bench/job/job.h"
#include "bench/report/report.h"

typedef struct step_ctx {
  const gs_opts *o;
  gs_mode mode;
  int rank, world;
  gs_run_info run;         /* what steps.csv's rows say of the run */
  int csv;                 /* steps.csv, O_APPEND, or -1 */
  const char *out_dir;     /* where steps.csv is */
  gs_kernels *k;
  gs_sync_config *cfg;
  float *host_params;      /* staging for --verify on devices */
  uint64_t *hashes;        /* --verify: this rank's hash after each step, for the gather */
  size_t nhashes;
  double t0, last_print;
  bool tty;
  int64_t steps;
  gs_hostlink_watch *link;     /* the first rank of an emulated host: its link */
  gs_hostlink_stat link0, link1;  /* at the start and the end of the measured steps */
  /* rank 0: the links of ps servers on hosts of their own, read alike */
  gs_hostlink_watch **srv;
  gs_hostlink_stat *srv0, *srv1;
  int nsrv;
  gs_heldout heldout;      /* rank 0, --eval-data: the parameters along the run */
  const float *params;     /* ... copied from here: all of them, frozen ones too */
  gs_err err;              /* why on_step stopped the run */
} step_ctx;

/* Rank 0 on emulated hosts with ps servers on hosts of their own: watch
 * their links too (GS_PS_SERVER_PIDS: their pids, which this rank's /proc
 * shows, the cluster's processes sharing one PID namespace). */
static int watch_servers(step_ctx *c, gs_err *e) {
  const char *v = getenv("GS_PS_SERVER_PIDS");
  int K = gs_ps_own_servers(c->o);
  if (!v || !*v) return GS_OK;
  c->srv = calloc((size_t)K, sizeof *c->srv);
  c->srv0 = calloc((size_t)K, sizeof *c->srv0);
  c->srv1 = calloc((size_t)K, sizeof *c->srv1);
  if (!c->srv || !c->srv0 || !c->srv1) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  const char *p = v;
  for (int k = 0; k < K; k++) {
    char *end;
    long pid = strtol(p, &end, 10);
    if (end == p || pid <= 0 || (*end && *end != ','))
      return GS_FAIL(e, GS_EINVAL, "GS_PS_SERVER_PIDS='%.100s': not %d pids", v, K);
    GS_TRY(gs_hostlink_watch_start_pid((int)pid, c->o->link_bps, 0.005, &c->srv[k], e));
    gs_hostlink_watch_read(c->srv[k], &c->srv0[k]);
    c->nsrv = k + 1;
    p = *end ? end + 1 : end;
  }
  return GS_OK;
}

static void read_servers(step_ctx *c, gs_hostlink_stat *into) {
  for (int k = 0; k < c->nsrv; k++) gs_hostlink_watch_read(c->srv[k], &into[k]);
}

/* the counters of one link over the window [a, b], as a rank reports them */
static void link_result(gs_rank_result *x, int host, const gs_hostlink_stat *a,
                        const gs_hostlink_stat *b) {
  x->link_host = host;
  x->link_tx = b->up_bytes - a->up_bytes;
  x->link_rx = b->down_bytes - a->down_bytes;
  double w = b->t - a->t;
  x->link_window_s = w;
  /* a link busy through every interval sums the intervals, which may round
   * a hair above their span: the gather refuses busy > window, so clamp */
  x->link_busy_tx_s = fmin(b->up_busy_s - a->up_busy_s, w);
  x->link_busy_rx_s = fmin(b->down_busy_s - a->down_busy_s, w);
  x->link_busy_s = fmin(b->any_busy_s - a->any_busy_s, w);
}

static int on_step(void *vctx, const gs_step_row *row) {
  step_ctx *c = vctx;
  uint64_t ph = 0;
  if (c->o->verify) {
    const float *p = c->cfg->params;
    if (c->k->device != GS_DEV_CPU) {
      c->k->to_host(c->k, c->host_params, c->cfg->params, c->cfg->n * sizeof(float));
      if (c->k->sync(c->k, NULL) < 0) return GS_EDEVICE;
      p = c->host_params;
    }
    ph = gs_hash_bytes(GS_HASH_INIT, p, c->cfg->n * sizeof(float));  /* what --verify compares */
    if (c->hashes && c->nhashes < (size_t)c->steps) c->hashes[c->nhashes++] = ph;
  }
  if (c->csv >= 0) {
    char line[4096];
    int n = gs_csv_row(line, sizeof line, &c->run, row, ph);
    ssize_t w = n < 0 ? 0 : write(c->csv, line, (size_t)n);
    if (n < 0 || w != n) {
      int err = w < 0 ? errno : ENOSPC;
      /* a full disk takes part of a row: cut it off, so that every line of
       * the file stays whole */
      if (w > 0) {
        off_t end = lseek(c->csv, 0, SEEK_CUR);
        if (end >= w && ftruncate(c->csv, end - w) < 0) err = errno;
      }
      fprintf(stderr, "bench: rank %d: writing %s/steps.csv: %s (its complete rows are kept; "
              "this rank goes on without it)\n", c->rank, c->out_dir,
              n < 0 ? "a row longer than 4 KiB" : strerror(err));
      close(c->csv);
      c->csv = -1;
    }
  }
  int rc = gs_heldout_take(&c->heldout, c->k, c->params, row->step, c->steps, &c->err);
  if (rc < 0) return rc;
  /* the counters' window starts where the summary's steps do (at 0 it
   * was read before the first step) */
  int64_t first = gs_first_measured(c->run.warmup, c->steps);
  if (c->link && first > 0 && row->step + 1 == first) gs_hostlink_watch_read(c->link, &c->link0);
  if (c->link && row->step + 1 == c->steps) gs_hostlink_watch_read(c->link, &c->link1);
  if (first > 0 && row->step + 1 == first) read_servers(c, c->srv0);
  if (row->step + 1 == c->steps) read_servers(c, c->srv1);
  if (c->rank == 0 && !c->o->quiet) {
    double now = gs_now();
    int64_t done = row->step + 1;
    bool last = done == c->steps;
    double elapsed = now - c->t0;
    double rate = row->step_s > 0 ? (double)row->samples * c->world / row->step_s : 0;
    double eta = elapsed / (double)done * (double)(c->steps - done);
    int64_t every = c->o->log_every > 0 ? c->o->log_every : (c->steps >= 10 ? c->steps / 10 : 1);
    if (c->tty && (now - c->last_print >= 0.1 || last)) {
      printf("\rstep %6lld/%lld  %s w%d  loss %.4f  ETA %.0fs  %.0f samples/s   ",
             (long long)done, (long long)c->steps, gs_mode_name(c->mode), c->world, row->loss,
             eta, rate);
      if (last) putchar('\n');
      fflush(stdout);
      c->last_print = now;
    } else if (!c->tty && (done % every == 0 || last)) {
      printf("step %6lld/%lld  %s w%d  loss %.4f  ETA %.0fs  %.0f samples/s\n",
             (long long)done, (long long)c->steps, gs_mode_name(c->mode), c->world, row->loss,
             eta, rate);
      fflush(stdout);
    }
  }
  return gs_interrupted ? GS_EINTR : 0;
}

static uint64_t peak_rss(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)ru.ru_maxrss * 1024u;
}

/* A rank started by hand runs one configuration of the sweep. */
static int one_configuration(const gs_opts *o, const gs_rank_env *env, gs_err *e) {
  if (o->world_given && o->nworlds == 1 && o->worlds[0] != env->world)
    return GS_FAIL(e, GS_EINVAL, "--world %d disagrees with %s's world size %d; drop --world "
                   "or make them agree", o->worlds[0], env->source, env->world);
  if ((o->world_given && o->nworlds > 1) || o->nmodes > 1 || o->nmodels > 1 ||
      o->nbatches > 1 || o->nbucket_mbs > 1)
    return GS_FAIL(e, GS_EINVAL, "a rank started by %s runs one configuration: give single "
                   "values to --mode, --world, --model, --batch and --bucket-mb", env->source);
  return GS_OK;
}

/* Rank 0: everyone's rows and spans -> the run's summary -> run.json,
 * trace.json; under another launcher also steps.csv with every rank's rows,
 * report.json, the charts and the table, as our launcher would write them. */
static int summarize(const gs_opts *o, const gs_rank_env *env, const char *out_dir,
                     gs_run_info *info, gs_rank_result *results, gs_err *e) {
  gs_summary s;
  GS_TRY(gs_summarize(info, results, &s, e));
  int rc = out_dir ? gs_results_write_run(out_dir, &s, info, results, e) : GS_OK;
  if (rc == GS_OK && !env->launched) {
    gs_summary_scaling(&s, 1, o->strong);
    gs_stale_targets(&s, 1, o->target_loss);
    gs_summary_print(stdout, &s);
    gs_opts job = *o; /* the report's configuration: this job's one run */
    job.worlds[0] = info->world;
    job.nworlds = 1;
    if (out_dir) rc = gs_results_write_steps(out_dir, info, results, e);
    if (rc == GS_OK && out_dir) rc = gs_report_write(out_dir, &job, &s, 1, NULL, false, e);
    if (rc == GS_OK && out_dir && !o->quiet)
      printf("results: %s/report.html, report.json, steps.csv, trace.json, *.svg (launcher: %s)\n", out_dir,
             env->source);
  }
  gs_summary_free(&s);
  return rc;
}

/* ---- the rank's life, phase by phase ---- */

/* Everything one rank holds from its start to its exit. */
typedef struct rank_life {
  const gs_opts *o;
  gs_mode mode;
  const gs_rank_env *env;
  int rank, world, threads;
  const char *phase;            /* what failed names */
  gs_err e;
  gs_job job;
  gs_kernels *k;
  gs_trainer *t;
  gs_train_opts to;
  gs_run_backend b;             /* the backend's row and its options (backends.c) */
  gs_sync_config cfg;
  gs_sync *sync;
  char **server_eps;            /* --ps-server-hosts: the servers' addresses */
  gs_apply_order alog;          /* a stale ps run's apply order (apply_order.c) */
  bool logging;
  gs_run_info info;
  step_ctx sc;
  const char *out_dir;
  char own_dir[300];            /* rank 0 of another launcher's job without --out */
  char run_id[GS_RUN_ID_CHARS + 1];
  gs_rank_result *results;      /* rank 0: every rank's, for the summary */
  size_t *bucket_bytes;         /* the cost model's plan, for the summary */
  size_t *gather_bytes;         /* ring top-k: its all-gather as all-reduce bytes */
  gs_cm_compressed compressed;  /* --compress powersgd / topk: its plan, for the summary */
} rank_life;

/* The job's start, the kernels and the trainer, whose buffers the backend
 * gets. */
static int start(rank_life *r) {
  GS_TRY(one_configuration(r->o, r->env, &r->e));
  GS_TRY(gs_job_start(&r->job, r->o, r->env, &r->e));
  if (!r->out_dir && !r->env->launched &&
      gs_job_results_dir(&r->job, r->own_dir, sizeof r->own_dir))
    r->out_dir = r->own_dir;
  r->threads = gs_job_threads(&r->job, r->o);
  GS_TRY(gs_bench_kernels(r->o, r->job.local_rank, r->threads, &r->k, &r->e));
  r->sc.k = r->k;
  r->to = r->o->train;
  r->to.rank = r->rank;
  r->to.world = r->world;
  GS_TRY(gs_trainer_create(&r->to, r->k, &r->t, &r->e));
  gs_trainer_sync_config(r->t, &r->cfg);
  r->cfg.overlap = gs_backends_overlap(r->o, r->mode);
  r->sc.cfg = &r->cfg;
  return GS_OK;
}

/* The backend's row and its options of its own: the flags' (backends.c),
 * and what only a rank knows: its hosts and its launcher's servers. */
static int pick_backend(rank_life *r) {
  const gs_opts *o = r->o;
  gs_run_backend *b = &r->b;
  GS_TRY(gs_backends_pick(o, r->mode, r->world, (int)r->k->device, b, &r->e));
  bool shm = !strcmp(o->transport, "shm");
  if (b->backend == &gs_allreduce_backend) {
    /* hier when asked; auto tries it (allreduce/backend.c) only on emulated
     * hosts of several ranks each, so every other training job opens
     * exactly the flat ring's sockets */
    const gs_rank_env *env = r->env;
    bool hosts_of_several = env->hosts > 1 && r->world > env->hosts &&
                            r->world % env->hosts == 0;
    b->allreduce.algo = o->algo == GS_ALGO_HIER || (o->algo == GS_ALGO_AUTO && hosts_of_several)
                            ? (gs_algo)o->algo : GS_ALGO_RING;
    if (shm && o->algo == GS_ALGO_AUTO) b->allreduce.algo = GS_ALGO_HIER; /* one host: shm alone */
  }
  if (b->backend == &gs_ps_backend) {
    GS_TRY(gs_bench_ps_hostagg(o, r->env, &r->job, r->k, &r->cfg, b, shm, &r->e));
    if (o->ps_server_hosts || (b->ps.summation && b->ps.spare > 0)) {
      GS_TRY(gs_ps_serve_endpoints(o, &r->server_eps, &r->e));
      b->ps.server_eps = (const char *const *)r->server_eps;
    }
    /* BytePS' split is over the workers' hosts: emulated ones, else every
     * rank a machine of its own */
    if (b->ps.summation) b->ps.hosts = r->env->hosts > 0 ? r->env->hosts : 0;
  }
  r->cfg.opts = b->opts;
  return GS_OK;
}

/* Before the rendezvous: what this rank writes as it trains (steps.csv
 * under another launcher, the apply-order log of a server it holds, the
 * --verify hashes); then the round: prepare, bootstrap, rendezvous. */
static int meet(rank_life *r) {
  const gs_opts *o = r->o;
  char settings[4096];
  gs_run_settings(o, r->mode, r->world, settings, sizeof settings);
  /* another launcher: rank 0 begins steps.csv before anyone trains (a rerun
   * never appends to an old one); the others keep their rows for the gather */
  if (!r->env->launched && r->rank == 0 && r->out_dir) {
    int fd = gs_csv_start(r->out_dir, &r->e);
    if (fd < 0) return fd;
    r->sc.csv = fd;
  }
  /* the server this rank holds (a thread, or rank 0's dedicated process) logs */
  int shard = gs_apply_order_shard(o, r->rank, r->world, r->env->launched);
  if (r->out_dir && shard >= 0 && gs_apply_order_wanted(o, r->mode, r->world)) {
    GS_TRY(gs_apply_order_start(o, &r->to, shard, r->threads, r->out_dir, &r->info, &r->alog,
                                &r->b.ps.applied, &r->e));
    r->logging = true;
  }
  if (o->verify && !(r->sc.hashes = calloc((size_t)o->train.steps + 1, sizeof *r->sc.hashes)))
    return GS_FAIL(&r->e, GS_ENOMEM, "out of memory");
  GS_TRY(gs_job_meet(&r->job, r->b.backend, &r->cfg, settings, &r->phase, &r->e));
  gs_run_id_of_job(r->cfg.job, r->run_id);
  r->info.run_id = r->sc.run.run_id = getenv("GS_RUN_ID") ? getenv("GS_RUN_ID") : r->run_id;
  if (o->threads <= 0 && r->env->local_world <= 0) {
    r->threads = gs_job_threads(&r->job, o);
    r->k->set_threads(r->k, r->threads);
    r->alog.log.threads = r->threads;
  }
  return GS_OK;
}

/* The link counters of this rank's emulated host (its first rank), and on
 * rank 0 those of ps servers on hosts of their own. */
static int watch_links(rank_life *r) {
  const gs_rank_env *env = r->env;
  if (env->hosts <= 0 || r->job.local_rank != 0) return GS_OK;
  uint64_t bps = gs_host_rates_of(&r->o->link_host, env->host, r->o->link_bps);
  GS_TRY(gs_hostlink_watch_start(bps, 0.005, &r->sc.link, &r->e));
  gs_hostlink_watch_read(r->sc.link, &r->sc.link0);
  if (r->rank == 0 && r->mode == GS_MODE_PS) GS_TRY(watch_servers(&r->sc, &r->e));
  return GS_OK;
}

/* Open the session, train (a steps.csv row per step), close it. */
static int train(rank_life *r) {
  const gs_opts *o = r->o;
  r->phase = "backend";
  GS_TRY(gs_job_open(&r->job, &r->cfg, &r->sync, &r->e));
  /* what the ring's buckets run (hier or ring), as its host keys decided */
  gs_comm *comm = r->mode == GS_MODE_ALLREDUCE && r->world > 1 ? gs_allreduce_comm(r->sync)
                                                                : NULL;
  r->info.algo = comm ? gs_algo_name(gs_comm_algo(comm, SIZE_MAX)) : "";
  int L = r->b.backend == &gs_ps_backend ? r->b.ps.host_ranks : 0;
  if (r->mode == GS_MODE_PS) r->info.algo = L > 1 ? "local-reduce" : "flat";
  r->info.ps_host_ranks = r->mode == GS_MODE_PS ? L : 0;
  if (r->out_dir && r->env->launched) {
    if ((r->sc.csv = gs_csv_open(r->out_dir, &r->e)) < 0) {
      int rc = r->sc.csv;
      r->sc.csv = -1;
      return rc;
    }
    r->sc.out_dir = r->out_dir;
  }
  if (o->verify && r->k->device != GS_DEV_CPU)
    r->sc.host_params = malloc(r->cfg.n * sizeof(float) + 1);
  r->sc.t0 = gs_now();
  GS_TRY(watch_links(r));
  r->sc.tty = isatty(1) && !getenv("GS_TEST");
  r->sc.steps = o->train.steps;
  r->sc.params = gs_trainer_params(r->t);
  if (r->rank == 0)
    GS_TRY(gs_heldout_start(&r->sc.heldout, o, r->sc.steps, gs_trainer_nparams(r->t), &r->e));

  r->phase = "training";
  int rc = gs_trainer_run(r->t, r->sync, on_step, &r->sc, &r->e);
  if (rc < 0 && r->sc.err.code) r->e = r->sc.err;
  gs_err ce = {0};
  int crc = r->sync->ops->close(r->sync, rc == GS_OK, &ce);
  r->sync = NULL;
  if (rc == GS_OK && crc < 0) {
    rc = crc;
    r->e = ce;
  }
  return rc;
}

/* Rank 0, once trained: --save-params, --eval, --eval-data. */
static int after_training(rank_life *r) {
  const gs_opts *o = r->o;
  if (r->rank != 0) return GS_OK;
  if (o->save_params) {
    r->phase = "saving parameters";
    GS_TRY(gs_trainer_save(r->t, o->save_params, &r->e));
  }
  if (o->eval) {
    r->phase = "evaluation";
    GS_TRY(gs_trainer_evaluate(r->t, 10000, &r->info.accuracy, &r->info.eval_loss, &r->e));
  }
  if (o->eval_data) {
    r->phase = "held-out evaluation";
    GS_TRY(gs_heldout_finish(&r->sc.heldout, r->t, o->eval_data, &r->info, &r->e));
  }
  return GS_OK;
}

/* This rank's measurements: rows, spans, memory, its host's link. */
static gs_rank_result my_result(rank_life *r) {
  step_ctx *sc = &r->sc;
  gs_rank_result mine = {.rank = r->rank, .peak_rss = peak_rss(), .link_host = -1};
  if (sc->link && sc->link1.t > sc->link0.t) link_result(&mine, r->env->host, &sc->link0, &sc->link1);
  if (sc->nsrv > 0 && sc->srv1[0].t > sc->srv0[0].t &&
      (mine.server_links = calloc((size_t)sc->nsrv, sizeof *mine.server_links))) {
    mine.nserver_links = sc->nsrv;
    for (int i = 0; i < sc->nsrv; i++)
      link_result(&mine.server_links[i], r->env->hosts + i, &sc->srv0[i], &sc->srv1[i]);
  }
  snprintf(mine.host, sizeof mine.host, "%s", r->job.hostname);
  mine.rows = (gs_step_row *)gs_trainer_rows(r->t, &mine.nrows);
  mine.spans = (gs_span *)gs_trainer_spans(r->t, &mine.nspans);
  for (size_t i = 0; i < mine.nrows && i < sc->nhashes; i++) mine.rows[i].param_hash = sc->hashes[i];
  return mine;
}

/* Every rank's measurements to rank 0 (the others send theirs and are
 * done). */
static int gather(rank_life *r, bool *done) {
  r->phase = "gathering measurements";
  gs_rank_result mine = my_result(r);
  *done = r->rank != 0;
  if (r->rank != 0) {
    int rc = gs_rdv_send_stats(r->job.rdv, r->rank, &mine, r->job.timeout_ms, &r->e);
    free(mine.server_links);
    if (rc < 0) return rc;
    /* fault injection for the tests: a rank that stalls once it is done */
    const char *stop = getenv("GS_TEST_STOP_AFTER_GATHER");
    if (stop && atoi(stop) == r->rank) raise(SIGSTOP);
    return GS_OK;
  }
  r->results = calloc((size_t)r->world, sizeof *r->results);
  if (!r->results) {
    free(mine.server_links);
    return GS_FAIL(&r->e, GS_ENOMEM, "out of memory");
  }
  r->results[0] = mine;
  /* what this job makes: a row per step, and per step a few spans of the
   * training loop and a few per bucket (rank 0 may have more, its server's) */
  gs_gather_limits lim = {.rows = mine.nrows,
                          .spans = mine.nspans + (size_t)r->o->train.steps *
                                   (16 + 4 * (size_t)r->cfg.nbuckets) + 1024};
  if (r->world > 1)
    GS_TRY(gs_rdv_gather(r->job.rdv, r->world, &lim, r->job.timeout_ms, r->results, &r->e));
  return GS_OK;
}

/* --compress powersgd / topk: what the compressed buckets move, for the
 * summary's cost model (best effort: a plan that fails leaves it out). */
static void compressed_plan(rank_life *r) {
  const gs_opts *o = r->o;
  const gs_sync_config *cfg = &r->cfg;
  bool topk = cfg->compress.kind == GS_COMPRESS_TOPK;
  if (!r->bucket_bytes || (cfg->compress.kind != GS_COMPRESS_POWERSGD && !topk) || r->world <= 1 ||
      gs_cm_compress_plan(&cfg->compress, o->train.precision, cfg->tensors, cfg->ntensors,
                          cfg->buckets, cfg->nbuckets, cfg->n, &r->compressed, &r->e) != GS_OK)
    return;
  /* step s compresses from --powersgd-start on; the summary measures from --warmup */
  int64_t steps = o->train.steps, from = gs_first_measured(o->warmup, steps);
  int64_t on = !topk && cfg->compress.start > from ? cfg->compress.start : from;
  bool ps = r->mode == GS_MODE_PS;
  gs_run_info *info = &r->info;
  info->compressed_bytes = r->compressed.plan.bytes;
  /* the ring's all-gather, priced as the all-reduce of as many bytes */
  if (topk && !ps && (r->gather_bytes = calloc((size_t)cfg->nbuckets, sizeof *r->gather_bytes))) {
    gs_cm_topk_ring_bytes(&r->compressed.plan, r->world, r->gather_bytes);
    info->compressed_bytes = r->gather_bytes;
  }
  info->compressed_collectives = r->compressed.collectives;
  info->compressed_share = steps > from && on < steps ? (double)(steps - on) / (double)(steps - from)
                                                      : 0;
  info->compressed_push = ps;
  info->compressed_sums_back = ps && !topk;
}

/* Rank 0: what the run was, then its summary and files. */
static int summary(rank_life *r) {
  const gs_opts *o = r->o;
  gs_run_info *info = &r->info;
  const gs_sync_config *cfg = &r->cfg;
  r->phase = "summary";
  info->device = r->k->name;
  info->launcher = r->env->source;
  info->threads = r->threads;
  info->nparams = cfg->n;
  info->nbuckets = cfg->nbuckets;
  r->bucket_bytes = calloc((size_t)cfg->nbuckets + 1, sizeof *r->bucket_bytes);
  for (int b = 0; r->bucket_bytes && b < cfg->nbuckets; b++)
    r->bucket_bytes[b] = cfg->buckets[b].count * gs_dtype_size(cfg->wire);
  info->bucket_bytes = r->bucket_bytes;
  compressed_plan(r);
  gs_err_clear(&r->e);
  info->wire = cfg->wire;
  info->overlap = cfg->overlap;
  info->wall_end = gs_wall();
  if (info->hosts > 0 && o->latency_s > 0)
    info->delay = r->env->delay_line_s > 0 ? "delay line" : "netem";
  /* loopback over TCP: the transport our launcher measured for the cost model */
  if (info->hosts < 1 && r->env->launched && !strcmp(o->transport, "tcp"))
    gs_loopback_costmodel(&info->loop_alpha_s, &info->loop_Bps);
  return summarize(o, r->env, r->out_dir, info, r->results, &r->e);
}

/* A failure's line (naming this rank, the phase and the cause) and its
 * word to rank 0; an interrupt's. */
static int failed(rank_life *r, int rc) {
  if (gs_interrupted) {
    fprintf(stderr, "bench: rank %d: interrupted during %s; steps.csv keeps every completed "
            "step\n", r->rank, r->phase);
    gs_job_report_error(&r->job, r->phase, "interrupted");
    return GS_EINTR;
  }
  /* one fprintf, one write: the ranks share stderr, and a line written in
   * pieces takes in another rank's line between them */
  char where[256] = "";
  if (r->e.file && getenv("GS_DEBUG")) snprintf(where, sizeof where, " [%s:%d]", r->e.file, r->e.line);
  fprintf(stderr, "bench: rank %d: %s: %s%s\n", r->rank, r->phase,
          r->e.msg[0] ? r->e.msg : gs_strerror(rc), where);
  gs_job_report_error(&r->job, r->phase, r->e.msg);
  return rc;
}

static void release(rank_life *r) {
  step_ctx *sc = &r->sc;
  if (r->sync) r->sync->ops->close(r->sync, false, NULL);
  if (sc->csv >= 0) close(sc->csv);
  free(sc->host_params);
  free(sc->hashes);
  gs_heldout_free(&sc->heldout);
  free(r->bucket_bytes);
  free(r->gather_bytes);
  gs_cm_compressed_free(&r->compressed);
  gs_ps_serve_endpoints_free(r->o, r->server_eps);
  gs_hostlink_watch_stop(sc->link);
  for (int i = 0; i < sc->nsrv; i++) gs_hostlink_watch_stop(sc->srv[i]);
  free(sc->srv);
  free(sc->srv0);
  free(sc->srv1);
  if (r->results) {
    r->results[0].rows = NULL; /* rank 0's own rows and spans belong to the trainer */
    r->results[0].spans = NULL;
    for (int i = 0; i < r->world; i++) gs_rank_result_free(&r->results[i]);
    free(r->results);
  }
  gs_job_close(&r->job);
  if (r->logging) gs_apply_order_free(&r->alog);
  if (r->t) gs_trainer_destroy(r->t);
  if (r->k) r->k->destroy(r->k);
}

int gs_rank_main(const gs_opts *o, gs_mode mode, const gs_rank_env *env) {
  rank_life *r = calloc(1, sizeof *r);
  if (!r) {
    fprintf(stderr, "bench: rank %d: setup: out of memory\n", env->rank);
    return 1;
  }
  *r = (rank_life){.o = o, .mode = mode, .env = env, .rank = env->rank, .world = env->world,
                   .phase = "setup"};
  r->info = gs_run_info_of(o, mode, r->world);
  gs_run_info_repeat(&r->info, env->launched);
  r->info.wall_start = gs_wall();
  r->sc = (step_ctx){.o = o, .mode = mode, .rank = r->rank, .world = r->world, .csv = -1,
                     .run = r->info};
  r->out_dir = env->run_dir ? env->run_dir : o->out;

  gs_bench_signals();
  bool done = false;
  int rc = start(r);
  if (rc == GS_OK) rc = pick_backend(r);
  if (rc == GS_OK) rc = meet(r);
  if (rc == GS_OK) rc = train(r);
  if (rc == GS_OK) rc = after_training(r);
  if (rc == GS_OK) rc = gather(r, &done);
  if (rc == GS_OK && !done) rc = summary(r);
  if (rc < 0) rc = failed(r, rc);
  /* a wrong value that only the model or the data could judge (a model
   * that does not fit the data, say) is still a usage error */
  bool usage = rc == GS_EINVAL && !strcmp(r->phase, "setup");
  release(r);
  free(r);
  if (rc == GS_OK) return 0;
  return rc == GS_EINTR ? gs_interrupt_status() : usage ? 2 : 1;
}
