/* backends.c: the table of backends as bench sees them, one row each:
 * which mode (and device) it runs, how the command line fills its options
 * of its own, and which of bench's flags only it takes. What each backend
 * runs with those options is its own declaration (sync.h gs_backend.caps);
 * whether a run's flags ask something it does not run is worker/caps.c's
 * one check. The command line checks every run of a sweep here before any
 * rank starts; a rank picks its backend and fills its options from the same
 * rows; nothing else in bench names a backend.
 *
 * At world 1 a training run has nothing to synchronize: every mode runs
 * the single-process backend there (DataParallel on one device and DDP at
 * world 1 skip it too), so world 1 is the same baseline for all. The
 * collective benchmark runs its mode's backend at every world. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/allreduce.h"
#include "bench/job/job.h"
#include "ps/ps.h"

/* A flag that belongs to one mode's backend, and what it says when no
 * mode of the sweep takes it. */
typedef struct own_flag {
  gs_mode mode;
  bool (*given)(const gs_opts *o);
  void (*words)(const gs_opts *o, char *buf, size_t cap);
} own_flag;

typedef struct row {
  gs_mode mode;
  int device;               /* GS_DEV_CPU, GS_DEV_CUDA, or -1: either */
  const gs_backend *backend;
  /* its options from the flags (NULL: it has none), into b */
  void (*fill)(const gs_opts *o, gs_run_backend *b);
} row;

static void fill_ps(const gs_opts *o, gs_run_backend *b) {
  b->ps = (gs_ps_opts){.dedicated = o->dedicated, .servers = o->ps_servers,
                       .server_hosts = o->ps_server_hosts, .sync = o->ps_sync};
  /* BytePS' summation servers: the run's spare hosts (before the sweep
   * picks one, the list's first: what they run does not depend on it) */
  int spare = o->ps_spare >= 0 ? o->ps_spare : o->nps_spares > 0 ? o->ps_spares[0] : -1;
  if (spare >= 0) {
    b->ps.summation = true;
    b->ps.spare = spare;
    b->ps.spare_share = o->ps_spare_share;
    b->ps.partition_bytes = (size_t)(o->ps_partition_mb * (1 << 20)); /* 0: the ps' rule */
    b->ps.credit_bytes = (size_t)(o->ps_credit_mb * (1 << 20));
  }
  b->opts = &b->ps;
}

static void fill_allreduce(const gs_opts *o, gs_run_backend *b) {
  b->allreduce = (gs_allreduce_opts){.algo = (gs_algo)o->algo, .no_resend = !o->resend,
                                     .period = o->ring_period};
  b->opts = &b->allreduce;
}

static const row ROWS[] = {
  {GS_MODE_SINGLE, -1, &gs_single_backend, NULL},
  {GS_MODE_PS, -1, &gs_ps_backend, fill_ps},
  {GS_MODE_ALLREDUCE, GS_DEV_CPU, &gs_allreduce_backend, fill_allreduce},
  {GS_MODE_ALLREDUCE, GS_DEV_CUDA, &gs_nccl_backend, fill_allreduce},
};

/* ---- the flags only one mode's backend takes ---- */

static bool servers_given(const gs_opts *o) { return o->ps_servers > 1 || o->ps_server_hosts; }
static void servers_words(const gs_opts *o, char *buf, size_t cap) {
  snprintf(buf, cap, "--ps-servers %d%s shards the parameter server: it needs --mode ps",
           o->ps_servers, o->ps_server_hosts ? " --ps-server-hosts" : "");
}
static bool spare_given(const gs_opts *o) { return o->nps_spares > 0; }
static void spare_words(const gs_opts *o, char *buf, size_t cap) {
  snprintf(buf, cap, "--ps-spare-hosts %d%s runs BytePS' summation servers, a parameter "
           "server: it needs --mode ps", o->ps_spares[0], o->nps_spares > 1 ? ",..." : "");
}
static bool sync_given(const gs_opts *o) { return gs_ps_sync_stale(&o->ps_sync); }
static void sync_words(const gs_opts *o, char *buf, size_t cap) {
  char what[48];
  gs_ps_sync_text(&o->ps_sync, what, sizeof what);
  snprintf(buf, cap, "--ps-sync/--ps-backup (%s) is the parameter server's consistency model: "
           "it needs --mode ps", what);
}
static bool period_given(const gs_opts *o) { return o->ring_period > 1; }
static void period_words(const gs_opts *o, char *buf, size_t cap) {
  snprintf(buf, cap, "--ring-period %d averages the ring's parameters every %d steps: it needs "
           "--mode ring (and training, not --collective)", o->ring_period, o->ring_period);
}
static bool resend_given(const gs_opts *o) { return o->resend >= 0; }
static void resend_words(const gs_opts *o, char *buf, size_t cap) {
  snprintf(buf, cap, "--%s keeps or drops the ring's resend log and does nothing without "
           "--mode ring (ps always sends a push again after a reconnect)",
           o->resend ? "resend" : "no-resend");
}

