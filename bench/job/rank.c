/* rank.c: the life of one rank.
 *
 *   job start (job.c: addresses, rank 0's rendezvous) -> kernels (cpu /
 *   cuda) -> trainer (model, data, buckets) -> one round of the job:
 *   backend prepare, rendezvous (everyone learns the endpoints, the
 *   bootstrap blob and the job token, or a clear mismatch error), open ->
 *   train, appending one steps.csv row per step as it goes -> close ->
 *   rank 0 gathers every rank's rows and spans (gather.c), summarises them
 *   (summary.c) and writes the run's results (run.json, trace) atomically.
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

static void on_signal(int sig) { gs_interrupted = sig; }

int gs_interrupt_status(void) { return 128 + (gs_interrupted > 0 ? gs_interrupted : SIGINT); }

void gs_bench_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

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
  gs_err err;              /* why on_step stopped the run */
} step_ctx;

/* Rank 0 on emulated hosts with ps servers on hosts of their own: watch
 * their links too (GS_PS_SERVER_PIDS: their pids, which this rank's /proc
 * shows, the cluster's processes sharing one PID namespace). */
static int watch_servers(step_ctx *c, gs_err *e) {
  const char *v = getenv("GS_PS_SERVER_PIDS");
  int K = c->o->ps_servers;
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
  int rc = gs_heldout_take(&c->heldout, c->k, c->cfg->params, row->step, c->steps, &c->err);
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

int gs_bench_kernels(const gs_opts *o, int local_rank, int threads, gs_kernels **k, gs_err *e) {
  const char *dev = o->device;
  if (!strcmp(dev, "auto")) dev = gs_cuda_device_count() > 0 ? "cuda" : "cpu";
  if (!strcmp(dev, "cuda")) {
    int n = gs_cuda_device_count();
    *k = gs_kernels_cuda(n > 0 ? local_rank % n : 0, e);
  } else {
    *k = gs_kernels_cpu(threads, e);
  }
  return *k ? GS_OK : (e->code ? e->code : GS_EDEVICE);
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
static int summarize(const gs_opts *o, const gs_rank_env *env, gs_run_info *info,
                     gs_rank_result *results, gs_err *e) {
  gs_summary s;
  GS_TRY(gs_summarize(info, results, &s, e));
  const char *out_dir = env->run_dir ? env->run_dir : o->out;
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

int gs_rank_main(const gs_opts *o, gs_mode mode, const gs_rank_env *env) {
  gs_err e = {0};
  int rank = env->rank, world = env->world, rc = GS_OK;
  const char *phase = "setup";
  gs_job job;
  memset(&job, 0, sizeof job);
  gs_kernels *k = NULL;
  gs_trainer *t = NULL;
  gs_sync *sync = NULL;
  gs_rank_result *results = NULL;
  size_t *bucket_bytes = NULL; /* the cost model's plan, for the summary */
  size_t *gather_bytes = NULL; /* ring top-k: its all-gather as all-reduce bytes */
  gs_cm_compressed compressed;  /* --compress powersgd: its plan, for the summary */
  memset(&compressed, 0, sizeof compressed);
  char **server_eps = NULL;    /* --ps-server-hosts: the servers' addresses */
  gs_run_info info = gs_run_info_of(o, mode, world);
  gs_run_info_repeat(&info, env->launched);
  step_ctx sc = {.o = o, .mode = mode, .rank = rank, .world = world, .csv = -1, .run = info};
  gs_sync_config cfg;
  memset(&cfg, 0, sizeof cfg);
  gs_apply_order alog; /* a stale ps run's apply order (apply_order.c) */
  memset(&alog, 0, sizeof alog);
  bool logging = false;
  info.wall_start = gs_wall();

  gs_bench_signals();
  if ((rc = one_configuration(o, env, &e)) < 0) goto fail;
  if ((rc = gs_job_start(&job, o, env, &e)) < 0) goto fail;
  int threads = gs_job_threads(&job, o);
  if ((rc = gs_bench_kernels(o, job.local_rank, threads, &k, &e)) < 0) goto fail;
  sc.k = k;

  gs_train_opts to = o->train;
  to.rank = rank;
  to.world = world;
  if ((rc = gs_trainer_create(&to, k, &t, &e)) < 0) goto fail;
  gs_trainer_sync_config(t, &cfg);
  cfg.overlap = o->overlap < 0 ? mode == GS_MODE_ALLREDUCE : o->overlap == 1;
  cfg.no_resend = !o->resend;
  cfg.dedicated = o->dedicated;
  cfg.ps_servers = mode == GS_MODE_PS ? o->ps_servers : 1;
  if (mode == GS_MODE_PS) cfg.ps_sync = o->ps_sync;
  if (mode == GS_MODE_ALLREDUCE) cfg.ring_period = o->ring_period;
  if (cfg.ring_period > 1 && k->device != GS_DEV_CPU) {
    rc = GS_FAIL(&e, GS_EINVAL, "--ring-period %d: periodic averaging runs on the CPU ring so "
                 "far, not NCCL: add --device cpu", o->ring_period);
    goto fail;
  }
  /* hier when asked; auto tries it (allreduce/backend.c) only on emulated hosts of
   * several ranks each, so every other training job opens exactly the
   * flat ring's sockets */
  bool hosts_of_several = env->hosts > 1 && world > env->hosts && world % env->hosts == 0;
  bool shm = !strcmp(o->transport, "shm");
  cfg.algo = o->algo == GS_ALGO_HIER || (o->algo == GS_ALGO_AUTO && hosts_of_several)
                 ? o->algo : GS_ALGO_RING;
  if (shm && o->algo == GS_ALGO_AUTO) cfg.algo = GS_ALGO_HIER; /* one host: shm alone */
  if (mode == GS_MODE_PS && world > 1 &&
      (rc = gs_bench_ps_hostagg(o, env, &job, k, &cfg, shm, &e)) < 0)
    goto fail;
  if (mode == GS_MODE_PS && o->ps_server_hosts && world > 1) {
    if ((rc = gs_ps_serve_endpoints(o, &server_eps, &e)) < 0) goto fail;
    cfg.ps_server_eps = (const char *const *)server_eps;
  }
  sc.cfg = &cfg;

  char settings[4096];
  gs_run_settings(o, mode, world, settings, sizeof settings);
  const char *out_dir = env->run_dir ? env->run_dir : o->out;
  /* another launcher: rank 0 begins steps.csv before anyone trains (a rerun
   * never appends to an old one); the others keep their rows for the gather */
  if (!env->launched && rank == 0 && out_dir) {
    int fd = gs_csv_start(out_dir, &e);
    if (fd < 0) { rc = fd; goto fail; }
    sc.csv = fd;
  }
  /* the server this rank holds (a thread, or rank 0's dedicated process) logs */
  int shard = gs_apply_order_shard(o, rank, world, env->launched);
  if (out_dir && shard >= 0 && gs_apply_order_wanted(o, mode, world)) {
    if ((rc = gs_apply_order_start(o, &to, shard, threads, out_dir, &info, &alog, &cfg.applied,
                                   &e)) < 0)
      goto fail;
    logging = true;
  }
  if (o->verify && !(sc.hashes = calloc((size_t)o->train.steps + 1, sizeof *sc.hashes))) {
    rc = GS_FAIL(&e, GS_ENOMEM, "out of memory");
    goto fail;
  }
  /* One rank has nothing to synchronize: DataParallel on one device and
   * DDP at world 1 skip it, so every mode runs the local step there and
   * world 1 is the same baseline for all. */
  const gs_backend *be = gs_job_backend(world == 1 ? GS_MODE_SINGLE : mode, k);
  if ((rc = gs_job_meet(&job, be, &cfg, settings, &phase, &e)) < 0)
    goto fail;
  char run_id[GS_RUN_ID_CHARS + 1];
  gs_run_id_of_job(cfg.job, run_id);
  info.run_id = sc.run.run_id = getenv("GS_RUN_ID") ? getenv("GS_RUN_ID") : run_id;
  if (o->threads <= 0 && env->local_world <= 0) {
    threads = gs_job_threads(&job, o);
    k->set_threads(k, threads);
    alog.log.threads = threads;
  }

  phase = "backend";
  if ((rc = gs_job_open(&job, &cfg, &sync, &e)) < 0) goto fail;
  /* what the ring's buckets run (hier or ring), as its host keys decided */
  gs_comm *comm = mode == GS_MODE_ALLREDUCE && world > 1 ? gs_allreduce_comm(sync) : NULL;
  info.algo = comm ? gs_algo_name(gs_comm_algo(comm, SIZE_MAX)) : "";
  if (mode == GS_MODE_PS) info.algo = cfg.ps_host_ranks > 1 ? "local-reduce" : "flat";
  info.ps_host_ranks = mode == GS_MODE_PS ? cfg.ps_host_ranks : 0;

  if (out_dir && env->launched) {
    if ((sc.csv = gs_csv_open(out_dir, &e)) < 0) { rc = sc.csv; sc.csv = -1; goto fail; }
    sc.out_dir = out_dir;
  }
  if (o->verify && k->device != GS_DEV_CPU) sc.host_params = malloc(cfg.n * sizeof(float) + 1);
  sc.t0 = gs_now();
  if (env->hosts > 0 && job.local_rank == 0) {
    uint64_t bps = gs_host_rates_of(&o->link_host, env->host, o->link_bps);
    if ((rc = gs_hostlink_watch_start(bps, 0.005, &sc.link, &e)) < 0) goto fail;
    gs_hostlink_watch_read(sc.link, &sc.link0);
    if (rank == 0 && mode == GS_MODE_PS && (rc = watch_servers(&sc, &e)) < 0) goto fail;
  }
  sc.tty = isatty(1) && !getenv("GS_TEST");
  sc.steps = o->train.steps;
  if (rank == 0 && (rc = gs_heldout_start(&sc.heldout, o, sc.steps, cfg.n, &e)) < 0) goto fail;

  phase = "training";
  rc = gs_trainer_run(t, sync, on_step, &sc, &e);
  if (rc < 0 && sc.err.code) e = sc.err;
  gs_err ce = {0};
  int crc = sync->ops->close(sync, rc == GS_OK, &ce);
  sync = NULL;
  if (rc == GS_OK && crc < 0) {
    rc = crc;
    e = ce;
  }
  if (rc < 0) goto fail;

  if (rank == 0 && o->save_params) {
    phase = "saving parameters";
    if ((rc = gs_trainer_save(t, o->save_params, &e)) < 0) goto fail;
  }
  if (rank == 0 && o->eval) {
    phase = "evaluation";
    if ((rc = gs_trainer_evaluate(t, 10000, &info.accuracy, &info.eval_loss, &e)) < 0) goto fail;
  }
  if (rank == 0 && o->eval_data) {
    phase = "held-out evaluation";
    if ((rc = gs_heldout_finish(&sc.heldout, t, o->eval_data, &info, &e)) < 0) goto fail;
  }

  phase = "gathering measurements";
  gs_rank_result mine = {.rank = rank, .peak_rss = peak_rss(), .link_host = -1};
  if (sc.link && sc.link1.t > sc.link0.t) link_result(&mine, env->host, &sc.link0, &sc.link1);
  if (sc.nsrv > 0 && sc.srv1[0].t > sc.srv0[0].t &&
      (mine.server_links = calloc((size_t)sc.nsrv, sizeof *mine.server_links))) {
    mine.nserver_links = sc.nsrv;
    for (int i = 0; i < sc.nsrv; i++)
      link_result(&mine.server_links[i], env->hosts + i, &sc.srv0[i], &sc.srv1[i]);
  }
  snprintf(mine.host, sizeof mine.host, "%s", job.hostname);
  mine.rows = (gs_step_row *)gs_trainer_rows(t, &mine.nrows);
  mine.spans = (gs_span *)gs_trainer_spans(t, &mine.nspans);
  for (size_t i = 0; i < mine.nrows && i < sc.nhashes; i++) mine.rows[i].param_hash = sc.hashes[i];
  if (rank != 0) {
    if ((rc = gs_rdv_send_stats(job.rdv, rank, &mine, job.timeout_ms, &e)) < 0) goto fail;
    /* fault injection for the tests: a rank that stalls once it is done */
    const char *stop = getenv("GS_TEST_STOP_AFTER_GATHER");
    if (stop && atoi(stop) == rank) raise(SIGSTOP);
    goto done;
  }
  results = calloc((size_t)world, sizeof *results);
  if (!results) {
    free(mine.server_links);
    rc = GS_FAIL(&e, GS_ENOMEM, "out of memory");
    goto fail;
  }
  results[0] = mine;
  /* what this job makes: a row per step, and per step a few spans of the
   * training loop and a few per bucket (rank 0 may have more, its server's) */
  gs_gather_limits lim = {.rows = mine.nrows,
                          .spans = mine.nspans + (size_t)o->train.steps * (16 + 4 * (size_t)cfg.nbuckets) + 1024};
  if (world > 1 && (rc = gs_rdv_gather(job.rdv, world, &lim, job.timeout_ms, results, &e)) < 0)
    goto fail;
  phase = "summary";
  info.device = k->name;
  info.launcher = env->source;
  info.threads = threads;
  info.nparams = cfg.n;
  info.nbuckets = cfg.nbuckets;
  bucket_bytes = calloc((size_t)cfg.nbuckets + 1, sizeof *bucket_bytes);
  for (int b = 0; bucket_bytes && b < cfg.nbuckets; b++)
    bucket_bytes[b] = cfg.buckets[b].count * gs_dtype_size(cfg.wire);
  info.bucket_bytes = bucket_bytes;
  bool topk = cfg.compress.kind == GS_COMPRESS_TOPK;
  if (bucket_bytes && (cfg.compress.kind == GS_COMPRESS_POWERSGD || topk) && world > 1 &&
      gs_cm_compress_plan(&cfg.compress, o->train.precision, cfg.tensors, cfg.ntensors,
                          cfg.buckets, cfg.nbuckets, cfg.n, &compressed, &e) == GS_OK) {
    /* step s compresses from --powersgd-start on; the summary measures from --warmup */
    int64_t steps = o->train.steps, from = gs_first_measured(o->warmup, steps);
    int64_t on = !topk && cfg.compress.start > from ? cfg.compress.start : from;
    bool ps = mode == GS_MODE_PS;
    info.compressed_bytes = compressed.plan.bytes;
    /* the ring's all-gather, priced as the all-reduce of as many bytes */
    if (topk && !ps && (gather_bytes = calloc((size_t)cfg.nbuckets, sizeof *gather_bytes))) {
      gs_cm_topk_ring_bytes(&compressed.plan, world, gather_bytes);
      info.compressed_bytes = gather_bytes;
    }
    info.compressed_collectives = compressed.collectives;
    info.compressed_share = steps > from && on < steps ? (double)(steps - on) / (double)(steps - from)
                                                       : 0;
    info.compressed_push = ps;
    info.compressed_sums_back = ps && !topk;
  }
  gs_err_clear(&e);
  info.wire = cfg.wire;
  info.overlap = cfg.overlap;
  info.wall_end = gs_wall();
  if (info.hosts > 0 && o->latency_s > 0) info.delay = env->delay_line_s > 0 ? "delay line" : "netem";
  /* loopback over TCP: the transport our launcher measured for the model */
  if (info.hosts < 1 && env->launched && !strcmp(o->transport, "tcp"))
    gs_loopback_costmodel(&info.loop_alpha_s, &info.loop_Bps);
  if ((rc = summarize(o, env, &info, results, &e)) < 0) goto fail;
  goto done;

fail:
  if (gs_interrupted && rc != GS_OK) {
    rc = GS_EINTR;
    fprintf(stderr, "bench: rank %d: interrupted during %s; steps.csv keeps every completed "
            "step\n", rank, phase);
    gs_job_report_error(&job, phase, "interrupted");
    goto cleanup;
  }
  fprintf(stderr, "bench: rank %d: %s: %s", rank, phase, e.msg[0] ? e.msg : gs_strerror(rc));
  if (e.file && getenv("GS_DEBUG")) fprintf(stderr, " [%s:%d]", e.file, e.line);
  fputc('\n', stderr);
  gs_job_report_error(&job, phase, e.msg);
cleanup:
  if (sync) sync->ops->close(sync, false, NULL);
done:
  if (sc.csv >= 0) close(sc.csv);
  free(sc.host_params);
  free(sc.hashes);
  gs_heldout_free(&sc.heldout);
  free(bucket_bytes);
  free(gather_bytes);
  gs_cm_compressed_free(&compressed);
  gs_ps_serve_endpoints_free(o, server_eps);
  gs_hostlink_watch_stop(sc.link);
  for (int i = 0; i < sc.nsrv; i++) gs_hostlink_watch_stop(sc.srv[i]);
  free(sc.srv);
  free(sc.srv0);
  free(sc.srv1);
  if (results) {
    results[0].rows = NULL; /* rank 0's own rows and spans belong to the trainer */
    results[0].spans = NULL;
    for (int i = 0; i < world; i++) gs_rank_result_free(&results[i]);
    free(results);
  }
  gs_job_close(&job);
  if (logging) gs_apply_order_free(&alog);
  if (t) gs_trainer_destroy(t);
  if (k) k->destroy(k);
  if (rc == GS_OK) return 0;
  /* a wrong value that only the model or the data could judge (a model
   * that does not fit the data, say) is still a usage error */
  return rc == GS_EINTR ? gs_interrupt_status() : rc == GS_EINVAL && !strcmp(phase, "setup") ? 2 : 1;
}
