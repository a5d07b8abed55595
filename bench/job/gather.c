/* gather.c: at the end of a run every rank hands its measurements to rank
 * 0 over the rendezvous socket, and rank 0 acknowledges them so nobody
 * exits before they are delivered:
 *
 *   rank r  --> Stats{steps, spans, host, peak RSS, part i, last} + raw
 *               frame: a packed gradsync.Measurements of the part's rows
 *               and spans, every frame within GS_RDV_FRAME_MAX
 *   rank 0  --> Shutdown (ack), also for a report it rejects
 *
 * Nothing of a rank's memory layout travels: rows and spans are protobuf
 * messages. Rank 0 takes a part only from the connection that proved the
 * rank it claims (rendezvous.c), checks the promised counts against what
 * the job's configuration allows before it allocates (gs_gather_limits,
 * sizes overflow-checked), every row's rank and step, every span's track
 * and name, and turns a malformed report into that rank's failure, not a
 * crash. A part is at most 64 KiB, so what protobuf-c makes of one while
 * decoding it stays within a few MiB whatever it holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench/job/job.h"
#include "proto/proto.h"

/* n elements of size bytes, or SIZE_MAX when that overflows */
static size_t array_bytes(size_t n, size_t size) {
  size_t b;
  return __builtin_mul_overflow(n, size, &b) ? SIZE_MAX : b;
}

static void row_to_pb(const gs_step_row *r, Gradsync__StepRow *p) {
  gradsync__step_row__init(p);
  p->step = r->step;
  p->rank = r->rank;
  p->epoch = r->epoch;
  p->t_start = r->t_start;
  p->t_end = r->t_end;
  p->step_s = r->step_s;
  p->data_s = r->data_s;
  p->forward_s = r->forward_s;
  p->backward_s = r->backward_s;
  p->wait_s = r->wait_s;
  p->reduce_s = r->reduce_s;
  p->update_s = r->update_s;
  p->bytes_sent = r->bytes_sent;
  p->bytes_recv = r->bytes_recv;
  p->loss = r->loss;
  p->scale = r->scale;
  p->skipped = r->skipped != 0;
  p->correct = r->correct;
  p->samples = r->samples;
  p->rss_bytes = r->rss_bytes;
  p->has_server = r->has_server != 0;
  p->server_reduce_s = r->server_reduce_s;
  p->server_update_s = r->server_update_s;
  p->server_bytes_sent = r->server_bytes_sent;
  p->server_bytes_recv = r->server_bytes_recv;
  p->param_hash = r->param_hash;
  p->staleness = r->staleness;
}

/* proto3 leaves a zero out of the wire, -0.0 included: the receiver reads
 * +0.0. Read every real as the sender's wire would deliver it, so that a
 * row means the same on both sides. */
static double plain(double v) { return v + 0.0; }

static void row_from_pb(const Gradsync__StepRow *p, gs_step_row *r) {
  memset(r, 0, sizeof *r);
  r->step = p->step;
  r->rank = p->rank;
  r->epoch = p->epoch;
  r->t_start = plain(p->t_start);
  r->t_end = plain(p->t_end);
  r->step_s = plain(p->step_s);
  r->data_s = plain(p->data_s);
  r->forward_s = plain(p->forward_s);
  r->backward_s = plain(p->backward_s);
  r->wait_s = plain(p->wait_s);
  r->reduce_s = plain(p->reduce_s);
  r->update_s = plain(p->update_s);
  r->bytes_sent = p->bytes_sent;
  r->bytes_recv = p->bytes_recv;
  r->loss = plain(p->loss);
  r->scale = plain(p->scale);
  r->skipped = p->skipped;
  r->correct = p->correct;
  r->samples = p->samples;
  r->rss_bytes = p->rss_bytes;
  r->has_server = p->has_server;
  r->server_reduce_s = plain(p->server_reduce_s);
  r->server_update_s = plain(p->server_update_s);
  r->server_bytes_sent = p->server_bytes_sent;
  r->server_bytes_recv = p->server_bytes_recv;
  r->param_hash = p->param_hash;
  r->staleness = p->staleness;
}

/* Every byte printable ASCII: a span's name goes into the trace, the
 * charts and the report as text. */
static bool printable(const char *s) {
  for (; *s; s++)
    if (*s < 0x20 || *s > 0x7e) return false;
  return true;
}

