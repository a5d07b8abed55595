/* results.c: one run's measurements -> the metrics of DESIGN.md -> files.
 *
 * Definitions (every report uses these):
 *   step time of rank r   batch start to parameters updated (row.step_s);
 *   a step's time         the max over ranks;
 *   throughput            global samples / sum of step times, over the
 *                         steps after --warmup;
 *   busy                  compute (data + forward + backward) + reduction
 *                         + optimizer; idle = step time - busy - wait;
 *   load imbalance        max over ranks of mean busy / mean of mean busy;
 *   master traffic share  the master's bytes sent + received / everyone's
 *                         (the master: rank 0, or a dedicated ps server);
 *   cost model bytes      S = parameters x wire dtype size; per step the ps
 *                         master moves (N-1)S in and out (N.S if dedicated),
 *                         a ps worker S; a ring rank 2(N-1)/N.S each way. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/results.h"

int gs_mkdirs(const char *path, gs_err *e) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
      return GS_FAIL(e, GS_EIO, "cannot create directory %s: %s", tmp, strerror(errno));
    *p = '/';
  }
  if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
    return GS_FAIL(e, GS_EIO, "cannot create directory %s: %s", tmp, strerror(errno));
  return GS_OK;
}

int gs_write_atomic(const char *path, const void *data, size_t len, gs_err *e) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return GS_FAIL(e, GS_EIO, "cannot write %s: %s", tmp, strerror(errno));
  const char *p = data;
  size_t left = len;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      unlink(tmp);
      return GS_FAIL(e, GS_EIO, "writing %s: %s", tmp, strerror(err));
    }
    p += n;
    left -= (size_t)n;
  }
  if (fsync(fd) < 0 || close(fd) < 0) {
    unlink(tmp);
    return GS_FAIL(e, GS_EIO, "writing %s: %s", tmp, strerror(errno));
  }
  if (rename(tmp, path) < 0) {
    int err = errno;
    unlink(tmp);
    return GS_FAIL(e, GS_EIO, "renaming %s to %s: %s", tmp, path, strerror(err));
  }
  return GS_OK;
}

int gs_json_write_atomic(const char *path, json_t *j, gs_err *e) {
  char *s = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
  if (!s) return GS_FAIL(e, GS_ENOMEM, "cannot serialise %s", path);
  size_t n = strlen(s);
  s[n] = '\n';
  int rc = gs_write_atomic(path, s, n + 1, e);
  free(s);
  return rc;
}

void gs_run_id(const gs_run_info *info, char *buf, size_t cap) {
  const gs_train_opts *t = &info->opts->train;
  char model[128];
  snprintf(model, sizeof model, "%s", t->model);
  for (char *p = model; *p; p++)
    if (*p == ':' || *p == '/' || *p == ',' || *p == ' ') *p = '_';
  snprintf(buf, cap, "%s-w%d-%s-b%d-bk%g%s%s", gs_mode_name(info->mode), info->world, model,
           t->batch, t->bucket_mb, info->dedicated ? "-dedicated" : "",
           t->precision != GS_F32 ? (t->precision == GS_F16 ? "-fp16" : "-bf16") : "");
}

const char *gs_csv_header(void) {
  return "mode,world,model,batch,bucket_mb,precision,rank,step,epoch,t_start,step_s,data_s,"
         "forward_s,backward_s,wait_s,reduce_s,update_s,bytes_sent,bytes_recv,loss,scale,"
         "skipped,correct,samples,rss_bytes,param_hash\n";
}

int gs_csv_row(char *buf, size_t cap, const gs_opts *o, gs_mode mode, int world,
               const gs_step_row *r, uint64_t param_hash) {
  const gs_train_opts *t = &o->train;
  return snprintf(buf, cap,
                  "%s,%d,%s,%d,%g,%s,%d,%lld,%d,%.6f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%llu,"
                  "%llu,%.9g,%.9g,%d,%d,%d,%llu,%016llx\n",
                  gs_mode_name(mode), world, t->model, t->batch, t->bucket_mb,
                  gs_dtype_name(t->precision), r->rank, (long long)r->step, r->epoch,
                  r->t_start, r->step_s, r->data_s, r->forward_s, r->backward_s, r->wait_s,
                  r->reduce_s, r->update_s, (unsigned long long)r->bytes_sent,
                  (unsigned long long)r->bytes_recv, r->loss, r->scale, r->skipped, r->correct,
                  r->samples, (unsigned long long)r->rss_bytes,
                  (unsigned long long)param_hash);
}

void gs_csv_header_once(const char *dir) {
  char path[4096];
  gs_mkdirs(dir, NULL);
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return; /* exists: someone wrote it */
  const char *h = gs_csv_header();
  ssize_t n = write(fd, h, strlen(h));
  (void)n;
  close(fd);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double quantile(double *sorted, size_t n, double q) {
  if (n == 0) return 0;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double f = pos - (double)i;
  return i + 1 < n ? sorted[i] * (1 - f) + sorted[i + 1] * f : sorted[i];
}

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

