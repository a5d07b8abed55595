/* roles.c: which role this process plays (bench.h lists them), after the
 * flags are parsed: calibrate or project with the cost model (no rank), a
 * command of the user's on emulated hosts, draw a finished sweep's tables
 * and charts again (--report), a ps server of its own, one rank of a job
 * (the environment says so: training or the collective benchmark), bench's
 * own multi-node launcher, or the launcher's sweep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/coll/coll.h"
#include "bench/job/job.h"
#include "bench/report/report.h"

static int run(gs_opts *o, int argc, char **argv);

/* A process that a launcher started runs one configuration: the first of
 * each list, which the launcher's overrides name. */
static void first_of_each(gs_opts *o) {
  o->train.model = o->models[0];
  o->train.batch = o->batches[0];
  o->train.bucket_mb = o->bucket_mbs[0];
}

int gs_bench_main(int argc, char **argv) {
  gs_opts o;
  gs_err e = {0};
  bool help = false;
  int rc;
  if (gs_opts_parse(argc, argv, &o, &help, &e) < 0) {
    fprintf(stderr, "bench: %s\n(bench --help lists every flag)\n", e.msg);
    rc = 2;
  } else if (help) {
    gs_opts_usage(stdout);
    rc = 0;
  } else if (o.version) {
    gs_version_print(stdout);
    rc = 0;
  } else {
    static char cmd[4096];
    size_t used = 0;
    for (int i = 0; i < argc && used + 2 < sizeof cmd; i++)
      used += (size_t)snprintf(cmd + used, sizeof cmd - used, "%s%s", i ? " " : "", argv[i]);
    o.command_line = cmd;
    o.started = gs_wall();
    rc = run(&o, argc, argv);
  }
  gs_opts_free(&o);
  return rc;
}

static int run(gs_opts *op, int argc, char **argv) {
  gs_opts o = *op;
  gs_err e = {0};
  gs_rank_env env;
  /* GS_ISA naming a code path this CPU lacks stops here, before any rank
   * starts, as any other bad setting */
  if (gs_isa_select(NULL, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    return 2;
  }
  /* the cost model's commands start no rank, whatever the environment says */
  if (o.calibrate) return gs_calibrate_main(&o);
  if (o.exec) return gs_exec_main(&o);
  if (o.replay) return gs_replay_main(&o);
  if (o.project) return gs_project_main(&o);
  if (o.compare) return gs_compare_main(&o);
  if (o.report) {
    if (gs_report_redraw(o.report, stdout, &e) == GS_OK) return 0;
    fprintf(stderr, "bench: --report %s: %s\n", o.report, e.msg);
    return 1;
  }
  /* bench's launcher starts a --ps-server-hosts server as GS_PS_SERVE */
  if (getenv("GS_PS_SERVE")) {
    first_of_each(&o);
    return gs_ps_serve_main(&o);
  }
  if (gs_rank_env_read(&env, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    return 2;
  }
  if (env.present && !env.launched && o.link_bps) {
    fprintf(stderr, "bench: --link emulates hosts for ranks bench starts itself, and %s "
            "started this one: run bench without a launcher, or drop --hosts/--link\n",
            env.source);
    return 2;
  }
  if (env.present) {
    /* one rank of a job: our launcher's child, torchrun, mpirun, mpiexec,
     * srun or bench --nnodes */
    first_of_each(&o);
    /* without --out, rank 0 names the job's directory itself (its job
     * token's run id: gs_job_results_dir); the other ranks write none */
    if (o.collective) return gs_collective_rank(&o, o.modes[0], &env);
    return gs_rank_main(&o, o.modes[0], &env);
  }
  if (o.nnodes > 0) return gs_nodes_main(&o, argv);
  return gs_sweep_main(&o, argc, argv);
}
