/* sweep.c: the launcher. Every combination of --model x --batch x
 * --bucket-mb x --mode x --world is one run (a sweep of several modes runs
 * world 1 once, as the local step they all run there): its ranks are
 * spawned on this machine (launch.c), on emulated hosts where the link
 * says so (cluster.c picks the default), rank 0 of the run writes
 * runs/<id>/run.json, and the whole sweep runs --repeat times, every
 * configuration once before any twice. After the last run (or an
 * interrupt, with what completed) the repetitions of each configuration
 * become one record (repeats.c), and the tables, the verdict (verdict.c)
 * and the reports are written once, atomically. With --peer, the peer
 * (peer.c) runs every world of each model, batch and bucket after ps and
 * ring did, in the last repetition. steps.csv fills as the runs go. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "bench/cli/cli.h"
#include "bench/coll/coll.h"
#include "bench/costmodel/costmodel.h"
#include "bench/files/files.h"
#include "bench/job/job.h"
#include "bench/report/report.h"
#include "bench/version.h"

/* Every model with the data, on the CPU at the first batch: a wrong
 * --model, --data or --load-params is found before any rank starts or any
 * directory is made. */
static int check_models(const gs_opts *o, gs_err *e) {
  gs_kernels *k = gs_kernels_cpu(1, e);
  if (!k) return e->code;
  int rc = GS_OK;
  for (int i = 0; i < o->nmodels && rc == GS_OK; i++) {
    gs_train_opts to = o->train;
    to.model = o->models[i];
    to.batch = o->batches[0];
    to.rank = 0;
    to.world = 1;
    to.precision = GS_F32;
    gs_trainer *t = NULL;
    rc = gs_trainer_create(&to, k, &t, e);
    if (t) gs_trainer_destroy(t);
  }
  k->destroy(k);
  return rc;
}

/* The batch per rank at world: with --strong the global batch of the
 * first world split evenly (0 when it does not split). */
static int batch_at(const gs_opts *o, int batch, int world) {
  if (!o->strong) return batch;
  long global = (long)batch * o->worlds[0];
  return global % world ? 0 : (int)(global / world);
}

/* --peer: the peer at every world of one model, batch and bucket, after
 * ps and ring ran them */
static int run_peers(gs_opts *o, int batch, json_t *peers) {
  for (int iw = 0; iw < o->nworlds; iw++) {
    if (gs_interrupted) return gs_interrupt_status();
    int world = o->worlds[iw];
    o->train.batch = batch_at(o, batch, world);
    if (!o->train.batch) continue;
    if (!o->quiet)
      fprintf(stderr, "bench: peer %s world %d, batch %d per rank\n", GS_PEER_LABEL, world,
              o->train.batch);
    gs_err e = {0};
    json_t *row = NULL;
    if (gs_peer_run(o, world, &row, &e) < 0) {
      fprintf(stderr, "bench: %s\n", e.msg);
      return gs_interrupted ? gs_interrupt_status() : 1;
    }
    json_array_append_new(peers, row);
  }
  return 0;
}

/* What one repetition of a sweep runs and gathers. */
typedef struct sweep {
  gs_summary *runs;         /* every run so far, every repetition */
  size_t nruns;
  json_t *peers;
  int done, total;          /* runs started, runs in the whole sweep */
  bool one_w1;              /* several modes: world 1 once, as the local step */
} sweep;

/* One run of a repetition: which model, batch and bucket size of o's lists
 * (their indices), in which mode at which world, with how many samples per
 * rank. */
typedef struct sweep_run {
  int im, ib, ik;
  gs_mode mode;
  int world, batch;
  int spare;                /* ps with --ps-spare-hosts: this run's K; else -1 */
} sweep_run;

/* The ranks name their run after its repetition (GS_REPEAT of GS_REPEATS). */
static void repeat_env(int rep, int reps) {
  char srep[16];
  snprintf(srep, sizeof srep, "%d", rep);
  setenv("GS_REPEAT", srep, 1);
  snprintf(srep, sizeof srep, "%d", reps);
  setenv("GS_REPEATS", srep, 1);
}

