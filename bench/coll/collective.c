/* collective.c: `bench --collective C`, the backends alone, as nccl-tests'
 * all_reduce_perf (reduce_scatter_perf, ...) measures them. The timing, the sizes, the
 * exact check and the table are the one harness in bench/coll/perf.c
 * (gs_allreduce_perf); this file plugs a backend into it:
 *
 *   setup(src, dst, count)   untimed: close the previous session, then
 *                            prepare -> rendezvous round -> open a backend
 *                            session whose one bucket is the buffer, in
 *                            sum_only mode (grads = src, params = dst);
 *   fn(src, dst, count)      one step of that session: begin_step,
 *                            bucket_ready(0), end_step.
 *
 * ring = reduce-scatter + all-gather over ZeroMQ (NCCL with --device
 * cuda); ps = every rank pushes to the server, which sums, and pulls the
 * sum: the same transport, the other topology.
 *
 * The other collectives (reduce_scatter, all_gather, broadcast, reduce)
 * run on the bare ring under that session (gs_allreduce_comm: the ring's
 * phases alone, or chains), between its steps; the session's all-reduce
 * still exchanges the timings. With --device cuda they, and an all-reduce
 * with another op than sum, are NCCL's own calls on the session's
 * communicator (gs_nccl_collective: ncclReduceScatter, ncclAllGather,
 * ncclBroadcast, ncclReduce, ncclAllReduce with ncclAvg / ncclProd /
 * ncclMin / ncclMax), as nccl-tests runs them; -o avg is NCCL's ncclAvg
 * there, not a division after the sum. -d double / int32 and -o prod /
 * min / max run on both rings. ps runs all_reduce of fp32 with sum or avg
 * only: its reduce and broadcast are the two halves of one push/pull
 * exchange, not operations the server offers alone (README), and the
 * server's one reduction is the fp32 sum. Buffers live on the kernels'
 * device. Rank 0 prints the table (busbw formula beside it) and
 * writes it as collective-<mode>-w<N>.json (all_reduce) or <name>-<mode>-
 * w<N>.json into the results directory, tagged with the invocation's run
 * id, from which the launcher draws busbw.svg and report.html (rank 0
 * draws them itself under another launcher). A --collective list is the
 * launcher's: it runs one collective per job (sweep.c). */
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/allreduce.h"
#include "bench/coll/coll.h"
#include "bench/files/files.h"
#include "bench/job/job.h"
#include "bench/report/report.h"

/* The collective tables (collective-*.json, <collective>-*.json) have a schema
 * of their own, apart from report.json's: their keys have not changed since
 * they were first written. */
#define GS_COLLECTIVE_SCHEMA 1

typedef struct coll {
  const gs_opts *o;
  gs_mode mode;
  gs_job job;
  gs_kernels *k;
  gs_sync *s;
  gs_bucket bucket;
  gs_run_backend b;    /* the mode's backend and its options (job/backends.c) */
  gs_sync_config cfg;
} coll;

/* Are these op and type run here: NULL if so, else why not (--mode ps sums
 * fp32 buffers, at most on a 16-bit wire; both rings run every one). */
static const char *unsupported_op(const char *flag, bool newish, gs_mode mode) {
  static char why[300];
  if (!newish || mode != GS_MODE_PS) return NULL;
  snprintf(why, sizeof why, "%s runs on --mode ring only (the ZeroMQ ring, or NCCL with "
           "--device cuda): --mode ps sums fp32 gradients (the server's one reduction; -o sum "
           "or avg, -d float, half or bfloat16)", flag);
  return why;
}

/* The reduction a collective runs, and whether it goes through the
 * session's all-reduce (training's sum) or the bare ring / NCCL's calls. */
static bool new_op(int op) { return op != GS_REDOP_SUM && op != GS_REDOP_AVG; }
static bool new_type(gs_dtype t) { return t == GS_F64 || t == GS_I32; }

/* Is this collective run here: NULL if so, else why not (--mode ps). */
static const char *unsupported(gs_coll which, gs_mode mode) {
  if (which == GS_COLL_ALL_REDUCE || mode != GS_MODE_PS) return NULL;
  return "runs on --mode ring only (the ZeroMQ ring, or NCCL with --device cuda); --mode ps "
         "runs all_reduce (or allreduce): the server's reduce and broadcast are the halves of "
         "its one push/pull exchange";
}