static bool algo_given(const gs_opts *o) { return o->algo != GS_ALGO_AUTO; }
static void algo_words(const gs_opts *o, char *buf, size_t cap) {
  snprintf(buf, cap, "--algo %s picks the ring's all-reduce, and the parameter server has "
           "none: it needs --mode ring (--mode ps,ring runs both)",
           gs_algo_name((gs_algo)o->algo));
}

static const own_flag OWN[] = {
  {GS_MODE_PS, servers_given, servers_words},
  {GS_MODE_PS, sync_given, sync_words},
  {GS_MODE_PS, spare_given, spare_words},
  {GS_MODE_ALLREDUCE, period_given, period_words},
  {GS_MODE_ALLREDUCE, resend_given, resend_words},
  {GS_MODE_ALLREDUCE, algo_given, algo_words},
};

int gs_backends_own_flags(const gs_opts *o, gs_err *e) {
  /* training at world 1 alone is one process (gs_backends_pick): no mode's
   * backend runs, so none of their flags would do anything */
  bool alone = !o->collective && o->nworlds > 0;
  for (int i = 0; i < o->nworlds; i++) alone &= o->worlds[i] == 1;
  for (size_t i = 0; i < sizeof OWN / sizeof *OWN; i++) {
    if (!OWN[i].given(o)) continue;
    bool taken = false;
    for (int m = 0; m < o->nmodes; m++) taken |= o->modes[m] == OWN[i].mode;
    if (taken && !alone) continue;
    char why[512];
    OWN[i].words(o, why, sizeof why);
    if (taken)
      return GS_FAIL(e, GS_EINVAL, "%s; but at --world 1 alone training runs in one process, "
                     "with no parameter server and no ring: give a --world of 2 or more", why);
    return GS_FAIL(e, GS_EINVAL, "%s", why);
  }
  return GS_OK;
}

bool gs_backends_overlap(const gs_opts *o, gs_mode mode) {
  if (o->overlap >= 0) return o->overlap == 1;
  return mode == GS_MODE_ALLREDUCE || (mode == GS_MODE_PS && o->nps_spares > 0);
}

/* ---- picking and checking ---- */

int gs_backends_pick(const gs_opts *o, gs_mode mode, int world, int device,
                     gs_run_backend *b, gs_err *e) {
  memset(b, 0, sizeof *b);
  /* training at world 1: nothing to synchronize */
  if (world == 1 && !o->collective) mode = GS_MODE_SINGLE;
  for (size_t i = 0; i < sizeof ROWS / sizeof *ROWS; i++) {
    const row *r = &ROWS[i];
    if (r->mode != mode || (r->device >= 0 && device >= 0 && r->device != device)) continue;
    b->backend = r->backend;
    b->mode = mode;
    if (r->fill) r->fill(o, b);
    return GS_OK;
  }
  return GS_FAIL(e, GS_EINVAL, "no backend runs --mode %s on %s", gs_mode_name(mode),
                 device == GS_DEV_CUDA ? "a GPU" : "the CPU");
}

/* --device as the capabilities' axis: -1 while auto (a rank decides) */
static int device_of(const gs_opts *o) {
  return !strcmp(o->device, "cuda") ? GS_DEV_CUDA : !strcmp(o->device, "cpu") ? GS_DEV_CPU : -1;
}

