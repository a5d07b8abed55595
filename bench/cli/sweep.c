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

/* Every configuration once, in order (repetition rep of reps); the exit
 * status so far (0: go on). */
static int sweep_once(gs_opts *o, int argc, char **argv, int rep, int reps, sweep *sw) {
  gs_err e = {0};
  int status = 0;
  bool one_w1 = sw->one_w1;
  o->repeat = rep;
  char srep[16];
  snprintf(srep, sizeof srep, "%d", rep);
  setenv("GS_REPEAT", srep, 1); /* the ranks name their run after them */
  snprintf(srep, sizeof srep, "%d", reps);
  setenv("GS_REPEATS", srep, 1);
  for (int im = 0; im < o->nmodels && !status; im++)
    for (int ib = 0; ib < o->nbatches && !status; ib++)
      for (int ik = 0; ik < o->nbucket_mbs && !status; ik++) {
        /* a --collective list: each collective in turn, every mode and world */
        for (int ic = 0; ic < (o->collective ? o->ncolls : 1) && !status; ic++)
        for (int id = 0; id < o->nmodes && !status; id++)
          for (int iw = 0; iw < o->nworlds && !status; iw++) {
            if (o->collective) o->coll = o->colls[ic];
            if (o->collective && gs_collective_skip(o, o->coll, o->modes[id])) {
              if (!o->quiet && iw == 0)
                fprintf(stderr, "bench: collective %s: not on --mode %s (%s)\n",
                        gs_coll_name((gs_coll)o->coll), gs_mode_name(o->modes[id]),
                        gs_collective_skip(o, o->coll, o->modes[id]));
              continue;
            }
            if (gs_interrupted) { status = gs_interrupt_status(); break; }
            gs_mode mode = o->modes[id];
            int world = o->worlds[iw];
            if (mode == GS_MODE_SINGLE && world != 1) continue;
            if (one_w1 && world == 1) {
              if (id > 0) continue;
              mode = GS_MODE_SINGLE;
            }
            int batch = batch_at(o, o->batches[ib], world);
            if (!batch) {
              fprintf(stderr, "bench: --strong: global batch %ld does not split over %d "
                      "ranks; skipping world %d\n", (long)o->batches[ib] * o->worlds[0], world,
                      world);
              continue;
            }
            o->train.model = o->models[im];
            o->train.batch = batch;
            o->train.bucket_mb = o->bucket_mbs[ik];
            char sworld[16], sbatch[16], sbucket[32], sroot[16];
            snprintf(sroot, sizeof sroot, "%d", o->root);
            snprintf(sworld, sizeof sworld, "%d", world);
            snprintf(sbatch, sizeof sbatch, "%d", batch);
            snprintf(sbucket, sizeof sbucket, "%.17g", o->bucket_mbs[ik]);
            int done = ++sw->done, total = sw->total;
            if (!o->quiet && o->collective)
              fprintf(stderr, "bench: collective %s, %s, world %d%s\n",
                      gs_coll_name((gs_coll)o->coll), gs_mode_name(mode), world,
                      mode != GS_MODE_ALLREDUCE ? ""
                      : o->resend ? " (resend log on)" : " (no resend log: --resend adds it)");
            else if (!o->quiet)
              fprintf(stderr, "bench: run %d of %d: %s world %d, batch %d per rank, buckets %g "
                      "MiB, repetition %d of %d\n", done, total, gs_mode_name(mode), world, batch,
                      o->bucket_mbs[ik], rep, reps);
            int rc;
            char why[2048] = "";
            if (mode == GS_MODE_SINGLE && !one_w1) {
              gs_rank_env env = {.present = true, .launched = true, .source = "gradsync",
                                 .rank = 0, .world = 1, .local_rank = 0, .local_world = 1,
                                 .port_fd = -1, .run_dir = o->out};
              snprintf(env.master_addr, sizeof env.master_addr, "127.0.0.1");
              /* the rank runs this one configuration, as a launched one is told to */
              gs_opts one = *o;
              one.modes[0] = mode;
              one.nmodes = 1;
              one.worlds[0] = 1;
              one.nworlds = 1;
              one.models[0] = o->models[im];
              one.nmodels = 1;
              one.batches[0] = batch;
              one.nbatches = 1;
              one.bucket_mbs[0] = o->bucket_mbs[ik];
              one.nbucket_mbs = 1;
              rc = gs_rank_main(&one, mode, &env);
              if (rc > 128 && rc < 160) gs_interrupted = rc - 128;
            } else {
              gs_launch l = {.argc = argc, .argv = argv, .run_dir = o->out, .world = world,
                             .timeout_s = o->timeout_s,
                             .hosts = gs_cluster_hosts(o, mode, world),
                             .link_bps = o->link_bps, .link_host = &o->link_host,
                             .latency_s = o->latency_s, .host_cpus = o->host_cpus,
                             /* world 1 runs the local step: no server */
                             .ps_servers_own = mode == GS_MODE_PS && o->ps_server_hosts &&
                                                       world > 1 ? o->ps_servers : 0};
              const char *extra[] = {"--mode", gs_mode_name(mode), "--world", sworld,
                                     "--model", o->models[im], "--batch", sbatch,
                                     "--bucket-mb", sbucket};
              memcpy(l.extra, extra, sizeof extra);
              l.nextra = (int)(sizeof extra / sizeof extra[0]);
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
              rc = gs_launch_run(&l, why, sizeof why);
            }
            if (rc) {
              if (mode != GS_MODE_SINGLE || one_w1)
                fprintf(stderr, "bench: %s world %d failed: %s\n", gs_mode_name(mode), world,
                        why);
              if (o->link_choice == GS_LINK_AUTO_HOSTS && !gs_interrupted &&
                  gs_cluster_hosts(o, mode, world))
                fprintf(stderr, "bench: the emulated hosts were the default here; --link none "
                        "runs the ranks over this machine's loopback instead\n");
              status = gs_interrupted ? gs_interrupt_status() : rc == 2 ? 2 : 1;
              break;
            }
            if (o->collective) continue;
            gs_summary *more = realloc(sw->runs, (sw->nruns + 1) * sizeof *sw->runs);
            gs_run_info info = gs_run_info_of(o, mode, world);
            if (more) sw->runs = more;
            if (!more || gs_results_read_run(o->out, &info, &more[sw->nruns], &e) < 0) {
              fprintf(stderr, "bench: %s\n", more ? e.msg : "out of memory");
              status = 1;
              break;
            }
            if (!o->quiet) gs_summary_print_line(stdout, &sw->runs[sw->nruns], done, total);
            sw->nruns++;
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

int gs_sweep_main(gs_opts *o, int argc, char **argv) {
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
  char outbuf[512]; /* o->out while the sweep runs */
  char run_id[GS_RUN_ID_CHARS + 1];
  gs_run_id_new(run_id);
  setenv("GS_RUN_ID", run_id, 1); /* every rank's rows carry it */
  if (!o->out) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t n = strftime(outbuf, sizeof outbuf, "results/%Y%m%d-%H%M%S-", &tm);
    snprintf(outbuf + n, sizeof outbuf - n, "%.6s", run_id);
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
  gs_bench_signals();
  const char *isa = "unknown";
  gs_isa_select(&isa, NULL);
  if (!o->collective) gs_cluster_auto(o);
  if (!o->quiet) {
    printf("gradsync %s (git %s): CPU code path %s (GS_ISA=scalar|avx2|avx512 forces one), %ld "
           "cores; results in %s\n", GS_VERSION, GS_GIT_REVISION, isa,
           sysconf(_SC_NPROCESSORS_ONLN), o->out);
    if (!o->collective) gs_sweep_header(stdout, o);
    fflush(stdout);
  }
  if (!o->collective) loopback_model(o);
  gs_compress_forecast *forecast = o->collective || o->quiet ? NULL
                                   : gs_compress_forecast_print(stdout, o);

  sweep sw = {.peers = json_array(), .one_w1 = !o->collective && o->nmodes > 1};
  int status = 0, reps = o->collective ? 1 : o->repeats;
  for (int id = 0; id < o->nmodes; id++)
    for (int iw = 0; iw < o->nworlds; iw++)
      sw.total += !(sw.one_w1 && o->worlds[iw] == 1 && id > 0) &&
                  !(o->modes[id] == GS_MODE_SINGLE && o->worlds[iw] != 1);
  sw.total *= reps * o->nmodels * o->nbatches * o->nbucket_mbs;
  for (int rep = 1; rep <= reps && !status; rep++)
    status = sweep_once(o, argc, argv, rep, reps, &sw);
  gs_summary *runs = sw.runs;
  size_t nruns = sw.nruns;
  json_t *peers = sw.peers;

  if (!o->collective && nruns > 0) {
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
    gs_err_clear(&e);
    if (gs_report_write(o->out, o, runs, nruns, peers, status != 0, &e) < 0) {
      fprintf(stderr, "bench: %s\n", e.msg);
      if (!status) status = 1;
    } else {
      printf("\nresults: %s/report.html, report.json, steps.csv, trace.json, *.svg\n", o->out);
    }
  }
  if (o->collective && !status) {
    gs_err_clear(&e);
    if (gs_report_collective(o->out, o, run_id, &e) < 0) {
      fprintf(stderr, "bench: %s\n", e.msg);
      status = 1;
    } else if (!o->quiet) {
      printf("\nresults: %s/report.html, busbw.svg, collective-<mode>-w<N>.json (all_reduce), "
             "<collective>-<mode>-w<N>.json\n", o->out);
    }
  }
  if (status && !o->collective)
    fprintf(stderr, "bench: what was measured is in %s/steps.csv\n", o->out);
  gs_summaries_free(runs, nruns);
  gs_compress_forecast_free(forecast);
  json_decref(peers);
  return status;
}