static int close_session(coll *c, bool ok, gs_err *e) {
  int rc = GS_OK;
  if (c->s) rc = c->s->ops->close(c->s, ok, e);
  c->s = NULL;
  gs_job_end(&c->job);
  return rc;
}

static int setup(void *vc, const void *src, void *dst, size_t count, gs_err *e) {
  coll *c = vc;
  GS_TRY(close_session(c, true, e));
  gs_sync_config *cfg = &c->cfg;
  memset(cfg, 0, sizeof *cfg);
  c->bucket = (gs_bucket){0, count};
  cfg->k = c->k;
  cfg->params = dst;
  cfg->grads = (void *)src;
  cfg->n = count;
  cfg->buckets = &c->bucket;
  cfg->nbuckets = 1;
  cfg->wire = c->o->dtype;
  gs_scaler_init(&cfg->scaler, 1.0f, false);
  cfg->sum_only = true;
  GS_TRY(gs_backends_pick(c->o, c->mode, c->job.world, (int)c->k->device, &c->b, e));
  cfg->opts = c->b.opts;
  char settings[512];
  snprintf(settings, sizeof settings, "collective=%s\nmode=%s\nworld=%d\ncount=%zu\n"
           "device=%s\nps_dedicated=%d\nalgo=%s\nop=%s\ndtype=%s\nroot=%d\n",
           gs_coll_name((gs_coll)c->o->coll), gs_mode_name(c->mode), c->job.world, count,
           c->k->name, c->o->dedicated, gs_algo_name((gs_algo)c->o->algo),
           gs_redop_name((gs_redop)c->o->redop), gs_dtype_name(c->o->dtype), c->o->root);
  GS_TRY(gs_job_meet(&c->job, c->b.backend, cfg, settings, NULL, e));
  return gs_job_open(&c->job, cfg, &c->s, e);
}

static int step(void *vc, const void *src, void *dst, size_t count, int64_t iter, gs_err *e) {
  coll *c = vc;
  gs_sync_stats st;
  memset(&st, 0, sizeof st);
  GS_TRY(c->s->ops->begin_step(c->s, iter, e));
  GS_TRY(c->s->ops->bucket_ready(c->s, 0, e));
  return c->s->ops->end_step(c->s, &st, e);
}

/* One of the other collectives on the session's bare ring (count: the
 * full vector; all_gather's input is this rank's part of src). */
static int ring_coll(void *vc, const void *src, void *dst, size_t count, int64_t iter,
                     gs_err *e) {
  coll *c = vc;
  gs_comm *r = gs_allreduce_comm(c->s);
  if (!r) return GS_FAIL(e, GS_EINVAL, "%s: no ring under the session", gs_coll_name(c->o->coll));
  /* avg: the sum here, the post-division in the harness */
  gs_redop op = c->o->redop == GS_REDOP_AVG ? GS_REDOP_SUM : (gs_redop)c->o->redop;
  return gs_comm_collective(r, (gs_coll)c->o->coll, op, c->o->root, src, dst, count, iter, NULL,
                            e);
}

/* A collective as NCCL's own call on the session's communicator (count:
 * the full vector; avg: ncclAvg, nothing divides after it). */
static int nccl_coll(void *vc, const void *src, void *dst, size_t count, int64_t iter,
                     gs_err *e) {
  coll *c = vc;
  return gs_nccl_collective(c->s, (gs_coll)c->o->coll, (gs_redop)c->o->redop, c->o->root, src,
                            dst, count, iter, e);
}

/* The ring's algorithm for a size, as the ring picks it (NCCL picks its own:
 * none named); the other collectives' ring phases or chain. */
static const char *algo_of(void *vc, size_t count) {
  coll *c = vc;
  if (c->mode != GS_MODE_ALLREDUCE || c->k->device != GS_DEV_CPU) return NULL;
  if (c->o->coll == GS_COLL_BROADCAST || c->o->coll == GS_COLL_REDUCE) return "chain";
  if (c->o->coll != GS_COLL_ALL_REDUCE) return "ring";
  return gs_algo_name(gs_comm_algo(gs_allreduce_comm(c->s), count));
}