/* A --collective the mode of index id does not run (said once, at the first
 * world). */
static bool collective_skipped(const gs_opts *o, int id, int iw) {
  const char *why = o->collective ? gs_collective_skip(o, o->coll, o->modes[id]) : NULL;
  if (why && !o->quiet && iw == 0)
    fprintf(stderr, "bench: collective %s: not on --mode %s (%s)\n",
            gs_coll_name((gs_coll)o->coll), gs_mode_name(o->modes[id]), why);
  return why != NULL;
}

/* The mode, world and batch of x's run at mode id and world iw, or false
 * when the sweep does not run it: local mode beyond world 1, world 1 of
 * any mode but the first when one_w1 (it is the local step then), a
 * --strong global batch that does not split over the world. */
static bool plan_run(const gs_opts *o, bool one_w1, int id, int iw, sweep_run *x) {
  x->mode = o->modes[id];
  x->world = o->worlds[iw];
  if (x->mode == GS_MODE_SINGLE && x->world != 1) return false;
  if (one_w1 && x->world == 1) {
    if (id > 0) return false;
    x->mode = GS_MODE_SINGLE;
  }
  x->batch = batch_at(o, o->batches[x->ib], x->world);
  if (!x->batch) {
    fprintf(stderr, "bench: --strong: global batch %ld does not split over %d "
            "ranks; skipping world %d\n", (long)o->batches[x->ib] * o->worlds[0], x->world,
            x->world);
    return false;
  }
  return true;
}

/* The line that says which run starts (run done of total). */
static void announce(const gs_opts *o, const sweep_run *x, int done, int total, int rep,
                     int reps) {
  if (!o->quiet && o->collective)
    fprintf(stderr, "bench: collective %s, %s, world %d%s\n",
            gs_coll_name((gs_coll)o->coll), gs_mode_name(x->mode), x->world,
            x->mode != GS_MODE_ALLREDUCE ? ""
            : o->resend ? " (resend log on)" : " (no resend log: --resend adds it)");
  if (o->quiet || o->collective) return;
  char spare[48] = "";
  if (x->spare >= 0) snprintf(spare, sizeof spare, " (summation servers, %d spare hosts)",
                              x->spare);
  fprintf(stderr, "bench: run %d of %d: %s%s world %d, batch %d per rank, buckets %g "
          "MiB, repetition %d of %d\n", done, total, gs_mode_name(x->mode), spare, x->world,
          x->batch, o->bucket_mbs[x->ik], rep, reps);
}

/* The local mode of a sweep of that mode alone: its one rank in this
 * process; an exit code (an interrupt's is passed on to gs_interrupted). */
static int run_here(const gs_opts *o, const sweep_run *x) {
  gs_rank_env env = {.present = true, .launched = true, .source = "gradsync",
                     .rank = 0, .world = 1, .local_rank = 0, .local_world = 1,
                     .port_fd = -1, .run_dir = o->out};
  snprintf(env.master_addr, sizeof env.master_addr, "127.0.0.1");
  /* the rank runs this one configuration, as a launched one is told to */
  gs_opts one = *o;
  one.modes[0] = x->mode;
  one.nmodes = 1;
  one.worlds[0] = 1;
  one.nworlds = 1;
  one.models[0] = o->models[x->im];
  one.nmodels = 1;
  one.batches[0] = x->batch;
  one.nbatches = 1;
  one.bucket_mbs[0] = o->bucket_mbs[x->ik];
  one.nbucket_mbs = 1;
  int rc = gs_rank_main(&one, x->mode, &env);
  if (rc > 128 && rc < 160) gs_interrupted = rc - 128;
  return rc;
}

