/* ps_serve.c: the ps servers of their own (--ps-server-hosts, BytePS'
 * spare machines). bench's launcher starts K of them beside the ranks
 * (launch.c), each this executable with GS_PS_SERVE=k: the server role
 * here serves server k of the run (ps/ps.h gs_ps_serve_alone) on
 * GS_HOST_ADDR, its address written on GS_PS_SERVE_FD. BytePS' summation
 * servers on spare hosts (--ps-spare-hosts K) are served alike, K of them
 * (gs_ps_own_servers). A rank finds the K
 * addresses in GS_PS_SERVERS ("tcp://a:p,tcp://b:p"), so such a job needs
 * bench's own launcher. The server of a stale run records the order in
 * which it applied gradients and writes it into the run's directory
 * (GS_RUN_DIR), as rank 0 does for a server of its own (apply_order.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"
#include "bench/job/job.h"
#include "ps/ps.h"

static int env_int(const char *name, int lo, int hi, int *out) {
  const char *v = getenv(name);
  char *end;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || end == v || *end || x < lo || x > hi) return -1;
  *out = (int)x;
  return 0;
}

int gs_ps_own_servers(const gs_opts *o) {
  return o->ps_spare >= 0 ? o->ps_spare : o->ps_servers;
}

int gs_ps_serve_main(const gs_opts *o) {
  int K = gs_ps_own_servers(o), k, fd;
  if (env_int("GS_PS_SERVE", 0, K - 1, &k) < 0 || env_int("GS_PS_SERVE_FD", 0, 1 << 20, &fd) < 0) {
    fprintf(stderr, "bench: GS_PS_SERVE='%s' and GS_PS_SERVE_FD='%s' do not name one of %d ps "
            "servers and its pipe (bench's launcher sets them)\n",
            getenv("GS_PS_SERVE") ? getenv("GS_PS_SERVE") : "",
            getenv("GS_PS_SERVE_FD") ? getenv("GS_PS_SERVE_FD") : "", K);
    return 2;
  }
  const char *addr = getenv("GS_HOST_ADDR");
  gs_err e = {0};
  gs_cred cred;
  gs_cm_plan plan = {0};
  /* the most parameters a server may own: its share of the model */
  /* bench's launcher gives it the job's secret; it listens where the
   * ranks reach it, so it takes no other */
  int rc = gs_job_secret(o->secret_file, addr && *addr ? addr : "127.0.0.1", o->encrypt, &cred,
                         &e);
  if (rc == GS_OK)
    rc = gs_cm_plan_model(o->models[0], GS_F32, o->train.first_bucket_mb, o->bucket_mbs[0],
                          &plan, &e);
  /* the ranks' configuration is this process's (the same flags and
   * overrides): the log's header is theirs */
  int world = o->worlds[0];
  const char *dir = getenv("GS_RUN_DIR") ? getenv("GS_RUN_DIR") : o->out;
  gs_apply_order ao;
  gs_applied_hook hook = {0};
  bool logging = false;
  if (rc == GS_OK && dir && gs_apply_order_wanted(o, GS_MODE_PS, world)) {
    gs_train_opts to = o->train;
    to.rank = 0;
    to.world = world;
    gs_run_info info = gs_run_info_of(o, GS_MODE_PS, world);
    gs_run_info_repeat(&info, true);
    rc = gs_apply_order_start(o, &to, k, gs_threads_per_rank(o, world), dir, &info, &ao, &hook,
                              &e);
    logging = rc == GS_OK;
  }
  if (rc == GS_OK) {
    /* a summation server's share is a split's, rounded per partition */
    size_t most = o->ps_spare >= 0 ? plan.nparams : plan.nparams / (size_t)K + 1;
    const char *at = addr && *addr ? addr : "127.0.0.1";
    int ms = (int)(o->timeout_s * 1000.0);
    rc = o->ps_spare >= 0 ? gs_ps_serve_summation(at, &cred, ms, most, fd, &e)
                          : gs_ps_serve_alone(at, &cred, ms, most, logging ? &hook : NULL, fd, &e);
  }
  gs_cm_plan_free(&plan);
  if (logging) gs_apply_order_free(&ao);
  if (rc < 0) fprintf(stderr, "bench: ps server %d of %d: %s\n", k, K, e.msg);
  return rc < 0 ? 1 : 0;
}

int gs_ps_serve_endpoints(const gs_opts *o, char ***out, gs_err *e) {
  *out = NULL;
  const char *v = getenv("GS_PS_SERVERS");
  if (!v)
    return GS_FAIL(e, GS_EINVAL, "%s: no ps servers' addresses (GS_PS_SERVERS): "
                   "the servers of their own are started by bench's launcher, so run bench "
                   "without another launcher", o->ps_spare >= 0 ? "--ps-spare-hosts"
                   : "--ps-server-hosts");
  int K = gs_ps_own_servers(o);
  char **eps = calloc((size_t)K + 1, sizeof *eps);
  char *all = strdup(v);
  if (!eps || !all) {
    free(eps);
    free(all);
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r(all, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (n == K) {
      n++;
      break;
    }
    eps[n++] = t;
  }
  if (n != K) {
    free(eps);
    free(all);
    return GS_FAIL(e, GS_EINVAL, "%s %d, but GS_PS_SERVERS='%.200s' names %s%d servers",
                   o->ps_spare >= 0 ? "--ps-spare-hosts" : "--ps-servers", K, v,
                   n > K ? "more than " : "", n > K ? K : n);
  }
  eps[K] = all; /* owns the strings: gs_ps_serve_endpoints_free */
  *out = eps;
  return GS_OK;
}

void gs_ps_serve_endpoints_free(const gs_opts *o, char **eps) {
  if (!eps) return;
  free(eps[gs_ps_own_servers(o)]);
  free(eps);
}