/* --collective's comma list, into o->colls (no repeats). */
static int parse_list(gs_opts *o, gs_err *e) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", o->collective);
  o->ncolls = 0;
  char *save = NULL;
  for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    int c = gs_coll_parse(w);
    if (c < 0)
      return GS_FAIL(e, GS_EINVAL, "--collective '%s': all_reduce (or allreduce), "
                     "reduce_scatter, all_gather, broadcast or reduce (nccl-tests' names), or a "
                     "comma list of them", w);
    for (int i = 0; i < o->ncolls; i++)
      if (o->colls[i] == c)
        return GS_FAIL(e, GS_EINVAL, "--collective %s names %s twice", o->collective, w);
    if (o->ncolls == GS_COLL_REDUCE + 1)
      return GS_FAIL(e, GS_EINVAL, "--collective %s: too many", o->collective);
    o->colls[o->ncolls++] = c;
  }
  if (o->ncolls == 0)
    return GS_FAIL(e, GS_EINVAL, "--collective '%s': name a collective", o->collective);
  return GS_OK;
}

int gs_collective_resolve(gs_opts *o, gs_err *e) {
  int op = gs_redop_parse(o->redop_arg), t = gs_perf_type_parse(o->dtype_arg);
  GS_TRY(parse_list(o, e));
  o->coll = o->colls[0];
  bool any_op = false, any_root = false;
  /* in a list, a collective runs in the modes that can run it (the sweep
   * skips the others); it needs one at least */
  for (int c = 0; c < o->ncolls; c++) {
    const gs_coll which = (gs_coll)o->colls[c];
    any_op |= gs_coll_has_op(which);
    any_root |= gs_coll_has_root(which);
    const char *why = NULL;
    int runs = 0;
    for (int i = 0; i < o->nmodes; i++) {
      const char *w = unsupported(which, o->modes[i]);
      if (w && (!why || o->ncolls == 1)) why = w;
      runs += !w;
    }
    if (why && (o->ncolls == 1 || runs == 0))
      return GS_FAIL(e, GS_EINVAL, "--collective %s %s", gs_coll_name(which), why);
  }
  for (int i = 0; o->world_given && i < o->nworlds; i++)
    if (o->root >= o->worlds[i])
      return GS_FAIL(e, GS_EINVAL, "-r %d: the root is a rank of the world (0..%d at --world "
                     "%d)", o->root, o->worlds[i] - 1, o->worlds[i]);
  if (op < 0)
    return GS_FAIL(e, GS_EINVAL, "-o (--op) '%s': sum, avg, prod, min or max", o->redop_arg);
  if (t < 0)
    return GS_FAIL(e, GS_EINVAL, "-d (--datatype) '%s': float, half, bfloat16, double or int32 "
                   "(the other integer types of nccl-tests are not supported)", o->dtype_arg);
  for (int i = 0; i < o->nmodes; i++) {
    char flag[96];
    snprintf(flag, sizeof flag, "-o %s", o->redop_arg);
    const char *why = unsupported_op(flag, new_op(op) && any_op, o->modes[i]);
    if (!why) {
      snprintf(flag, sizeof flag, "-d %s", o->dtype_arg);
      why = unsupported_op(flag, new_type((gs_dtype)t), o->modes[i]);
    }
    if (why) return GS_FAIL(e, GS_EINVAL, "%s", why);
  }
  /* a flag that changes nothing is an error, as everywhere in bench (in a
   * list, one that no collective of it takes) */
  if (op != GS_REDOP_SUM && !any_op)
    return GS_FAIL(e, GS_EINVAL, "-o (--op) %s: --collective %s reduces nothing (nccl-tests "
                   "prints its redop as none): drop -o", o->redop_arg, o->collective);
  if (o->root != 0 && !any_root)
    return GS_FAIL(e, GS_EINVAL, "-r %d: --collective %s has no root (broadcast and reduce "
                   "do): drop -r", o->root, o->collective);
  if (o->algo == GS_ALGO_SHM && gs_dtype_lp((gs_dtype)t))
    return GS_FAIL(e, GS_EINVAL, "--algo shm with -d %s: shared memory sums float, double or "
                   "int32 (a 16-bit wire rounds at every hop of the sockets' algorithms): drop "
                   "--algo or -d", o->dtype_arg);
  o->redop = op;
  o->dtype = (gs_dtype)t;
  return GS_OK;
}