/* The run's ranks spawned by our launcher (on emulated hosts where the run
 * has them), told the run's configuration on their command line; 0 when
 * every rank succeeded, else why says what failed. */
static int run_launched(const gs_opts *o, int argc, char **argv, const sweep_run *x, char *why,
                        size_t cap) {
  char sworld[16], sbatch[16], sbucket[32], sroot[16], sspare[16];
  snprintf(sroot, sizeof sroot, "%d", o->root);
  snprintf(sworld, sizeof sworld, "%d", x->world);
  snprintf(sbatch, sizeof sbatch, "%d", x->batch);
  snprintf(sbucket, sizeof sbucket, "%.17g", o->bucket_mbs[x->ik]);
  gs_launch l = {.argc = argc, .argv = argv, .run_dir = o->out, .world = x->world,
                 .timeout_s = o->timeout_s,
                 .hosts = gs_cluster_hosts(o, x->mode, x->world),
                 .link_bps = o->link_bps, .link_host = &o->link_host,
                 .latency_s = o->latency_s, .host_cpus = o->host_cpus,
                 /* world 1 runs the local step: no server */
                 .ps_servers_own = x->mode != GS_MODE_PS || x->world < 2 ? 0
                                   : x->spare >= 0 ? x->spare
                                   : o->ps_server_hosts ? o->ps_servers : 0};
  const char *extra[] = {"--mode", gs_mode_name(x->mode), "--world", sworld,
                         "--model", o->models[x->im], "--batch", sbatch,
                         "--bucket-mb", sbucket};
  memcpy(l.extra, extra, sizeof extra);
  l.nextra = (int)(sizeof extra / sizeof extra[0]);
  if (x->spare >= 0) { /* this run's spare hosts, of the sweep's list */
    snprintf(sspare, sizeof sspare, "%d", x->spare);
    l.extra[l.nextra++] = "--ps-spare-hosts";
    l.extra[l.nextra++] = sspare;
  }
  if (l.hosts > 0) { /* the rate the default chose, which argv may not say */
    l.extra[l.nextra++] = "--link";
    l.extra[l.nextra++] = o->link_arg;
  }
  if (o->collective) { /* this collective alone; -o, -r where it takes them */
    const gs_coll c = (gs_coll)o->coll;
    l.extra[l.nextra++] = "--collective";
    l.extra[l.nextra++] = gs_coll_name(c);
    l.extra[l.nextra++] = "-o";
    l.extra[l.nextra++] = gs_coll_has_op(c) ? o->redop_arg : "sum";
    l.extra[l.nextra++] = "-r";
    l.extra[l.nextra++] = gs_coll_has_root(c) ? sroot : "0";
  }
  return gs_launch_run(&l, why, cap);
}

/* A run that failed (rc, why): said, with the way round emulated hosts
 * that were only the default; the sweep's exit status. */
static int run_failed(const gs_opts *o, const sweep_run *x, bool one_w1, int rc,
                      const char *why) {
  if (x->mode != GS_MODE_SINGLE || one_w1)
    fprintf(stderr, "bench: %s world %d failed: %s\n", gs_mode_name(x->mode), x->world, why);
  if (o->link_choice == GS_LINK_AUTO_HOSTS && !gs_interrupted &&
      gs_cluster_hosts(o, x->mode, x->world))
    fprintf(stderr, "bench: the emulated hosts were the default here; --link none "
            "runs the ranks over this machine's loopback instead\n");
  return gs_interrupted ? gs_interrupt_status() : rc == 2 ? 2 : 1;
}

/* The summary rank 0 of the run wrote, read back into sw and its line
 * printed; 0, or the exit status. */
