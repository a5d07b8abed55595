/* rank.c: the life of one rank.
 *
 *   kernels (cpu / cuda) -> trainer (model, data, buckets) -> backend
 *   prepare -> rendezvous (rank 0 hosts it; everyone learns the endpoints,
 *   the bootstrap blob and the job token, or a clear mismatch error) ->
 *   backend open -> train, appending one steps.csv row per step as it goes
 *   -> close -> rank 0 gathers every rank's rows and spans and writes the
 *   run's results (run.json, trace) atomically.
 *
 * Any failure prints one line naming this rank, the phase and the cause,
 * tells rank 0 when it can, and exits non-zero; an interrupt (SIGINT /
 * SIGTERM) stops at the next wait and exits 130. steps.csv is flushed per
 * row, so a killed run keeps every completed step. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/internal.h"
#include "bench/results.h"

static void on_signal(int sig) {
  (void)sig;
  gs_interrupted = 1;
}

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
  int csv;                 /* steps.csv, O_APPEND, or -1 */
  gs_kernels *k;
  gs_sync_config *cfg;
  float *host_params;      /* staging for --verify on devices */
  double t0, last_print;
  bool tty;
  int64_t steps;
} step_ctx;

/* FNV-1a over the parameter bytes: the same bits give the same hash on
 * every rank, which is what --verify checks. */
static uint64_t hash_bytes(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
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
    ph = hash_bytes(p, c->cfg->n * sizeof(float));
  }
  if (c->csv >= 0) {
    char line[1024];
    int n = gs_csv_row(line, sizeof line, c->o, c->mode, c->world, row, ph);
    if (n > 0 && write(c->csv, line, (size_t)n) != n) {
      fprintf(stderr, "bench: rank %d: writing steps.csv: %s (continuing)\n", c->rank,
              strerror(errno));
      close(c->csv);
      c->csv = -1;
    }
  }
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

int bench_kernels(const gs_opts *o, int local_rank, int threads, gs_kernels **k,
                           gs_err *e) {
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

int bench_default_threads(int local_world) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  int per = (int)(cores / (local_world > 0 ? local_world : 1));
  return per < 1 ? 1 : per;
}

const gs_backend *bench_pick_backend(gs_mode m, gs_kernels *k, gs_err *e) {
  if (m == GS_MODE_LOCAL) return gs_bench_backend("local", e);
  if (m == GS_MODE_PS) return gs_bench_backend("ps", e);
  if (k->device == GS_DEV_CUDA) return gs_bench_backend("nccl", e);
  return gs_bench_backend("ring", e);
}

/* the rendezvous address rank 0 binds */
void bench_rdv_bind_addr(const gs_rank_env *env, char *buf, size_t cap) {
  if (env->port_fd >= 0)
    snprintf(buf, cap, "tcp://127.0.0.1:*");
  else if (!strcmp(env->master_addr, "127.0.0.1") || !strcmp(env->master_addr, "localhost"))
    snprintf(buf, cap, "tcp://127.0.0.1:%d", env->master_port);
  else
    snprintf(buf, cap, "tcp://*:%d", env->master_port);
}

static uint64_t peak_rss(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)ru.ru_maxrss * 1024u;
}

