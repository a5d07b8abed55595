/* results.c: the files of one run (each written by files.h's atomic
 * writer, or appended to, as below):
 *   steps.csv             one row per rank per step, appended as the run
 *                         goes (under another launcher than ours, rank 0
 *                         rewrites it with every rank's gathered rows at
 *                         the end); its header and its rows come from one
 *                         column list;
 *   runs/<id>/run.json    the run's summary (summary_json.c), which the
 *                         launcher reads back;
 *   runs/<id>/trace.json  the run's Chrome trace: one process per rank,
 *                         one track per thread;
 *   runs/<id>/timeline.json  a few of its steps rank by rank, which the
 *                         report draws as timeline-<id>.svg (timeline.c).
 * A results directory may be shared: nothing here follows a link planted
 * in it. Files are made afresh (O_EXCL | O_NOFOLLOW) or by the atomic
 * writer (a fresh temporary file, renamed over the name: a link of that
 * name is replaced, never followed); directories below it must be real
 * ones; steps.csv, which ranks append to, must be the one the run made. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/report/report.h"

bool gs_holds_run(const char *dir) {
  char path[4200];
  struct stat st;
  /* lstat: a link of either name counts too (it may point anywhere) */
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  if (lstat(path, &st) == 0) return true;
  snprintf(path, sizeof path, "%s/report.json", dir);
  return lstat(path, &st) == 0;
}

int gs_csv_open(const char *dir, gs_err *e) {
  char path[4200];
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0)
    return GS_FAIL(e, GS_EIO, "cannot append to %s: %s%s", path, strerror(errno),
                   errno == ELOOP ? " (a link took its place)" : "");
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
      st.st_uid != geteuid()) {
    close(fd);
    return GS_FAIL(e, GS_EIO, "%s is not the file this run made (another owner, or a link to "
                   "another file took its place): not writing to it", path);
  }
  return fd;
}

/* steps.csv's columns: name, printf format, value (c: the run, r: the
 * row, hash: the parameter hash). The header and every row are made from
 * this one list. */
#define CSV_COLUMNS(X)                                            \
  X(run_id, "%s", c->run_id ? c->run_id : "")                     \
  X(repeat, "%d", c->repeat > 0 ? c->repeat : 1)                  \
  X(mode, "%s", gs_mode_name(c->mode))                            \
  X(world, "%d", c->world)                                        \
  X(model, "%s", c->model)                                        \
  X(batch, "%d", c->batch)                                        \
  X(bucket_mb, "%g", c->bucket_mb)                                \
  X(precision, "%s", gs_dtype_name(c->precision))                 \
  X(rank, "%d", r->rank)                                          \
  X(step, "%lld", (long long)r->step)                             \
  X(epoch, "%d", r->epoch)                                        \
  X(t_start, "%.6f", r->t_start)                                  \
  X(step_s, "%.9f", r->step_s)                                    \
  X(data_s, "%.9f", r->data_s)                                    \
  X(forward_s, "%.9f", r->forward_s)                              \
  X(backward_s, "%.9f", r->backward_s)                            \
  X(wait_s, "%.9f", r->wait_s)                                    \
  X(reduce_s, "%.9f", r->reduce_s)                                \
  X(update_s, "%.9f", r->update_s)                                \
  X(bytes_sent, "%llu", (unsigned long long)r->bytes_sent)        \
  X(bytes_recv, "%llu", (unsigned long long)r->bytes_recv)        \
  X(loss, "%.9g", (double)r->loss)                                \
  X(scale, "%.9g", (double)r->scale)                              \
  X(skipped, "%d", r->skipped)                                    \
  X(correct, "%d", r->correct)                                    \
  X(samples, "%d", r->samples)                                    \
  X(rss_bytes, "%llu", (unsigned long long)r->rss_bytes)          \
  X(param_hash, "%016llx", (unsigned long long)hash)              \
  X(staleness, "%d", r->staleness)

#define CSV_NAME(name, fmt, value) "," #name
static const char CSV_HEADER[] = CSV_COLUMNS(CSV_NAME) "\n"; /* from [1]: no leading comma */

int gs_csv_row(char *buf, size_t cap, const gs_run_info *c, const gs_step_row *r,
               uint64_t hash) {
  size_t n = 0;
  int w;
#define CSV_VALUE(name, fmt, value)                                                    \
  w = snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "%s" fmt, n ? "," : "", \
               value);                                                                 \
  if (w < 0) return -1;                                                                \
  n += (size_t)w;
  CSV_COLUMNS(CSV_VALUE)