static int read_run(const gs_opts *o, const sweep_run *x, int done, sweep *sw) {
  gs_err e = {0};
  gs_summary *more = realloc(sw->runs, (sw->nruns + 1) * sizeof *sw->runs);
  gs_run_info info = gs_run_info_of(o, x->mode, x->world);
  if (more) sw->runs = more;
  if (!more || gs_results_read_run(o->out, &info, &more[sw->nruns], &e) < 0) {
    fprintf(stderr, "bench: %s\n", more ? e.msg : "out of memory");
    return 1;
  }
  if (!o->quiet) gs_summary_print_line(stdout, &sw->runs[sw->nruns], done, sw->total);
  sw->nruns++;
  return 0;
}

/* One run: announced, run (here or by our launcher) and, for training,
 * its summary read back; 0, or the exit status. */
static int run_one(gs_opts *o, int argc, char **argv, int rep, int reps, const sweep_run *x,
                   sweep *sw) {
  o->ps_spare = x->spare;
  o->train.model = o->models[x->im];
  o->train.batch = x->batch;
  o->train.bucket_mb = o->bucket_mbs[x->ik];
  int done = ++sw->done;
  announce(o, x, done, sw->total, rep, reps);
  char why[2048] = "";
  int rc = x->mode == GS_MODE_SINGLE && !sw->one_w1 ? run_here(o, x)
                                                    : run_launched(o, argc, argv, x, why,
                                                                   sizeof why);
  if (rc) return run_failed(o, x, sw->one_w1, rc, why);
  if (o->collective) return 0;
  return read_run(o, x, done, sw);
}

/* Every configuration once, in order (repetition rep of reps); the exit
 * status so far (0: go on). */
static int sweep_once(gs_opts *o, int argc, char **argv, int rep, int reps, sweep *sw) {
  int status = 0;
  o->repeat = rep;
  repeat_env(rep, reps);
  for (int im = 0; im < o->nmodels && !status; im++)
    for (int ib = 0; ib < o->nbatches && !status; ib++)
      for (int ik = 0; ik < o->nbucket_mbs && !status; ik++) {
        /* a --collective list: each collective in turn, every mode and world */
        for (int ic = 0; ic < (o->collective ? o->ncolls : 1) && !status; ic++)
        for (int id = 0; id < o->nmodes && !status; id++)
          for (int iw = 0; iw < o->nworlds && !status; iw++) {
            if (o->collective) o->coll = o->colls[ic];
            if (collective_skipped(o, id, iw)) continue;
            if (gs_interrupted) { status = gs_interrupt_status(); break; }
            /* ps with --ps-spare-hosts: each K of the list in turn */
            bool spares = o->modes[id] == GS_MODE_PS && o->nps_spares > 0 &&
                          o->worlds[iw] > 1;
            for (int is = 0; is < (spares ? o->nps_spares : 1) && !status; is++) {
              sweep_run x = {.im = im, .ib = ib, .ik = ik, .spare = spares ? o->ps_spares[is]
                                                                           : -1};
              if (plan_run(o, sw->one_w1, id, iw, &x) && (x.mode == GS_MODE_PS || is == 0))
                status = run_one(o, argc, argv, rep, reps, &x, sw);
            }
          }
        if (o->peer && !status && rep == reps) {
          o->train.model = o->models[im];
          o->train.bucket_mb = o->bucket_mbs[ik];
          status = run_peers(o, o->batches[ib], sw->peers);
        }
      }
  return status;
}

/* A sweep on this machine's loopback over TCP: its transport measured once,
 * before any run, for the cost model's prediction of each run (the ranks
 * find it with gs_loopback_costmodel; emulated hosts are predicted from their
 * links instead). A failed measurement costs the prediction, not the run. */
static void loopback_model(const gs_opts *o) {
  bool several = false;
  for (int i = 0; i < o->nworlds; i++) several |= o->worlds[i] > 1;
  gs_loopback_costmodel_set(0, 0);
  if (o->hosts > 0 || o->link_bps || strcmp(o->transport, "tcp") || !several) return;
  double alpha = 0, Bps = 0;
  gs_err e = {0};
  if (gs_calibrate_transport(&alpha, &Bps, &e) < 0) {
    if (!o->quiet) printf("cost model: no prediction on loopback (%s)\n", e.msg);
    return;
  }
  gs_loopback_costmodel_set(alpha, Bps);
  if (!o->quiet)
    printf("cost model on loopback: ZeroMQ over tcp loopback measured now, %.1f us per message "
           "and %.3g GB/s\n", alpha * 1e6, Bps / 1e9);
  fflush(stdout);
}