int gs_rank_main(const gs_opts *o, gs_mode mode, const gs_rank_env *env) {
  gs_err e = {0};
  int rank = env->rank, world = env->world, rc = GS_OK;
  const char *phase = "setup";
  gs_kernels *k = NULL;
  gs_trainer *t = NULL;
  gs_rdv *rdv = NULL;
  gs_rdv_job job = {0};
  const gs_backend *be = NULL;
  void *bstate = NULL;
  gs_sync *sync = NULL;
  gs_rank_result *results = NULL;
  step_ctx sc = {.o = o, .mode = mode, .rank = rank, .world = world, .csv = -1};
  gs_sync_config cfg;
  memset(&cfg, 0, sizeof cfg);
  char host[GS_HOST_MAX] = "localhost";
  gethostname(host, sizeof host - 1);
  double t_begin = gs_wall();

  gs_bench_signals();
  if (o->world_given && o->nworlds == 1 && o->worlds[0] != world) {
    rc = GS_FAIL(&e, GS_EINVAL, "--world %d disagrees with %s's world size %d; drop --world "
                 "or make them agree", o->worlds[0], env->source, world);
    goto fail;
  }
  if ((o->world_given && o->nworlds > 1) || o->nmodes > 1 || o->nmodels > 1 ||
      o->nbatches > 1 || o->nbucket_mbs > 1) {
    rc = GS_FAIL(&e, GS_EINVAL, "a rank started by %s runs one configuration: give single "
                 "values to --mode, --world, --model, --batch and --bucket-mb", env->source);
    goto fail;
  }

  /* Rank 0 listens first: our launcher waits for the port before it
   * starts anyone else. */
  char rdv_ep[GS_ENDPOINT_MAX] = "", master[GS_HOST_MAX + 32];
  if (rank == 0 && world > 1) {
    phase = "rendezvous";
    char bind[GS_ENDPOINT_MAX];
    bench_rdv_bind_addr(env, bind, sizeof bind);
    if ((rc = gs_rdv_listen(bind, rdv_ep, sizeof rdv_ep, &rdv, &e)) < 0) goto fail;
    if (env->port_fd >= 0) {
      const char *colon = strrchr(rdv_ep, ':');
      char line[32];
      int n = snprintf(line, sizeof line, "%s\n", colon ? colon + 1 : "0");
      if (write(env->port_fd, line, (size_t)n) != n) {
        rc = GS_FAIL(&e, GS_EIO, "cannot tell the launcher the rendezvous port: %s",
                     strerror(errno));
        goto fail;
      }
      close(env->port_fd);
    }
  }

  phase = "setup";
  int local_world = env->local_world > 0 ? env->local_world : 1;
  int threads = o->threads > 0 ? o->threads : bench_default_threads(local_world);
  int local_rank = env->local_rank >= 0 ? env->local_rank : rank;
  if ((rc = bench_kernels(o, local_rank, threads, &k, &e)) < 0) goto fail;
  sc.k = k;

  gs_train_opts to = o->train;
  to.rank = rank;
  to.world = world;
  if ((rc = gs_trainer_create(&to, k, &t, &e)) < 0) goto fail;

  gs_trainer_sync_config(t, &cfg);
  cfg.rank = rank;
  cfg.world = world;
  cfg.timeout_ms = (int)(o->timeout_s * 1000.0);
  cfg.host = o->host ? o->host : (env->port_fd >= 0 || !strcmp(env->master_addr, "127.0.0.1")
                                      ? "127.0.0.1" : "0.0.0.0");
  cfg.overlap = o->overlap < 0 ? mode == GS_MODE_RING : o->overlap == 1;
  cfg.dedicated = o->dedicated;
  cfg.device = local_rank;
  cfg.local_rank = local_rank;
  cfg.local_world = local_world;
  sc.cfg = &cfg;

  phase = "backend";
  if (!(be = bench_pick_backend(mode, k, &e))) { rc = e.code; goto fail; }
  char endpoint[GS_ENDPOINT_MAX] = "";
  /* rank 0 makes the job token before anything of its backend starts (a
   * dedicated ps server is forked in prepare and must know it) */
  if (rank == 0) cfg.job = gs_rdv_new_token();
  if ((rc = be->prepare(&cfg, &bstate, endpoint, &e)) < 0) goto fail;

  char settings[4096];
  gs_opts_settings(o, mode, world, settings, sizeof settings);
  gs_rdv_me me = {.rank = rank, .world = world, .local_rank = local_rank, .host = host,
                  .endpoint = endpoint, .settings = settings};
  const char *out_dir = env->run_dir ? env->run_dir : o->out;

  phase = "rendezvous";
  if (world == 1) {
    job.world = 1;
    job.endpoints = calloc(1, sizeof *job.endpoints);
    job.hosts = calloc(1, sizeof *job.hosts);
    if (!job.endpoints || !job.hosts) { rc = GS_FAIL(&e, GS_ENOMEM, "out of memory"); goto fail; }
    snprintf(job.endpoints[0], GS_ENDPOINT_MAX, "%s", endpoint);
    job.job = cfg.job;
    if (be->bootstrap && (rc = be->bootstrap(bstate, &cfg, job.blob, &job.bloblen, &e)) < 0)
      goto fail;
    job.local_world = 1;
  } else if (rank == 0) {
    uint8_t blob[GS_BOOTSTRAP_MAX];
    size_t bloblen = 0;
    if (be->bootstrap && (rc = be->bootstrap(bstate, &cfg, blob, &bloblen, &e)) < 0) goto fail;
    if (!env->launched && out_dir) gs_csv_header_once(out_dir);
    if ((rc = gs_rdv_host(rdv, &me, cfg.job, blob, bloblen, cfg.timeout_ms, &job, &e)) < 0) goto fail;
  } else {
    snprintf(master, sizeof master, "tcp://%s:%d", env->master_addr, env->master_port);
    if ((rc = gs_rdv_join(master, &me, cfg.timeout_ms, &rdv, &job, &e)) < 0) goto fail;
  }
  const char **eps = calloc((size_t)world, sizeof *eps);
  if (!eps) { rc = GS_FAIL(&e, GS_ENOMEM, "out of memory"); goto fail; }
  for (int i = 0; i < world; i++) eps[i] = job.endpoints[i];
  cfg.endpoints = eps;
  cfg.bootstrap = job.blob;
  cfg.bootstrap_len = job.bloblen;
  cfg.job = job.job;
  if (env->local_world <= 0) cfg.local_world = job.local_world;
  if (o->threads <= 0 && env->local_world <= 0) k->set_threads(k, bench_default_threads(cfg.local_world));

  phase = "backend";
  rc = be->open(bstate, &cfg, &sync, &e);
  bstate = NULL; /* open owns it now, success or not */
  if (rc < 0) goto fail;

  if (out_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/steps.csv", out_dir);
    sc.csv = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  }
  if (o->verify && k->device != GS_DEV_CPU) sc.host_params = malloc(cfg.n * sizeof(float) + 1);
  sc.t0 = gs_now();
  sc.tty = isatty(1) && !getenv("GS_TEST");
  sc.steps = o->train.steps;

  phase = "training";
  rc = gs_trainer_run(t, sync, on_step, &sc, &e);
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
  double acc = -1, eval_loss = -1;
  if (rank == 0 && o->eval) {
    phase = "evaluation";
    if ((rc = gs_trainer_evaluate(t, 10000, &acc, &eval_loss, &e)) < 0) goto fail;
  }

  /* gather: everyone's rows and spans to rank 0 */
  phase = "gathering measurements";
  gs_rank_result mine = {.rank = rank, .peak_rss = peak_rss()};
  snprintf(mine.host, sizeof mine.host, "%s", host);
  size_t nrows, nspans;
  mine.rows = (gs_step_row *)gs_trainer_rows(t, &nrows);
  mine.spans = (gs_span *)gs_trainer_spans(t, &nspans);
  mine.nrows = nrows;
  mine.nspans = nspans;
  if (rank != 0) {
    if ((rc = gs_rdv_send_stats(rdv, rank, &mine, cfg.timeout_ms, &e)) < 0) goto fail;
  } else {
    results = calloc((size_t)world, sizeof *results);
    if (!results) { rc = GS_FAIL(&e, GS_ENOMEM, "out of memory"); goto fail; }
    results[0] = mine;
    if (world > 1 && (rc = gs_rdv_gather(rdv, world, cfg.timeout_ms, results, &e)) < 0) goto fail;
    gs_run_info info = {.opts = o, .mode = mode, .world = world, .kernels = k->name,
                        .nparams = cfg.n, .nbuckets = cfg.nbuckets, .wire = cfg.wire,
                        .overlap = cfg.overlap, .dedicated = cfg.dedicated && mode == GS_MODE_PS,
                        .wall_start = t_begin, .wall_end = gs_wall(), .accuracy = acc,
                        .eval_loss = eval_loss, .source = env->source, .threads = threads};
    if (out_dir && (rc = gs_results_write_run(out_dir, &info, results, &e)) < 0) goto fail;
    if (!env->launched) gs_results_print_run(stdout, &info, results);
    results[0].rows = NULL; /* owned by the trainer */
    results[0].spans = NULL;
  }
  goto done;

fail:
  if (gs_interrupted && rc != GS_OK) {
    rc = GS_EINTR;
    fprintf(stderr, "bench: rank %d: interrupted during %s; steps.csv keeps every completed "
            "step\n", rank, phase);
    if (rdv && rank != 0) gs_rdv_report_error(rdv, rank, phase, "interrupted");
    goto cleanup;
  }
  fprintf(stderr, "bench: rank %d: %s: %s", rank, phase, e.msg[0] ? e.msg : gs_strerror(rc));
  if (e.file && getenv("GS_DEBUG")) fprintf(stderr, " [%s:%d]", e.file, e.line);
  fputc('\n', stderr);
  if (rdv && rank != 0) gs_rdv_report_error(rdv, rank, phase, e.msg);
cleanup:
  if (sync) sync->ops->close(sync, false, NULL);
  if (bstate && be && be->discard) be->discard(bstate);
done:
  if (sc.csv >= 0) close(sc.csv);
  free(sc.host_params);
  free((void *)cfg.endpoints);
  if (results) {
    for (int i = 1; i < world; i++) gs_rank_result_free(&results[i]);
    free(results);
  }
  gs_rdv_job_free(&job);
  if (rdv) gs_rdv_close(rdv);
  if (t) gs_trainer_destroy(t);
  if (k) k->destroy(k);
  if (rc == GS_OK) return 0;
  /* a wrong value that only the model or the data could judge (a model
   * that does not fit the data, say) is still a usage error */
  return rc == GS_EINTR ? 130 : rc == GS_EINVAL && !strcmp(phase, "setup") ? 2 : 1;
}