static void span_to_pb(const gs_span *s, char name[sizeof s->name + 1],
                       Gradsync__TraceSpan *p) {
  gradsync__trace_span__init(p);
  p->t0 = s->t0;
  p->t1 = s->t1;
  p->track = s->track;
  p->bucket = s->bucket;
  memcpy(name, s->name, sizeof s->name); /* the name may fill all of it: no NUL */
  name[sizeof s->name] = 0;
  p->name = name;
}

/* protobuf's cost of one more element of a repeated field: its tag and
 * length, at most 1 + 10 bytes, besides its own size */
#define ELEM_OVERHEAD 11

int gs_measurements_pack_part(const gs_rank_result *mine, size_t *row, size_t *span,
                              uint8_t *buf, size_t cap, size_t *len, gs_err *e) {
  size_t r0 = *row, s0 = *span, r1 = r0, s1 = s0, used = 0;
  /* as many as fit, by their packed sizes */
  for (; r1 < mine->nrows; r1++) {
    Gradsync__StepRow p;
    row_to_pb(&mine->rows[r1], &p);
    size_t n = gradsync__step_row__get_packed_size(&p) + ELEM_OVERHEAD;
    if (used + n > cap) break;
    used += n;
  }
  for (; r1 == mine->nrows && s1 < mine->nspans; s1++) {
    Gradsync__TraceSpan p;
    char name[sizeof mine->spans[0].name + 1];
    span_to_pb(&mine->spans[s1], name, &p);
    size_t n = gradsync__trace_span__get_packed_size(&p) + ELEM_OVERHEAD;
    if (used + n > cap) break;
    used += n;
  }
  size_t nr = r1 - r0, ns = s1 - s0;
  if (nr + ns == 0 && (r0 < mine->nrows || s0 < mine->nspans))
    return GS_FAIL(e, GS_EINVAL, "a measurement of this rank does not fit in a %zu-byte part",
                   cap);
  Gradsync__Measurements m = GRADSYNC__MEASUREMENTS__INIT;
  Gradsync__StepRow *rows = calloc(nr + 1, sizeof *rows);
  Gradsync__StepRow **rowp = calloc(nr + 1, sizeof *rowp);
  Gradsync__TraceSpan *spans = calloc(ns + 1, sizeof *spans);
  Gradsync__TraceSpan **spanp = calloc(ns + 1, sizeof *spanp);
  char (*names)[sizeof mine->spans[0].name + 1] = calloc(ns + 1, sizeof *names);
  int rc = GS_OK;
  if (!rows || !rowp || !spans || !spanp || !names) {
    rc = GS_FAIL(e, GS_ENOMEM, "out of memory packing the measurements");
    goto done;
  }
  for (size_t i = 0; i < nr; i++) {
    row_to_pb(&mine->rows[r0 + i], &rows[i]);
    rowp[i] = &rows[i];
  }
  for (size_t i = 0; i < ns; i++) {
    span_to_pb(&mine->spans[s0 + i], names[i], &spans[i]);
    spanp[i] = &spans[i];
  }
  m.n_rows = nr;
  m.rows = rowp;
  m.n_spans = ns;
  m.spans = spanp;
  *len = gradsync__measurements__get_packed_size(&m);
  if (*len > cap) {
    rc = GS_FAIL(e, GS_EINVAL, "a part of the measurements took %zu bytes, more than %zu",
                 *len, cap);
    goto done;
  }
  gradsync__measurements__pack(&m, buf);
  *row = r1;
  *span = s1;
done:
  free(rows);
  free(rowp);
  free(spans);
  free(spanp);
  free(names);
  return rc;
}