typedef struct rank_sum {
  double compute, wait, reduce, update, busy, idle, data, forward, backward;
  double sent, recv;
  uint64_t rss;
} rank_sum;

json_t *gs_results_run_json(const gs_run_info *info, const gs_rank_result *ranks) {
  const gs_opts *o = info->opts;
  const gs_train_opts *t = &o->train;
  int N = info->world;
  size_t steps = ranks[0].nrows;
  for (int r = 1; r < N; r++)
    if (ranks[r].nrows < steps) steps = ranks[r].nrows;
  size_t first = (size_t)o->warmup < steps ? (size_t)o->warmup : 0;
  size_t m = steps - first;

  double *step_time = calloc(steps + 1, sizeof *step_time);
  double *sorted = calloc(steps + 1, sizeof *sorted);
  rank_sum *rs = calloc((size_t)N, sizeof *rs);
  double total_time = 0, total_samples = 0, srv_reduce = 0, srv_update = 0, srv_sent = 0,
         srv_recv = 0;
  int skipped = 0;
  bool has_server = false;
  for (size_t s = 0; s < steps; s++) {
    double mx = 0, samples = 0;
    for (int r = 0; r < N; r++) {
      const gs_step_row *row = &ranks[r].rows[s];
      if (row->step_s > mx) mx = row->step_s;
      samples += row->samples;
    }
    step_time[s] = mx;
    skipped += ranks[0].rows[s].skipped != 0;
    if (s < first) continue;
    total_time += mx;
    total_samples += samples;
    for (int r = 0; r < N; r++) {
      const gs_step_row *row = &ranks[r].rows[s];
      rank_sum *x = &rs[r];
      double compute = row->data_s + row->forward_s + row->backward_s;
      double busy = compute + row->reduce_s + row->update_s;
      double idle = mx - busy - row->wait_s;
      x->data += row->data_s;
      x->forward += row->forward_s;
      x->backward += row->backward_s;
      x->compute += compute;
      x->wait += row->wait_s;
      x->reduce += row->reduce_s;
      x->update += row->update_s;
      x->busy += busy;
      x->idle += idle > 0 ? idle : 0;
      x->sent += (double)row->bytes_sent;
      x->recv += (double)row->bytes_recv;
      if (row->rss_bytes > x->rss) x->rss = row->rss_bytes;
    }
    const gs_step_row *r0 = &ranks[0].rows[s];
    if (r0->has_server) {
      has_server = true;
      srv_reduce += r0->server_reduce_s;
      srv_update += r0->server_update_s;
      srv_sent += (double)r0->server_bytes_sent;
      srv_recv += (double)r0->server_bytes_recv;
    }
  }
  memcpy(sorted, step_time + first, m * sizeof *sorted);
  qsort(sorted, m, sizeof *sorted, cmp_double);
  double div = m ? (double)m : 1;

  /* cost model */
  double S = (double)info->nparams * (double)gs_dtype_size(info->wire);
  double master_in = 0, master_out = 0, worker_in = 0, worker_out = 0;
  const char *formula;
  if (info->mode == GS_MODE_PS && info->dedicated) {
    master_in = master_out = N * S;
    worker_in = worker_out = S;
    formula = "ps, dedicated server: server receives and sends N*S, each worker S (per step)";
  } else if (info->mode == GS_MODE_PS) {
    master_in = master_out = (N - 1) * S;
    worker_in = worker_out = N > 1 ? S : 0;
    formula = "ps, server in rank 0: rank 0 receives and sends (N-1)*S, each worker S";
  } else if (info->mode == GS_MODE_RING) {
    master_in = master_out = worker_in = worker_out = 2.0 * (N - 1) / N * S;
    formula = "ring: every rank sends and receives 2(N-1)/N*S";
  } else {
    formula = "local: no communication";
  }

  double busy_max = 0, busy_mean = 0, traffic_all = 0;
  json_t *per_rank = json_array();
  for (int r = 0; r < N; r++) {
    rank_sum *x = &rs[r];
    double busy = x->busy / div;
    busy_mean += busy / N;
    if (busy > busy_max) busy_max = busy;
    traffic_all += (x->sent + x->recv) / div;
    bool master = r == 0 && !(info->mode == GS_MODE_PS && info->dedicated);
    json_t *row = json_pack(
        "{s:i, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:f, s:f}",
        "rank", r, "host", ranks[r].host, "bytes_sent", x->sent / div, "bytes_recv", x->recv / div,
        "compute_s", x->compute / div, "data_s", x->data / div, "forward_s", x->forward / div,
        "backward_s", x->backward / div, "comm_wait_s", x->wait / div, "reduce_s",
        x->reduce / div, "update_s", x->update / div, "busy_s", busy, "idle_s", x->idle / div,
        "step_s", m ? total_time / div : 0.0, "model_bytes_sent", master ? master_out : worker_out,
        "peak_rss_bytes", (json_int_t)(x->rss > ranks[r].peak_rss ? x->rss : ranks[r].peak_rss),
        "model_bytes_recv", master ? master_in : worker_in, "traffic_vs_model",
        (master ? master_in + master_out : worker_in + worker_out) > 0
            ? (x->sent + x->recv) / div / (master ? master_in + master_out : worker_in + worker_out)
            : 0.0);
    json_array_append_new(per_rank, row);
  }
  double master_bytes = (rs[0].sent + rs[0].recv) / div;
  json_t *server = json_null();
  if (has_server) {
    double ss = srv_sent / div, sr = srv_recv / div;
    traffic_all += ss + sr;
    master_bytes = ss + sr;
    server = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "bytes_sent", ss, "bytes_recv", sr,
                       "reduce_s", srv_reduce / div, "update_s", srv_update / div, "busy_s",
                       (srv_reduce + srv_update) / div, "model_bytes_sent", master_out,
                       "model_bytes_recv", master_in);
  }

  json_t *series = json_array();
  for (size_t s = 0; s < steps; s++) json_array_append_new(series, json_real(step_time[s]));
  double loss = steps ? ranks[0].rows[steps - 1].loss : 0;

  char id[512];
  gs_run_id(info, id, sizeof id);
  json_t *j = json_pack(
      "{s:s, s:s, s:i, s:s, s:s, s:i, s:i, s:f, s:f, s:s, s:s, s:b, s:b, s:s, s:i, s:I, s:I, "
      "s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:n, s:f, s:i}",
      "id", id, "mode", gs_mode_name(info->mode), "world", N, "model", t->model, "data", t->data,
      "batch", t->batch, "global_batch", t->batch * N, "bucket_mb", t->bucket_mb,
      "first_bucket_mb", t->first_bucket_mb, "precision", gs_dtype_name(t->precision), "device",
      info->kernels, "overlap", info->overlap, "ps_dedicated", info->dedicated, "launcher",
      info->source ? info->source : "gradsync", "threads_per_rank", info->threads, "steps",
      (json_int_t)steps, "nparams", (json_int_t)info->nparams, "nbuckets", info->nbuckets,
      "gradient_bytes", S, "wall_time_s", info->wall_end - info->wall_start,
      "throughput_samples_per_s", total_time > 0 ? total_samples / total_time : 0.0,
      "step_time_s_median", quantile(sorted, m, 0.5), "step_time_s_p95",
      quantile(sorted, m, 0.95), "step_time_s_mean", m ? total_time / div : 0.0, "imbalance",
      busy_mean > 0 ? busy_max / busy_mean : 1.0, "scaling_efficiency", "master_traffic_share",
      traffic_all > 0 ? master_bytes / traffic_all : 0.0, "skipped_steps", skipped);
  /* a diverged run has a NaN loss: JSON has no NaN, so it is null */
  json_object_set_new(j, "final_loss", jnum(loss));
  json_object_set_new(j, "warmup_steps", json_integer((json_int_t)first));
  json_object_set_new(j, "final_loss_scale",
                      jnum(steps ? (double)ranks[0].rows[steps - 1].scale : 1.0));
  json_object_set_new(j, "measured_steps", json_integer((json_int_t)m));
  json_object_set_new(j, "per_rank", per_rank);
  json_object_set_new(j, "server", server);
  json_object_set_new(j, "cost_model", json_pack("{s:s, s:f, s:f, s:f, s:f, s:f}", "formula",
                                                 formula, "S_bytes", S, "master_bytes_sent",
                                                 master_out, "master_bytes_recv", master_in,
                                                 "worker_bytes_sent", worker_out,
                                                 "worker_bytes_recv", worker_in));
  json_object_set_new(j, "step_time_s", series);
  json_object_set_new(j, "accuracy", info->accuracy >= 0 ? jnum(info->accuracy) : json_null());
  json_object_set_new(j, "eval_loss", info->accuracy >= 0 ? jnum(info->eval_loss) : json_null());
  free(step_time);
  free(sorted);
  free(rs);
  return j;
}

