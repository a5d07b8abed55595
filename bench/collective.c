/* collective.c: the backends alone, measured as nccl-tests measures
 * (all_reduce_perf): for each size from -b to -e (x -f), -w warmup and -n
 * timed all-reduces of float32 sums, then
 *     algbw = bytes / time        busbw = algbw x 2(N-1)/N   (GB/s = 1e9 B/s)
 * and a correctness column: every iteration's result is compared with the
 * exact expected sum (integer-valued inputs, so the sum is exact in float32
 * whatever the order: tolerance 0).
 *
 * Each size is its own backend session (prepare, rendezvous round, open,
 * close) with one bucket covering the buffer, in the backends' sum_only
 * mode: ring = reduce-scatter + all-gather, ps = push to the server, which
 * sums, + pull. Rank 0 prints the table (its own timing, as nccl-tests
 * prints per process); a rank that sees a wrong value fails the run. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/internal.h"
#include "bench/report.h"
#include "bench/results.h"

/* input of rank r at element i, and the exact sum over N ranks */
static float input(int r, size_t i) { return (float)((r + 1) * (int)(i % 251 + 1)); }
static float expected(int world, size_t i) {
  return (float)(world * (world + 1) / 2 * (int)(i % 251 + 1));
}

typedef struct row {
  size_t bytes, count;
  double time_us, algbw, busbw;
  long wrong;
} row;

static int one_size(const gs_opts *o, gs_mode mode, const gs_rank_env *env, gs_kernels *k,
                    gs_rdv **rdv, size_t count, float *dev_in, float *dev_out, float *host_in,
                    float *host_out, row *res, gs_err *e) {
  int rank = env->rank, world = env->world, rc;
  gs_sync_config cfg;
  memset(&cfg, 0, sizeof cfg);
  gs_bucket bucket = {0, count};
  cfg.rank = rank;
  cfg.world = world;
  cfg.timeout_ms = (int)(o->timeout_s * 1000);
  cfg.host = o->host ? o->host : "127.0.0.1";
  cfg.k = k;
  cfg.params = dev_out;
  cfg.grads = dev_in;
  cfg.n = count;
  cfg.buckets = &bucket;
  cfg.nbuckets = 1;
  cfg.wire = GS_F32;
  gs_scaler_init(&cfg.scaler, 1.0f, false);
  cfg.sum_only = true;
  cfg.dedicated = o->dedicated;
  cfg.local_rank = env->local_rank >= 0 ? env->local_rank : rank;
  cfg.local_world = env->local_world > 0 ? env->local_world : world;
  cfg.device = cfg.local_rank;

  const gs_backend *be = bench_pick_backend(mode, k, e);
  if (!be) return e->code;
  void *state = NULL;
  char endpoint[GS_ENDPOINT_MAX] = "";
  if (rank == 0) cfg.job = gs_rdv_new_token();
  GS_TRY(be->prepare(&cfg, &state, endpoint, e));
  char settings[512];
  snprintf(settings, sizeof settings, "collective=allreduce\nmode=%s\nworld=%d\ncount=%zu\n"
           "device=%s\nps_dedicated=%d\n", gs_mode_name(mode), world, count, k->name,
           o->dedicated);
  char host[GS_HOST_MAX] = "localhost";
  gethostname(host, sizeof host - 1);
  gs_rdv_me me = {.rank = rank, .world = world, .local_rank = cfg.local_rank, .host = host,
                  .endpoint = endpoint, .settings = settings};
  gs_rdv_job job = {0};
  uint8_t blob[GS_BOOTSTRAP_MAX];
  size_t bloblen = 0;
  if (rank == 0 && be->bootstrap && (rc = be->bootstrap(state, &cfg, blob, &bloblen, e)) < 0)
    goto discard;
  if (world == 1) {
    job.endpoints = calloc(1, sizeof *job.endpoints);
    job.hosts = calloc(1, sizeof *job.hosts);
    if (!job.endpoints || !job.hosts) { rc = GS_FAIL(e, GS_ENOMEM, "out of memory"); goto discard; }
    snprintf(job.endpoints[0], GS_ENDPOINT_MAX, "%s", endpoint);
    if (bloblen) memcpy(job.blob, blob, bloblen);
    job.bloblen = bloblen;
    job.job = cfg.job;
  } else if (rank == 0) {
    if ((rc = gs_rdv_host(*rdv, &me, cfg.job, blob, bloblen, cfg.timeout_ms, &job, e)) < 0) goto discard;
  } else {
    char master[GS_HOST_MAX + 32];
    snprintf(master, sizeof master, "tcp://%s:%d", env->master_addr, env->master_port);
    if (*rdv) { gs_rdv_close(*rdv); *rdv = NULL; }
    if ((rc = gs_rdv_join(master, &me, cfg.timeout_ms, rdv, &job, e)) < 0) goto discard;
  }
  const char *eps[1024];
  for (int i = 0; i < world && i < 1024; i++) eps[i] = job.endpoints[i];
  cfg.endpoints = eps;
  cfg.bootstrap = job.blob;
  cfg.bootstrap_len = job.bloblen;
  cfg.job = job.job;
  gs_sync *s = NULL;
  rc = be->open(state, &cfg, &s, e);
  state = NULL;
  if (rc < 0) goto out;

  for (size_t i = 0; i < count; i++) host_in[i] = input(rank, i);
  double total = 0;
  long wrong = 0;
  for (int it = 0; it < o->warmup_iters + o->iters && rc == GS_OK; it++) {
    k->to_device(k, dev_in, host_in, count * sizeof(float));
    k->zero(k, dev_out, count * sizeof(float));
    if ((rc = k->sync(k, e)) < 0) break;
    gs_sync_stats st;
    memset(&st, 0, sizeof st);
    double t0 = gs_now();
    if ((rc = s->ops->begin_step(s, it, e)) < 0) break;
    if ((rc = s->ops->bucket_ready(s, 0, e)) < 0) break;
    if ((rc = s->ops->end_step(s, &st, e)) < 0) break;
    if ((rc = k->sync(k, e)) < 0) break;
    double dt = gs_now() - t0;
    if (it >= o->warmup_iters) total += dt;
    if (o->check) {
      k->to_host(k, host_out, dev_out, count * sizeof(float));
      if ((rc = k->sync(k, e)) < 0) break;
      for (size_t i = 0; i < count; i++) wrong += host_out[i] != expected(world, i);
    }
  }
  gs_err ce = {0};
  int crc = s->ops->close(s, rc == GS_OK, &ce);
  if (rc == GS_OK && crc < 0) {
    rc = crc;
    *e = ce;
  }
  if (rc == GS_OK) {
    double t = o->iters > 0 ? total / o->iters : 0;
    res->bytes = count * sizeof(float);
    res->count = count;
    res->time_us = t * 1e6;
    res->algbw = t > 0 ? (double)res->bytes / t / 1e9 : 0;
    res->busbw = res->algbw * 2.0 * (world - 1) / world;
    res->wrong = wrong;
    if (wrong)
      rc = GS_FAIL(e, GS_EMISMATCH, "rank %d: %ld wrong value(s) in the %zu-byte all-reduce "
                   "(exact integer sums expected)", rank, wrong, res->bytes);
  }
  goto out;
discard:
  if (state && be->discard) be->discard(state);
out:
  gs_rdv_job_free(&job);
  return rc;
}