int gs_measurements_unpack_part(const uint8_t *data, size_t len, uint64_t steps,
                                uint64_t nspans, int rank, gs_rank_result *x, char *why,
                                size_t cap) {
  size_t rb = array_bytes(steps, sizeof(gs_step_row));
  size_t sb = array_bytes(nspans, sizeof(gs_span));
  if (rb == SIZE_MAX || sb == SIZE_MAX || steps > SIZE_MAX / 2 || nspans > SIZE_MAX / 2) {
    snprintf(why, cap, "measurements too large (%llu steps, %llu spans)",
             (unsigned long long)steps, (unsigned long long)nspans);
    return GS_EPROTO;
  }
  if (!x->rows && !x->spans) { /* the first part: room for what the header promised */
    x->rows = malloc(rb + 1);
    x->spans = malloc(sb + 1);
    if (!x->rows || !x->spans) {
      gs_rank_result_free(x);
      snprintf(why, cap, "out of memory for %llu rows and %llu spans",
               (unsigned long long)steps, (unsigned long long)nspans);
      return GS_ENOMEM;
    }
  }
  Gradsync__Measurements *m = gradsync__measurements__unpack(NULL, len, data);
  int rc = GS_EPROTO;
  if (!m) {
    snprintf(why, cap, "measurements that do not unpack (%zu bytes)", len);
    return rc;
  }
  if (m->n_rows > steps - x->nrows || m->n_spans > nspans - x->nspans ||
      (m->n_rows && x->nspans)) {
    snprintf(why, cap, "a part of %zu steps and %zu spans after %zu and %zu, but the header "
             "says %llu and %llu (rows before spans)", m->n_rows, m->n_spans, x->nrows,
             x->nspans, (unsigned long long)steps, (unsigned long long)nspans);
    goto done;
  }
  for (size_t i = 0; i < m->n_rows; i++) {
    const Gradsync__StepRow *p = m->rows[i];
    size_t want = x->nrows + i;
    if (p->rank != rank || p->step < 0 || (uint64_t)p->step != want) {
      snprintf(why, cap, "row %zu is rank %d step %lld, expected rank %d step %zu", want,
               p->rank, (long long)p->step, rank, want);
      goto done;
    }
  }
  for (size_t i = 0; i < m->n_spans; i++) {
    const Gradsync__TraceSpan *p = m->spans[i];
    if (p->track < 0 || p->bucket < -1 || strlen(p->name) > sizeof x->spans[0].name ||
        !printable(p->name)) {
      snprintf(why, cap, "span %zu is malformed (track %d, bucket %d, a %zu-byte name%s)",
               x->nspans + i, p->track, p->bucket, strlen(p->name),
               printable(p->name) ? "" : " with a byte that is no printable ASCII");
      goto done;
    }
  }
  for (size_t i = 0; i < m->n_rows; i++) row_from_pb(m->rows[i], &x->rows[x->nrows + i]);
  for (size_t i = 0; i < m->n_spans; i++) {
    const Gradsync__TraceSpan *p = m->spans[i];
    gs_span *s = &x->spans[x->nspans + i];
    memset(s, 0, sizeof *s);
    s->t0 = plain(p->t0);
    s->t1 = plain(p->t1);
    s->track = p->track;
    s->bucket = p->bucket;
    memcpy(s->name, p->name, strlen(p->name));
  }
  x->nrows += m->n_rows;
  x->nspans += m->n_spans;
  rc = GS_OK;
done:
  gradsync__measurements__free_unpacked(m, NULL);
  return rc;
}