const char *gs_collective_skip(const gs_opts *o, int which, gs_mode mode) {
  return unsupported((gs_coll)which, mode);
}

/* one placement's figures, under nccl-tests' JSON names (time in us) */
static json_t *json_time(const gs_perf_time *t) {
  return json_pack("{s:f, s:f, s:f, s:o}", "time", t->time_us, "alg_bw", t->algbw, "bus_bw",
                   t->busbw, "nwrong", t->wrong == UINT64_MAX ? json_null()
                   : json_integer((json_int_t)t->wrong));
}

/* rows: our flat out-of-place figures (what the charts and report.html
 * read), and both placements as nccl-tests' -J writes them */
static int write_json(const gs_opts *o, const char *dir, const char *run_id, gs_mode mode,
                      int world, const char *device, const gs_perf_row *rows, int nrows,
                      gs_err *e) {
  const gs_coll which = (gs_coll)o->coll;
  const char *type = gs_perf_type_name(o->dtype);
  const char *op = gs_coll_has_op(which) ? gs_redop_name((gs_redop)o->redop) : "none";
  char root[16];
  snprintf(root, sizeof root, "%d", gs_coll_has_root(which) ? o->root : -1);
  json_t *arr = json_array();
  for (int i = 0; i < nrows; i++) {
    const gs_perf_row *r = &rows[i];
    json_t *row = json_pack("{s:I, s:I, s:s, s:s, s:f, s:f, s:f, s:I, s:I, s:s, s:o, s:o}",
                            "size_bytes", (json_int_t)r->bytes, "count", (json_int_t)r->count,
                            "type", type, "redop", op, "time_us", r->oop.time_us, "algbw_gbps",
                            r->oop.algbw, "busbw_gbps", r->oop.busbw, "wrong",
                            (json_int_t)r->oop.wrong, "size", (json_int_t)r->bytes, "root",
                            root, "out_of_place", json_time(&r->oop), "in_place",
                            json_time(&r->ip));
    if (r->algo) json_object_set_new(row, "algo", json_string(r->algo));
    json_array_append_new(arr, row);
  }
  int errors;
  double avg_busbw = gs_perf_summary(rows, nrows, &errors);
  /* the row's factor, as nccl-tests writes it */
  char formula[64] = "busbw = algbw";
  const char *f = gs_coll_of(which)->factor;
  if (strcmp(f, "1")) {
    snprintf(formula, sizeof formula, "busbw = algbw * %s", f);
    for (char *n = strchr(formula, '*'); *n; n++)
      if (*n == 'n') *n = 'N';
  }
  const char *isa = "unknown";
  gs_isa_select(&isa, NULL);
  json_t *doc = json_pack("{s:i, s:s, s:s, s:i, s:s, s:s, s:b, s:i, s:i, s:s, s:s, s:o}",
                          "schema_version", GS_COLLECTIVE_SCHEMA, "collective",
                          which == GS_COLL_ALL_REDUCE ? "allreduce" : gs_coll_name(which), "mode",
                          gs_mode_name(mode), "world", world, "device", device, "isa", isa,
                          "ps_dedicated",
                          o->dedicated && mode == GS_MODE_PS, "iters", o->iters, "warmup_iters",
                          o->warmup_iters, "busbw_formula", formula,
                          "units", "GB/s = 1e9 bytes/s; time in microseconds per collective, "
                          "the max over ranks of each rank's mean", "rows", arr);
  json_object_set_new(doc, "out_of_bounds", json_pack("{s:i, s:b}", "count", errors, "okay",
                                                      errors == 0));
  json_object_set_new(doc, "average_bus_bandwidth", json_pack("{s:f}", "bandwidth", avg_busbw));
  /* the invocation that wrote it: its report draws its own tables only */
  json_object_set_new(doc, "run_id", json_string(run_id));
  json_object_set_new(doc, "type", json_string(type));
  json_object_set_new(doc, "redop", json_string(op));
  if (mode == GS_MODE_ALLREDUCE && !strcmp(device, "cpu")) {
    json_object_set_new(doc, "algo", json_string(gs_algo_name((gs_algo)o->algo)));
    json_object_set_new(doc, "resend", json_boolean(o->resend));
  }
  char path[4200];
  GS_TRY(gs_mkdirs(dir, e));
  /* all_reduce's tables keep their first name; every table feeds busbw.svg
   * and report.html */
  snprintf(path, sizeof path, "%s/%s-%s-w%d.json", dir,
           which == GS_COLL_ALL_REDUCE ? "collective" : gs_coll_name(which), gs_mode_name(mode),
           world);
  int rc = gs_json_write_atomic(path, doc, e);
  json_decref(doc);
  if (rc == GS_OK && o->json) printf("# written: %s\n", path);
  return rc;
}