static int write_json(const gs_opts *o, gs_mode mode, int world, const char *device, row *rows,
                      int nrows, gs_err *e) {
  json_t *arr = json_array();
  for (int i = 0; i < nrows; i++)
    json_array_append_new(arr, json_pack("{s:I, s:I, s:s, s:s, s:f, s:f, s:f, s:I}", "size_bytes",
                                         (json_int_t)rows[i].bytes, "count",
                                         (json_int_t)rows[i].count, "type", "float", "redop",
                                         "sum", "time_us", rows[i].time_us, "algbw_gbps",
                                         rows[i].algbw, "busbw_gbps", rows[i].busbw, "wrong",
                                         (json_int_t)rows[i].wrong));
  json_t *doc = json_pack("{s:i, s:s, s:s, s:i, s:s, s:b, s:i, s:i, s:s, s:s, s:o}",
                          "schema_version", 1, "collective", "allreduce", "mode",
                          gs_mode_name(mode), "world", world, "device", device, "ps_dedicated",
                          o->dedicated && mode == GS_MODE_PS, "iters", o->iters, "warmup_iters",
                          o->warmup_iters, "busbw_formula", "busbw = algbw * 2(N-1)/N",
                          "units", "GB/s = 1e9 bytes/s; time in microseconds per all-reduce",
                          "rows", arr);
  char path[4200];
  GS_TRY(gs_mkdirs(o->out, e));
  snprintf(path, sizeof path, "%s/collective-%s-w%d.json", o->out, gs_mode_name(mode), world);
  int rc = gs_json_write_atomic(path, doc, e);
  json_decref(doc);
  if (rc == GS_OK) printf("# written: %s\n", path);
  return rc;
}