/* Chrome trace-event JSON: pid = rank, tid = track; ts in microseconds
 * from the run's first span. */
static json_t *trace_json(const gs_run_info *info, const gs_rank_result *ranks) {
  double t0 = info->wall_start;
  for (int r = 0; r < info->world; r++)
    for (size_t i = 0; i < ranks[r].nspans; i++)
      if (ranks[r].spans[i].t0 < t0) t0 = ranks[r].spans[i].t0;
  json_t *ev = json_array();
  for (int r = 0; r < info->world; r++) {
    char name[64];
    snprintf(name, sizeof name, "%s rank %d", gs_mode_name(info->mode), r);
    json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "process_name",
                                         "ph", "M", "pid", r, "tid", 0, "args", "name", name));
    json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:i}}", "name",
                                         "process_sort_index", "ph", "M", "pid", r, "tid", 0,
                                         "args", "sort_index", r));
    json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name",
                                         "ph", "M", "pid", r, "tid", 0, "args", "name",
                                         "training"));
    json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name",
                                         "ph", "M", "pid", r, "tid", 1, "args", "name",
                                         info->mode == GS_MODE_PS && r == 0 ? "server / comm"
                                                                             : "comm"));
    /* the loss scale as a counter track, and skipped steps as instants */
    for (size_t i = 0; r == 0 && i < ranks[r].nrows; i++) {
      const gs_step_row *row = &ranks[r].rows[i];
      double ts = (row->t_start - t0) * 1e6;
      json_array_append_new(ev, json_pack("{s:s, s:s, s:f, s:i, s:{s:f}}", "name", "loss scale",
                                           "ph", "C", "ts", ts, "pid", r, "args", "scale",
                                           (double)row->scale));
      if (row->skipped)
        json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:f, s:i, s:i, s:{s:I}}", "name",
                                             "skipped step (inf/NaN)", "ph", "i", "s", "p", "ts",
                                             ts, "pid", r, "tid", 0, "args", "step",
                                             (json_int_t)row->step));
    }
    for (size_t i = 0; i < ranks[r].nspans; i++) {
      const gs_span *s = &ranks[r].spans[i];
      char nm[sizeof s->name + 1];
      memcpy(nm, s->name, sizeof s->name);
      nm[sizeof s->name] = 0;
      json_t *e = json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i}", "name", nm, "cat",
                            gs_mode_name(info->mode), "ph", "X", "ts", (s->t0 - t0) * 1e6, "dur",
                            (s->t1 - s->t0) * 1e6, "pid", r, "tid", s->track);
      if (s->bucket >= 0) json_object_set_new(e, "args", json_pack("{s:i}", "bucket", s->bucket));
      json_array_append_new(ev, e);
    }
  }
  return json_pack("{s:o, s:s}", "traceEvents", ev, "displayTimeUnit", "ms");
}