int gs_rdv_send_stats(gs_rdv *r, int rank, const gs_rank_result *mine, int timeout_ms,
                      gs_err *e) {
  /* room in a frame for the part's payload; the header goes in its own */
  size_t cap = GS_RDV_FRAME_MAX - 64;
  uint8_t *buf = malloc(cap);
  if (!buf) return GS_FAIL(e, GS_ENOMEM, "out of memory packing the measurements");
  Gradsync__Envelope env;
  Gradsync__Stats st = GRADSYNC__STATS__INIT;
  st.steps = mine->nrows;
  st.spans = mine->nspans;
  st.row_bytes = 0; /* 0: the rows travel as a packed Measurements */
  st.span_bytes = 0;
  st.host = (char *)mine->host;
  st.peak_rss_bytes = mine->peak_rss;
  st.link_host = mine->link_host;
  st.link_tx_bytes = mine->link_tx;
  st.link_rx_bytes = mine->link_rx;
  st.link_window_s = mine->link_window_s;
  st.link_busy_tx_s = mine->link_busy_tx_s;
  st.link_busy_rx_s = mine->link_busy_rx_s;
  st.link_busy_s = mine->link_busy_s;
  void *sock = gs_rdv_socket(r);
  uint64_t job = gs_rdv_job_token(r);
  gs_wire_env(&env, job, (uint32_t)rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_STATS;
  env.stats = &st;
  size_t row = 0, span = 0;
  int rc = GS_OK;
  do {
    size_t len = 0;
    rc = gs_measurements_pack_part(mine, &row, &span, buf, cap, &len, e);
    st.last = row == mine->nrows && span == mine->nspans;
    if (rc == GS_OK)
      rc = gs_wire_send(sock, NULL, 0, &env, buf, len, NULL, NULL, timeout_ms, NULL, e);
    st.part++;
  } while (rc == GS_OK && !st.last);
  free(buf);
  if (rc < 0) return rc;
  gs_wire_msg m;
  rc = gs_wire_recv(sock, false, timeout_ms, job, 0, &m, e);
  if (rc == GS_ETIMEOUT) {
    gs_err_clear(e);
    rc = GS_FAIL(e, GS_ETIMEOUT, "rank %d: rank 0 did not acknowledge the measurements in "
                 "%.0f s (rank 0 died or stalled)", rank, timeout_ms / 1000.0);
  } else if (rc == GS_OK && m.env->body_case != GRADSYNC__ENVELOPE__BODY_SHUTDOWN) {
    rc = GS_FAIL(e, GS_EPROTO, "rank %d: expected rank 0's acknowledgement, got %s", rank,
                 gs_wire_kind(m.env));
  }
  gs_wire_msg_close(&m);
  return rc;
}

static void acknowledge(void *sock, uint64_t job, const zmq_msg_t *id) {
  Gradsync__Envelope env;
  Gradsync__Shutdown sd = GRADSYNC__SHUTDOWN__INIT;
  sd.reason = "measurements received";
  gs_wire_env(&env, job, 0);
  env.body_case = GRADSYNC__ENVELOPE__BODY_SHUTDOWN;
  env.shutdown = &sd;
  gs_wire_send(sock, zmq_msg_data((zmq_msg_t *)id), zmq_msg_size((zmq_msg_t *)id), &env, NULL,
               0, NULL, NULL, 1000, NULL, NULL);
}

/* The header fields of a rank's report (its first part). */
static void take_header(const Gradsync__Stats *st, gs_rank_result *x) {
  snprintf(x->host, sizeof x->host, "%s", st->host ? st->host : "");
  for (char *c = x->host; *c; c++) /* it goes into the reports as text */
    if (*c < 0x20 || *c > 0x7e) *c = '?';
  x->peak_rss = st->peak_rss_bytes;
  double w = st->link_window_s;
  if (st->link_host >= -1 && isfinite(w) && w >= 0 && st->link_busy_tx_s >= 0 &&
      st->link_busy_tx_s <= w && st->link_busy_rx_s >= 0 && st->link_busy_rx_s <= w &&
      st->link_busy_s >= 0 && st->link_busy_s <= w) {
    x->link_host = st->link_host;
    x->link_tx = st->link_tx_bytes;
    x->link_rx = st->link_rx_bytes;
    x->link_window_s = w;
    x->link_busy_tx_s = st->link_busy_tx_s;
    x->link_busy_rx_s = st->link_busy_rx_s;
    x->link_busy_s = st->link_busy_s;
  } else {
    x->link_host = -1; /* a reading that cannot be one counts as none */
  }
}

int gs_gather_take(const Gradsync__Stats *st, const uint8_t *data, size_t len,
                   const gs_gather_limits *lim, gs_rank_result *x, gs_err *e) {
  char why[256] = "";
  int rc = GS_EPROTO;
  if (st->row_bytes != 0 || st->span_bytes != 0)
    snprintf(why, sizeof why, "measurements as raw %u-byte rows (an older gradsync): run the "
             "same gradsync build on every rank", st->row_bytes);
  else if (st->steps > lim->rows || st->spans > lim->spans)
    snprintf(why, sizeof why, "a report of %llu steps and %llu spans, more than this job "
             "makes (%zu steps, at most %zu spans)", (unsigned long long)st->steps,
             (unsigned long long)st->spans, lim->rows, lim->spans);
  else if (st->part != x->next_part)
    snprintf(why, sizeof why, "part %u of the measurements came where part %u was due",
             st->part, x->next_part);
  else if (st->part > 0 && (st->steps != x->want_rows || st->spans != x->want_spans))
    snprintf(why, sizeof why, "part %u promises %llu steps and %llu spans, part 0 %zu and %zu",
             st->part, (unsigned long long)st->steps, (unsigned long long)st->spans,
             x->want_rows, x->want_spans);
  else
    rc = gs_measurements_unpack_part(data, len, st->steps, st->spans, x->rank, x, why,
                                     sizeof why);
  if (rc == GS_ENOMEM) return GS_FAIL(e, GS_ENOMEM, "rank 0: gathering rank %d: %s", x->rank, why);
  if (rc == GS_OK && st->part == 0) {
    take_header(st, x);
    x->want_rows = st->steps;
    x->want_spans = st->spans;
  }
  if (rc == GS_OK && st->last && (x->nrows != st->steps || x->nspans != st->spans)) {
    snprintf(why, sizeof why, "the last part leaves %zu steps and %zu spans of the %llu and "
             "%llu promised", x->nrows, x->nspans, (unsigned long long)st->steps,
             (unsigned long long)st->spans);
    rc = GS_EPROTO;
  }
  if (rc < 0) {
    gs_rank_result_free(x);
    x->nrows = x->nspans = 0;
    x->failed = 1;
    snprintf(x->error, sizeof x->error, "gathering measurements: %s", why);
    return 1;
  }
  x->next_part++;
  return st->last ? 1 : 0;
}

int gs_rdv_gather(gs_rdv *r, int world, const gs_gather_limits *lim, int timeout_ms,
                  gs_rank_result *out, gs_err *e) {
  int have = 1, rc = GS_OK;
  void *sock = gs_rdv_socket(r);
  uint64_t job = gs_rdv_job_token(r);
  bool *done = calloc((size_t)world, sizeof *done);
  if (!done) return GS_FAIL(e, GS_ENOMEM, "out of memory gathering measurements");
  for (int i = 1; i < world; i++) out[i].rank = i;
  double deadline = gs_now() + timeout_ms / 1000.0;
  while (have < world) {
    int left = (int)((deadline - gs_now()) * 1000.0);
    gs_wire_msg m;
    gs_err me = {0};
    int got = left > 0 ? gs_wire_recv(sock, true, left, job, GS_RDV_FRAME_MAX, &m, &me)
                       : GS_ETIMEOUT;
    if (got == GS_ETIMEOUT || left <= 0) {
      if (left > 0) gs_wire_msg_close(&m);
      char missing[256] = "";
      size_t off = 0;
      for (int i = 1; i < world && off < sizeof missing - 8; i++)
        if (!done[i])
          off += (size_t)snprintf(missing + off, sizeof missing - off, "%s%d", off ? ", " : "", i);
      rc = GS_FAIL(e, GS_ETIMEOUT, "rank 0: no measurements from rank(s) %s in %.0f s after "
                   "training ended", missing, timeout_ms / 1000.0);
      break;
    }
    if (got == GS_EINTR) {
      gs_wire_msg_close(&m);
      rc = GS_FAIL(e, GS_EINTR, "interrupted while gathering measurements");
      break;
    }
    if (got < 0) {
      fprintf(stderr, "rank 0: gather: ignored a bad message from %s: %s\n",
              m.proven > 0 ? "a rank" : "a connection that proved no rank", me.msg);
      gs_wire_msg_close(&m);
      continue;
    }
    Gradsync__Envelope__BodyCase kind = m.env->body_case;
    if (!gs_rdv_proven(r, &m, "gather")) {
      gs_wire_msg_close(&m);
      continue;
    }
    unsigned rk = m.env->rank;
    if (rk >= (unsigned)world || done[rk] ||
        (kind != GRADSYNC__ENVELOPE__BODY_ERROR && kind != GRADSYNC__ENVELOPE__BODY_STATS)) {
      gs_wire_msg_close(&m);
      continue;
    }
    gs_rank_result *x = &out[rk];
    int finished = 1;
    if (kind == GRADSYNC__ENVELOPE__BODY_ERROR) {
      x->failed = 1;
      snprintf(x->error, sizeof x->error, "%s: %s", m.env->error->phase, m.env->error->message);
    } else {
      size_t len = m.has_payload ? zmq_msg_size(&m.payload) : 0;
      finished = gs_gather_take(m.env->stats, m.has_payload ? zmq_msg_data(&m.payload) : NULL,
                                len, lim, x, e);
      /* acknowledge even a rejected report: the rank may exit now */
      if (finished == 1) acknowledge(sock, job, &m.id);
    }
    gs_wire_msg_close(&m);
    if (finished < 0) {
      rc = finished;
      break;
    }
    if (finished) {
      done[rk] = true;
      have++;
    }
  }
  free(done);
  return rc;
}