/* What fails the whole sweep before anything starts: one --world for
 * --save-params, the models with their data, the peer; 0, or the exit
 * status (2: a usage error). */
static int check_sweep(const gs_opts *o) {
  gs_err e = {0};
  if (o->save_params && o->nworlds > 1) {
    fprintf(stderr, "bench: --save-params saves one run's parameters, but --world is %d worlds "
            "by default; give one --world\n", o->nworlds);
    return 2;
  }
  if ((!o->collective && check_models(o, &e) < 0) || gs_peer_check(o, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    return 2;
  }
  return 0;
}

/* The sweep's directory: --out, which must not hold a run yet, or
 * results/<date>-<time>-<the run id's first 6 digits> (made in outbuf, of
 * cap bytes); made, with a training sweep's steps.csv. 0, or the exit
 * status. */
static int start_results(gs_opts *o, const char *run_id, char *outbuf, size_t cap) {
  gs_err e = {0};
  if (!o->out) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t n = strftime(outbuf, cap, "results/%Y%m%d-%H%M%S-", &tm);
    snprintf(outbuf + n, cap - n, "%.6s", run_id);
    o->out = outbuf;
  } else if (gs_holds_run(o->out)) {
    fprintf(stderr, "bench: --out %s already holds a run (its steps.csv or report.json); give "
            "a new directory, or move the old run away\n", o->out);
    return 2;
  }
  if (gs_mkdirs(o->out, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    return 1;
  }
  if (!o->collective) {
    int fd = gs_csv_start(o->out, &e);
    if (fd < 0) {
      fprintf(stderr, "bench: %s\n", e.msg);
      return 1;
    }
    close(fd);
  }
  return 0;
}

/* The sweep's first lines: the version, the CPU code path (isa), the
 * cores, where the results go, and for training the sweep's header. */
static void print_banner(const gs_opts *o, const char *isa) {
  if (o->quiet) return;
  printf("gradsync %s (git %s): CPU code path %s (GS_ISA=scalar|avx2|avx512 forces one), %ld "
         "cores; results in %s\n", GS_VERSION, GS_GIT_REVISION, isa,
         sysconf(_SC_NPROCESSORS_ONLN), o->out);
  if (!o->collective) gs_sweep_header(stdout, o);
  fflush(stdout);
}

/* The runs of the whole sweep, every repetition (reps) counted. */
static int count_runs(const gs_opts *o, bool one_w1, int reps) {
  int total = 0;
  for (int id = 0; id < o->nmodes; id++)
    for (int iw = 0; iw < o->nworlds; iw++) {
      bool spares = o->modes[id] == GS_MODE_PS && o->nps_spares > 0 && o->worlds[iw] > 1;
      total += (!(one_w1 && o->worlds[iw] == 1 && id > 0) &&
                !(o->modes[id] == GS_MODE_SINGLE && o->worlds[iw] != 1)) *
               (spares ? o->nps_spares : 1);
    }
  return total * reps * o->nmodels * o->nbatches * o->nbucket_mbs;
}

/* The training sweep's end, on its records (the repetitions merged):
 * scaling and targets, every record's table, the verdict, the bucket
 * sizes' verdict, the compression forecast beside what was measured, the
 * comparison, and report.json with the files beside it; the exit status
 * (status: the sweep's so far, which marks the report incomplete). */
static int report_sweep(const gs_opts *o, gs_summary *runs, size_t nruns, json_t *peers,
                        const gs_compress_forecast *forecast, int status) {
  gs_err e = {0};
  gs_summary_scaling(runs, nruns, o->strong);
  gs_stale_targets(runs, nruns, o->target_loss);
  for (size_t i = 0; i < nruns; i++) gs_summary_print(stdout, &runs[i]);
  char notice[256], link[GS_LINK_SENTENCE_MAX];
  gs_oversubscribed(runs, nruns, notice, sizeof notice);
  gs_verdict v;
  gs_verdict_of(runs, nruns, sysconf(_SC_NPROCESSORS_ONLN), gs_link_sentence(o, link,
                sizeof link), &v);
  gs_verdict_print(stdout, v.text);
  char bv[4096];
  gs_bucket_verdict(runs, nruns, bv, sizeof bv);
  if (bv[0]) printf("\n== bucket size ==\n  %s\n", bv);
  gs_compress_forecast_beside(stdout, forecast, runs, nruns);
  gs_summary_print_comparison(stdout, runs, nruns, peers, notice);
  fflush(stdout);
  if (gs_report_write(o->out, o, runs, nruns, peers, status != 0, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    if (!status) status = 1;
  } else {
    printf("\nresults: %s/report.html, report.json, steps.csv, trace.json, *.svg\n", o->out);
  }
  return status;
}

/* The collective sweep's end: its report (busbw.svg, the JSON of every
 * collective, report.html); 0, or the exit status. */
static int report_collective(const gs_opts *o, const char *run_id) {
  gs_err e = {0};
  if (gs_report_collective(o->out, o, run_id, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    return 1;
  }
  if (!o->quiet)
    printf("\nresults: %s/report.html, busbw.svg, collective-<mode>-w<N>.json (all_reduce), "
           "<collective>-<mode>-w<N>.json\n", o->out);
  return 0;
}

int gs_sweep_main(gs_opts *o, int argc, char **argv) {
  int status = check_sweep(o);
  if (status) return status;
  char outbuf[512]; /* o->out while the sweep runs */
  char run_id[GS_RUN_ID_CHARS + 1];
  gs_run_id_new(run_id);
  setenv("GS_RUN_ID", run_id, 1); /* every rank's rows carry it */
  if ((status = start_results(o, run_id, outbuf, sizeof outbuf))) return status;
  gs_bench_signals();
  const char *isa = "unknown";
  gs_isa_select(&isa, NULL);
  if (!o->collective) gs_cluster_auto(o);
  print_banner(o, isa);
  if (!o->collective) loopback_model(o);
  gs_compress_forecast *forecast = o->collective || o->quiet ? NULL
                                   : gs_compress_forecast_print(stdout, o);

  sweep sw = {.peers = json_array(), .one_w1 = !o->collective && o->nmodes > 1};
  int reps = o->collective ? 1 : o->repeats;
  sw.total = count_runs(o, sw.one_w1, reps);
  for (int rep = 1; rep <= reps && !status; rep++)
    status = sweep_once(o, argc, argv, rep, reps, &sw);
  gs_summary *runs = sw.runs;
  size_t nruns = sw.nruns;
  json_t *peers = sw.peers;

  if (!o->collective && nruns > 0) {
    gs_err e = {0};
    gs_summary *recs = NULL;
    size_t nrecs = 0;
    if (gs_summary_repeats(runs, nruns, &recs, &nrecs, &e) < 0) {
      fprintf(stderr, "bench: %s\n", e.msg);
      free(runs);
      json_decref(peers);
      gs_compress_forecast_free(forecast);
      return 1;
    }
    free(runs);
    runs = recs;
    nruns = nrecs;
    status = report_sweep(o, runs, nruns, peers, forecast, status);
  }
  if (o->collective && !status) status = report_collective(o, run_id);
  if (status && !o->collective)
    fprintf(stderr, "bench: what was measured is in %s/steps.csv\n", o->out);
  gs_summaries_free(runs, nruns);
  gs_compress_forecast_free(forecast);
  json_decref(peers);
  return status;
}