/* As mpirun --bind-to core and ring_perf: each rank on its own core when
 * the host has one for each, before any thread starts (ZeroMQ's I/O thread
 * and BLAS inherit it), so that ranks do not migrate onto each other.
 * Returns whether it pinned. */
static bool pin(const gs_rank_env *env) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int local = env->local_world > 0 ? env->local_world : env->world;
  int lr = env->local_rank >= 0 ? env->local_rank : env->rank;
  if (cores < 1 || local > cores || getenv("GS_NO_PIN")) return false;
  cpu_set_t cs;
  CPU_ZERO(&cs);
  CPU_SET(lr % (int)cores, &cs);
  return sched_setaffinity(0, sizeof cs, &cs) == 0;
}

int gs_collective_rank(const gs_opts *o, gs_mode mode, const gs_rank_env *env) {
  gs_err e = {0};
  int rank = env->rank, world = env->world, rc = GS_OK;
  coll c = {.o = o, .mode = mode};
  gs_perf_row *rows = NULL;
  gs_bench_signals();
  bool pinned = pin(env);

  bool starting = true; /* a wrong value only the job start can judge is a usage error */
  if ((rc = gs_job_start(&c.job, o, env, &e)) < 0) goto fail;
  starting = false;
  if ((rc = gs_bench_kernels(o, c.job.local_rank, gs_job_threads(&c.job, o), &c.k, &e)) < 0)
    goto fail;
  const gs_coll which = (gs_coll)o->coll;
  const bool cuda = c.k->device == GS_DEV_CUDA;
  if (o->ncolls > 1) {
    starting = true; /* usage */
    rc = GS_FAIL(&e, GS_EINVAL, "--collective %s: a list runs under bench's own launcher (bench "
                 "--world N); under torchrun, mpirun or srun give one collective per job",
                 o->collective);
    goto fail;
  }
  const char *why = unsupported(which, mode);
  if (!why) why = unsupported_op("-o", new_op(o->redop) && gs_coll_has_op(which), mode);
  if (!why) why = unsupported_op("-d", new_type(o->dtype), mode);
  if (why || o->root >= world) {
    starting = true; /* usage */
    if (why) rc = GS_FAIL(&e, GS_EINVAL, "--collective %s %s", gs_coll_name(which), why);
    else rc = GS_FAIL(&e, GS_EINVAL, "-r %d: the root is a rank of the world (0..%d)", o->root,
                      world - 1);
    goto fail;
  }

  /* training's all-reduce (the sum) through the session, as a step runs it;
   * the other ops and collectives on its bare ring, or NCCL's calls (avg
   * too: ncclAvg) */
  const bool nccl = cuda && mode == GS_MODE_ALLREDUCE;
  const bool nccl_avg = nccl && o->redop == GS_REDOP_AVG && gs_coll_has_op(which);
  gs_coll_fn fn = which == GS_COLL_ALL_REDUCE && !new_op(o->redop) && !nccl_avg ? step
                  : nccl ? nccl_coll : ring_coll;
  gs_perf_opts p = {.rank = rank, .world = world, .min_bytes = o->min_bytes,
                    .max_bytes = o->max_bytes, .factor = o->factor, .iters = o->iters,
                    .warmup = o->warmup_iters, .check = o->check,
                    .op = (gs_redop)o->redop, .wire = o->dtype,
                    .k = c.k->device == GS_DEV_CPU ? NULL : c.k, .fn_avg = nccl_avg,
                    .setup = setup, .algo_of = algo_of, .coll = which,
                    .root = gs_coll_has_root(which) ? o->root : 0,
                    .sum = fn == step ? NULL : step};
  if (p.min_bytes < gs_dtype_size(p.wire)) p.min_bytes = gs_dtype_size(p.wire);
  int cap = gs_perf_sizes(&p);
  rows = calloc((size_t)(cap > 0 ? cap : 1), sizeof *rows);
  if (!rows) { rc = GS_FAIL(&e, GS_ENOMEM, "out of memory"); goto fail; }
  int nrows = cap;
  rc = gs_allreduce_perf(fn, &c, &p, rows, &nrows, &e);
  gs_err ce = {0};
  int crc = close_session(&c, rc == GS_OK, &ce);
  if (rc == GS_OK && crc < 0) {
    rc = crc;
    e = ce;
  }
  if (rc < 0) goto fail;
  if (rank == 0) {
    char title[200];
    const char *isa = "unknown";
    gs_isa_select(&isa, NULL);
    snprintf(title, sizeof title, "gradsync %s%s on %s (CPU code path %s), transport %s, "
             "ranks %s", gs_mode_name(mode),
             o->dedicated && mode == GS_MODE_PS ? " (dedicated server)" : "", c.k->name, isa,
             c.k->device == GS_DEV_CUDA && mode == GS_MODE_ALLREDUCE ? "NCCL" : "ZeroMQ tcp",
             pinned ? "pinned to cores (GS_NO_PIN=1: not)" : "not pinned (more ranks than cores)");
    gs_perf_print(stdout, &p, title, rows, nrows);
    /* the table as JSON always: the launcher draws busbw.svg and report.html from it */
    /* without --out, another launcher's job gets a directory of its own,
     * named by its run id (gs_job_results_dir) */
    char own_dir[300];
    const char *dir = env->run_dir ? env->run_dir : o->out;
    if (!dir && !env->launched && gs_job_results_dir(&c.job, own_dir, sizeof own_dir))
      dir = own_dir;
    /* our launcher's invocation id; a job of another launcher is one run */
    char own[GS_RUN_ID_CHARS + 1];
    const char *rid = getenv("GS_RUN_ID");
    if (!rid || !*rid) {
      gs_run_id_of_job(c.job.first_token, own);
      rid = own;
    }
    if (dir && (rc = write_json(o, dir, rid, mode, world, c.k->name, rows, nrows, &e)) < 0)
      goto fail;
    if (dir && !env->launched && (rc = gs_report_collective(dir, o, rid, &e)) < 0) goto fail;
  }
  for (int i = 0; i < nrows * 2; i++) {
    const gs_perf_time *t = i % 2 ? &rows[i / 2].ip : &rows[i / 2].oop;
    if (t->wrong && t->wrong != UINT64_MAX) {
      rc = GS_FAIL(&e, GS_EMISMATCH, "%llu wrong value(s) in the %zu-byte %s, %s (exact "
                   "results expected)", (unsigned long long)t->wrong, rows[i / 2].bytes,
                   gs_coll_name(which),
                   i % 2 ? "in place" : "out of place");
      goto fail;
    }
  }
  goto done;
fail:
  close_session(&c, false, NULL);
  fprintf(stderr, "bench: rank %d: collective %s: %s\n", rank, gs_coll_name((gs_coll)o->coll),
          e.msg[0] ? e.msg : gs_strerror(rc));
done:
  gs_job_close(&c.job);
  if (c.k) c.k->destroy(c.k);
  free(rows);
  if (rc == GS_OK) return 0;
  return gs_interrupted ? gs_interrupt_status() : starting && rc == GS_EINVAL ? 2 : 1;
}