void gs_backends_want(const gs_opts *o, const gs_run_backend *b, gs_want *w) {
  memset(w, 0, sizeof *w);
  const gs_compress *c = &o->train.compress;
  char spec[32];
  gs_compress_spec(c, spec, sizeof spec);
  gs_want_set(w, GS_AXIS_COMPRESS, (int)c->kind,
              c->kind == GS_COMPRESS_NONE ? NULL : "--compress %s", spec);
  gs_want_set(w, GS_AXIS_SYNC, GS_SYNC_BSP, NULL);
  if (b->backend->asks) b->backend->asks(b->opts, w);
  int dev = device_of(o);
  if (dev >= 0) gs_want_set(w, GS_AXIS_DEVICE, dev, dev == GS_DEV_CPU ? NULL : "--device cuda");
  gs_dtype p = o->train.precision;
  gs_want_set(w, GS_AXIS_PRECISION, (int)p, p == GS_F32 ? NULL : "--precision %s",
              gs_dtype_name(p));
  if (o->collective) {
    gs_want_set(w, GS_AXIS_WIRE, (int)o->dtype, "-d %s", o->dtype_arg ? o->dtype_arg : "float");
  } else {
    gs_dtype wire = gs_compress_wire(c, p);
    bool by_compress = c->kind == GS_COMPRESS_FP16 || c->kind == GS_COMPRESS_BF16;
    gs_want_set(w, GS_AXIS_WIRE, (int)wire, wire == GS_F32 ? NULL : "--%s %s",
                by_compress ? "compress" : "precision", by_compress ? spec : gs_dtype_name(p));
  }
  bool scaled = o->train.dynamic_scale || o->train.loss_scale != 1.0f;
  if (o->loss_scale_arg)
    gs_want_set(w, GS_AXIS_SCALING, scaled, "--loss-scale %s", o->loss_scale_arg);
  else
    gs_want_set(w, GS_AXIS_SCALING, scaled, scaled ? "--precision %s (its dynamic loss scaling)"
                : NULL, gs_dtype_name(p));
  bool overlap = gs_backends_overlap(o, b->mode);
  gs_want_set(w, GS_AXIS_OVERLAP, overlap, o->overlap == 1 ? "--overlap" : NULL);
  gs_want_set(w, GS_AXIS_COLLECTIVE, o->collective != NULL,
              o->collective ? "--collective %s" : NULL, o->collective);
  gs_transport t = !strcmp(o->transport, "shm") ? GS_TRANSPORT_SHM
                   : !strcmp(o->transport, "ipc") ? GS_TRANSPORT_IPC : GS_TRANSPORT_TCP;
  gs_want_set(w, GS_AXIS_TRANSPORT, (int)t, t == GS_TRANSPORT_TCP ? NULL : "--transport %s",
              o->transport);
}

int gs_backends_check_run(const gs_opts *o, const gs_run_backend *b, gs_err *e) {
  gs_caps caps;
  gs_want w;
  b->backend->caps(b->opts, &caps);
  gs_backends_want(o, b, &w);
  return gs_caps_check(&caps, &w, NULL, e);
}

int gs_backends_check(const gs_opts *o, gs_err *e) {
  int dev = device_of(o);
  /* a rank of a job (any launcher's) runs at its launcher's world, not at
   * the sweep's default list */
  const int *worlds = o->worlds;
  int nworlds = o->nworlds;
  gs_rank_env env;
  gs_err ignored = {0};
  if (gs_rank_env_read(&env, &ignored) == GS_OK && env.present) {
    worlds = &env.world;
    nworlds = 1;
  }
  for (int m = 0; m < o->nmodes; m++) {
    for (int i = 0; i < nworlds; i++) {
      gs_run_backend b;
      GS_TRY(gs_backends_pick(o, o->modes[m], worlds[i], dev, &b, e));
      /* the host-aggregated ps where it is asked for (by default it runs
       * only where it can: gs_bench_ps_hostagg); what it runs does not
       * depend on how many ranks a host holds, which a rank learns */
      if (b.backend == &gs_ps_backend && o->ps_hostagg == 1) b.ps.host_ranks = 2;
      GS_TRY(gs_backends_check_run(o, &b, e));
    }
  }
  return GS_OK;
}