int gs_collective_rank(const gs_opts *o, gs_mode mode, const gs_rank_env *env) {
  gs_err e = {0};
  int rank = env->rank, world = env->world, rc = GS_OK;
  gs_kernels *k = NULL;
  gs_rdv *rdv = NULL;
  float *din = NULL, *dout = NULL, *hin = NULL, *hout = NULL;
  row *rows = NULL;
  int nrows = 0;
  gs_bench_signals();

  if (rank == 0 && world > 1) {
    char bind[GS_ENDPOINT_MAX], bound[GS_ENDPOINT_MAX];
    bench_rdv_bind_addr(env, bind, sizeof bind);
    if ((rc = gs_rdv_listen(bind, bound, sizeof bound, &rdv, &e)) < 0) goto fail;
    if (env->port_fd >= 0) {
      const char *colon = strrchr(bound, ':');
      char line[32];
      int n = snprintf(line, sizeof line, "%s\n", colon ? colon + 1 : "0");
      if (write(env->port_fd, line, (size_t)n) != n) {
        rc = GS_FAIL(&e, GS_EIO, "cannot tell the launcher the port: %s", strerror(errno));
        goto fail;
      }
      close(env->port_fd);
    }
  }
  int lw = env->local_world > 0 ? env->local_world : world;
  int threads = o->threads > 0 ? o->threads : bench_default_threads(lw);
  if ((rc = bench_kernels(o, env->local_rank >= 0 ? env->local_rank : rank, threads, &k, &e)) < 0)
    goto fail;

  size_t max_count = (o->max_bytes / sizeof(float));
  if (max_count == 0) max_count = 1;
  din = k->alloc(k, max_count * sizeof(float));
  dout = k->alloc(k, max_count * sizeof(float));
  hin = k->alloc_host(k, max_count * sizeof(float));
  hout = k->alloc_host(k, max_count * sizeof(float));
  if (!din || !dout || !hin || !hout || (rc = k->sync(k, &e)) < 0) {
    if (rc == GS_OK) rc = GS_FAIL(&e, GS_ENOMEM, "cannot allocate 4 x %zu bytes", o->max_bytes);
    goto fail;
  }
  rows = calloc(4096, sizeof *rows);
  if (!rows) { rc = GS_FAIL(&e, GS_ENOMEM, "out of memory"); goto fail; }

  if (rank == 0) {
    printf("# gradsync all-reduce: mode %s%s, world %d, device %s, transport %s\n",
           gs_mode_name(mode), o->dedicated && mode == GS_MODE_PS ? " (dedicated server)" : "",
           world, k->name, k->device == GS_DEV_CUDA && mode == GS_MODE_RING ? "NCCL" : "ZeroMQ tcp");
    printf("# %d warmup + %d timed iterations per size; check %s (exact integer sums, "
           "tolerance 0)\n", o->warmup_iters, o->iters, o->check ? "on" : "off");
    printf("# algbw = size / time; busbw = algbw x 2(N-1)/N = algbw x %.3f; GB/s = 1e9 B/s\n",
           2.0 * (world - 1) / world);
    printf("#\n# %12s %12s %6s %6s %11s %9s %9s %7s\n", "size", "count", "type", "redop",
           "time", "algbw", "busbw", "#wrong");
    printf("# %12s %12s %6s %6s %11s %9s %9s %7s\n", "(B)", "(elements)", "", "", "(us)",
           "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }
  double sum_busbw = 0;
  for (double size = (double)o->min_bytes; size <= (double)o->max_bytes * 1.000001 && nrows < 4096;
       size *= o->factor) {
    size_t bytes = ((size_t)size / sizeof(float)) * sizeof(float);
    size_t count = bytes / sizeof(float);
    if (count == 0) count = 1;
    if (nrows && rows[nrows - 1].count == count) continue;
    row *r = &rows[nrows];
    if ((rc = one_size(o, mode, env, k, &rdv, count, din, dout, hin, hout, r, &e)) < 0) goto fail;
    nrows++;
    sum_busbw += r->busbw;
    if (rank == 0) {
      printf("  %12zu %12zu %6s %6s %11.2f %9.3f %9.3f %7ld\n", r->bytes, r->count, "float",
             "sum", r->time_us, r->algbw, r->busbw, r->wrong);
      fflush(stdout);
    }
    if (gs_interrupted) { rc = GS_FAIL(&e, GS_EINTR, "interrupted"); goto fail; }
  }
  if (rank == 0) {
    printf("# Avg bus bandwidth    : %.4f GB/s\n", nrows ? sum_busbw / nrows : 0.0);
    if (o->json && (rc = write_json(o, mode, world, k->name, rows, nrows, &e)) < 0) goto fail;
  }
  goto done;
fail:
  fprintf(stderr, "bench: rank %d: collective allreduce: %s\n", rank,
          e.msg[0] ? e.msg : gs_strerror(rc));
done:
  if (k) {
    k->release(k, din);
    k->release(k, dout);
    k->release_host(k, hin);
    k->release_host(k, hout);
    k->destroy(k);
  }
  free(rows);
  if (rdv) gs_rdv_close(rdv);
  if (rc == GS_OK) return 0;
  return rc == GS_EINTR ? 130 : 1;
}