int gs_results_write_run(const char *dir, const gs_run_info *info, const gs_rank_result *ranks,
                         gs_err *e) {
  char id[512], sub[4096], path[4200];
  gs_run_id(info, id, sizeof id);
  snprintf(sub, sizeof sub, "%s/runs/%s", dir, id);
  GS_TRY(gs_mkdirs(sub, e));
  json_t *run = gs_results_run_json(info, ranks);
  snprintf(path, sizeof path, "%s/run.json", sub);
  int rc = gs_json_write_atomic(path, run, e);
  json_decref(run);
  if (rc < 0) return rc;
  json_t *tr = trace_json(info, ranks);
  snprintf(path, sizeof path, "%s/trace.json", sub);
  rc = gs_json_write_atomic(path, tr, e);
  json_decref(tr);
  return rc;
}


double gs_jnum(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : 0.0;
}

const char *gs_jstr(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static void human_bytes(double b, char *buf, size_t cap) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) { b /= 1024; i++; }
  snprintf(buf, cap, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

void gs_results_print_json(FILE *f, json_t *run) {
  fprintf(f, "\n== %s  world %d  %s  batch %d/rank  %s  %s%s ==\n",
          json_string_value(json_object_get(run, "mode")), (int)gs_jnum(run, "world"),
          json_string_value(json_object_get(run, "model")), (int)gs_jnum(run, "batch"),
          json_string_value(json_object_get(run, "precision")),
          json_is_true(json_object_get(run, "overlap")) ? "overlap" : "no overlap",
          json_is_true(json_object_get(run, "ps_dedicated")) ? ", dedicated server" : "");
  char sb[32];
  human_bytes(gs_jnum(run, "gradient_bytes"), sb, sizeof sb);
  fprintf(f, "  throughput %.0f samples/s   step median %.2f ms  p95 %.2f ms   imbalance %.2f"
          "   master traffic share %.1f%%   S = %s in %d bucket(s)\n",
          gs_jnum(run, "throughput_samples_per_s"), gs_jnum(run, "step_time_s_median") * 1e3,
          gs_jnum(run, "step_time_s_p95") * 1e3, gs_jnum(run, "imbalance"),
          100 * gs_jnum(run, "master_traffic_share"), sb, (int)gs_jnum(run, "nbuckets"));
  fprintf(f, "  %-6s %9s %9s %9s %9s %9s %9s %9s %11s %11s %9s %10s\n", "rank", "compute", "wait",
          "reduce", "update", "busy", "idle", "step", "sent/step", "recv/step", "vs model",
          "peak RSS");
  fprintf(f, "  %-6s %9s %9s %9s %9s %9s %9s %9s %11s %11s %9s %10s\n", "", "ms", "ms", "ms", "ms",
          "ms", "ms", "ms", "", "", "", "");
  json_t *pr = json_object_get(run, "per_rank");
  size_t i;
  json_t *row;
  json_array_foreach(pr, i, row) {
    char s1[32], s2[32], s3[32];
    human_bytes(gs_jnum(row, "bytes_sent"), s1, sizeof s1);
    human_bytes(gs_jnum(row, "bytes_recv"), s2, sizeof s2);
    human_bytes(gs_jnum(row, "peak_rss_bytes"), s3, sizeof s3);
    fprintf(f, "  %-6d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11s %11s %8.3fx %10s\n",
            (int)gs_jnum(row, "rank"), 1e3 * gs_jnum(row, "compute_s"), 1e3 * gs_jnum(row, "comm_wait_s"),
            1e3 * gs_jnum(row, "reduce_s"), 1e3 * gs_jnum(row, "update_s"), 1e3 * gs_jnum(row, "busy_s"),
            1e3 * gs_jnum(row, "idle_s"), 1e3 * gs_jnum(row, "step_s"), s1, s2,
            gs_jnum(row, "traffic_vs_model"), s3);
  }
  json_t *srv = json_object_get(run, "server");
  if (json_is_object(srv)) {
    char s1[32], s2[32];
    human_bytes(gs_jnum(srv, "bytes_sent"), s1, sizeof s1);
    human_bytes(gs_jnum(srv, "bytes_recv"), s2, sizeof s2);
    fprintf(f, "  %-6s %9s %9s %9.2f %9.2f %9.2f %9s %9s %11s %11s\n", "server", "", "",
            1e3 * gs_jnum(srv, "reduce_s"), 1e3 * gs_jnum(srv, "update_s"), 1e3 * gs_jnum(srv, "busy_s"), "",
            "", s1, s2);
  }
  if (strcmp(json_string_value(json_object_get(run, "precision")), "fp32") ||
      gs_jnum(run, "skipped_steps") > 0)
    fprintf(f, "  precision %s: %d skipped step(s) (inf/NaN), loss scale at the end %g\n",
            json_string_value(json_object_get(run, "precision")), (int)gs_jnum(run, "skipped_steps"),
            gs_jnum(run, "final_loss_scale"));
  json_t *acc = json_object_get(run, "accuracy");
  if (json_is_number(acc))
    fprintf(f, "  eval accuracy %.2f%% loss %.4f (on up to 10000 training samples)\n",
            100 * json_number_value(acc), gs_jnum(run, "eval_loss"));
  json_t *cm = json_object_get(run, "cost_model");
  if (gs_jnum(cm, "S_bytes") <= 0 || !strcmp(json_string_value(json_object_get(run, "mode")), "local"))
    return;
  char m1[32], m2[32];
  human_bytes(gs_jnum(cm, "master_bytes_sent"), m1, sizeof m1);
  human_bytes(gs_jnum(cm, "worker_bytes_sent"), m2, sizeof m2);
  fprintf(f, "  cost model: %s\n              master %s each way, other ranks %s each way per "
          "step (vs model = measured sent+recv / model)\n",
          json_string_value(json_object_get(cm, "formula")), m1, m2);
}

void gs_results_print_run(FILE *f, const gs_run_info *info, const gs_rank_result *ranks) {
  json_t *j = gs_results_run_json(info, ranks);
  gs_results_print_json(f, j);
  json_decref(j);
}