#undef CSV_VALUE
  w = snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "\n");
  n += (size_t)w;
  return n < cap && n <= INT_MAX ? (int)n : -1; /* -1: truncated */
}

int gs_csv_start(const char *dir, gs_err *e) {
  char path[4200];
  GS_TRY(gs_mkdirs(dir, e));
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST)
    return GS_FAIL(e, GS_EINVAL, "%s exists already: --out %s holds an earlier run (or a link "
                   "of that name); give a new directory, or move the old run away", path, dir);
  const char *h = CSV_HEADER + 1;
  size_t n = strlen(h);
  if (fd < 0 || write(fd, h, n) != (ssize_t)n) {
    int err = errno;
    if (fd >= 0) close(fd);
    return GS_FAIL(e, GS_EIO, "cannot write %s: %s", path, strerror(err));
  }
  return fd;
}

int gs_results_write_steps(const char *dir, const gs_run_info *info,
                           const gs_rank_result *ranks, gs_err *e) {
  size_t most = 0, cap = 1 << 16, len = strlen(CSV_HEADER + 1);
  for (int r = 0; r < info->world; r++)
    if (ranks[r].nrows > most) most = ranks[r].nrows;
  char *buf = malloc(cap);
  if (!buf) return GS_FAIL(e, GS_ENOMEM, "out of memory writing steps.csv");
  memcpy(buf, CSV_HEADER + 1, len);
  /* step by step, rank by rank, as a reader of one step wants them */
  for (size_t i = 0; i < most; i++)
    for (int r = 0; r < info->world; r++) {
      if (i >= ranks[r].nrows) continue;
      const gs_step_row *row = &ranks[r].rows[i];
      int n;
      while ((n = gs_csv_row(buf + len, cap - len, info, row, row->param_hash)) < 0) {
        char *more = cap < ((size_t)1 << 40) ? realloc(buf, cap * 2) : NULL;
        if (!more) {
          free(buf);
          return GS_FAIL(e, GS_ENOMEM, "out of memory writing steps.csv");
        }
        buf = more;
        cap *= 2;
      }
      len += (size_t)n;
    }
  char path[4200];
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  int rc = gs_write_atomic(path, buf, len, e);
  free(buf);
  return rc;
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

int gs_results_write_run(const char *dir, const gs_summary *s, const gs_run_info *info,
                         const gs_rank_result *ranks, gs_err *e) {
  char sub[4096], path[4200], below[600];
  snprintf(below, sizeof below, "runs/%s", s->id);
  GS_TRY(gs_mkdir_below(dir, below, e));
  snprintf(sub, sizeof sub, "%s/runs/%s", dir, s->id);
  json_t *run = gs_summary_json(s, e);
  if (!run) return e->code ? e->code : GS_ENOMEM;
  snprintf(path, sizeof path, "%s/run.json", sub);
  int rc = gs_json_write_atomic(path, run, e);
  json_decref(run);
  if (rc < 0) return rc;
  json_t *tr = trace_json(info, ranks);
  if (!tr) return GS_FAIL(e, GS_ENOMEM, "out of memory writing the trace of %s", s->id);
  snprintf(path, sizeof path, "%s/trace.json", sub);
  rc = gs_json_write_atomic(path, tr, e);
  json_decref(tr);
  if (rc < 0) return rc;
  json_t *tl = gs_timeline_json(info, ranks); /* drawn with the report */
  if (!tl) return GS_OK;
  snprintf(path, sizeof path, "%s/timeline.json", sub);
  rc = gs_json_write_atomic(path, tl, e);
  json_decref(tl);
  return rc;
}

int gs_results_read_run(const char *dir, const gs_run_info *info, gs_summary *out, gs_err *e) {
  char id[512], path[4600];
  gs_run_id(info, id, sizeof id);
  snprintf(path, sizeof path, "%s/runs/%s/run.json", dir, id);
  json_error_t je;
  json_t *j = json_load_file(path, 0, &je);
  if (!j) return GS_FAIL(e, GS_EIO, "cannot read %s: %s", path, je.text);
  int rc = gs_summary_from_json(j, out, e);
  json_decref(j);
  if (rc < 0) gs_err_prefix(e, "%s: ", path);
  return rc;
}
