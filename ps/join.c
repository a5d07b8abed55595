/* join.c: one server's worker joins its job (sync.h's open() for one
 * server): the DEALER socket to the server (inproc:// beside an
 * in-process server, else its TCP address), rank 0's Init with its
 * initial parameters or another rank's Hello, then the server's Welcome,
 * whose parameters every rank copies (all ranks start bitwise identical,
 * as DDP broadcasts rank 0's state). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"

static void release_free(void *data, void *hint) {
  (void)hint;
  free(data);
}

static int send_hello(ps_worker *s, gs_err *e) {
  const gs_sync_config *c = &s->c;
  Gradsync__Envelope env;
  gs_wire_env(&env, c->job, (uint32_t)c->rank);
  gs_err se = {0};
  int rc;
  if (c->rank != 0) {
    Gradsync__Hello h = GRADSYNC__HELLO__INIT;
    h.count = c->n;
    h.nbuckets = (uint32_t)c->nbuckets;
    env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    rc = gs_wire_send(s->sock, NULL, 0, &env, NULL, 0, NULL, NULL, s->wait_ms, NULL, &se);
  } else {
    Gradsync__Init in = GRADSYNC__INIT__INIT;
    uint64_t *offs = malloc((size_t)c->nbuckets * sizeof *offs);
    uint64_t *cnts = malloc((size_t)c->nbuckets * sizeof *cnts);
    float *init = malloc(c->n * sizeof(float));
    if (!offs || !cnts || !init) {
      free(offs);
      free(cnts);
      free(init);
      return GS_FAIL(e, GS_ENOMEM, "ps rank 0: out of memory");
    }
    for (int b = 0; b < c->nbuckets; b++) {
      offs[b] = c->buckets[b].offset;
      cnts[b] = c->buckets[b].count;
    }
    in.world = (uint32_t)c->world;
    in.count = c->n;
    in.n_bucket_offset = in.n_bucket_count = (size_t)c->nbuckets;
    in.bucket_offset = offs;
    in.bucket_count = cnts;
    in.lr = c->sgd.lr;
    in.momentum = c->sgd.momentum;
    in.weight_decay = c->sgd.weight_decay;
    in.dtype = gs_wire_pbdtype(c->wire);
    in.scale = c->scaler.scale;
    in.dynamic_scale = c->scaler.dynamic;
    in.scale_interval = c->scaler.interval > 0 ? (uint32_t)c->scaler.interval : 0;
    in.scale_growth = c->scaler.growth;
    in.scale_backoff = c->scaler.backoff;
    const gs_ps_opts po = gs_ps_opts_of(c);
    in.sync_model = (uint32_t)po.sync.model;
    in.staleness = (uint32_t)po.sync.staleness;
    in.backup = po.sync.backup_on ? (uint32_t)po.sync.backup + 1 : 0;
    in.timeout_ms = (uint32_t)(c->timeout_ms > 0 ? c->timeout_ms : 0);
    in.sum_only = c->sum_only;
    in.average_over = po.average_over > 0 ? (uint32_t)po.average_over : 0;
    in.topk = c->compress.kind == GS_COMPRESS_TOPK ? c->compress.fraction : 0;
    uint64_t *tens = NULL;
    if (c->compress.kind == GS_COMPRESS_POWERSGD) {
      size_t nt = (size_t)c->ntensors;
      if (!(tens = malloc(3 * nt * sizeof *tens))) {
        free(offs);
        free(cnts);
        free(init);
        return GS_FAIL(e, GS_ENOMEM, "ps rank 0: out of memory");
      }
      for (size_t i = 0; i < nt; i++) {
        tens[i] = c->tensors[i].offset;
        tens[nt + i] = c->tensors[i].rows;
        tens[2 * nt + i] = c->tensors[i].cols;
      }
      in.powersgd_rank = (uint32_t)c->compress.rank;
      in.powersgd_min_rate = c->compress.min_rate;
      in.powersgd_start = (uint64_t)c->compress.start;
      in.n_tensor_offset = in.n_tensor_rows = in.n_tensor_cols = nt;
      in.tensor_offset = tens;
      in.tensor_rows = tens + nt;
      in.tensor_cols = tens + 2 * nt;
    }
    env.body_case = GRADSYNC__ENVELOPE__BODY_INIT;
    env.init = &in;
    c->k->to_host(c->k, init, c->params, c->n * sizeof(float));
    rc = gs_ps_kcheck(s, "reading the initial parameters", e);
    if (rc == GS_OK)
      rc = gs_wire_send(s->sock, NULL, 0, &env, init, c->n * sizeof(float), release_free, NULL,
                        s->wait_ms, NULL, &se);
    else
      free(init);
    free(offs);
    free(cnts);
    free(tens);
  }
  if (rc < 0 && se.code)
    return GS_FAIL(e, rc, "ps rank %d: saying hello to %s (%s): %s", c->rank, s->who,
                   s->server_ep, se.msg);
  return rc;
}

/* open() is a barrier: wait for the server's Welcome and its parameters. */
static int wait_welcome(ps_worker *s, gs_err *e) {
  const gs_sync_config *c = &s->c;
  double deadline = gs_now() + s->wait_ms / 1000.0;
  for (;;) {
    double left = deadline - gs_now();
    if (left <= 0)
      return GS_FAIL(e, GS_ETIMEOUT, "ps rank %d: no welcome from %s (%s, in %s) in %.1f s: "
                     "the server or another rank did not start", c->rank, s->who, s->server_ep,
                     s->where, s->wait_ms / 1000.0);
    gs_wire_msg m;
    gs_err me = {0};
    int rc = gs_wire_recv(s->sock, false, (int)(left * 1000.0) + 1, c->job,
                          c->n * sizeof(float), &m, &me);
    if (rc == GS_ETIMEOUT) {
      gs_wire_msg_close(&m);
      continue;
    }
    if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_WELCOME) {
      rc = gs_wire_expect_payload(&m, c->n, GS_F32, &me);
      if (rc == GS_OK) {
        c->k->to_device(c->k, c->params, zmq_msg_data(&m.payload), c->n * sizeof(float));
        rc = gs_ps_kcheck(s, "copying the initial parameters in", e);
      }
    } else if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
      rc = GS_FAIL(&me, GS_EPEER, "%s", m.env->error->message ? m.env->error->message : "?");
    } else if (rc == GS_OK) {
      rc = GS_FAIL(&me, GS_EPROTO, "an unexpected %s message", gs_wire_kind(m.env));
    }
    gs_wire_msg_close(&m);
    if (rc < 0 && me.code)
      return GS_FAIL(e, rc, "ps rank %d: joining %s (%s): %s", c->rank, s->who,
                     s->server_ep, me.msg);
    return rc;
  }
}

int gs_ps_open_one(ps_worker_state *st, const gs_sync_config *c, ps_worker **out, gs_err *e) {
  *out = NULL;
  ps_worker *s = calloc(1, sizeof *s);
  int rc = GS_OK;
  if (!s) {
    gs_ps_end(st, false, true, 1000, NULL);
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  }
  s->c = *c;
  s->o = gs_ps_opts_of(c);
  s->c.opts = &s->o; /* the caller's may go before this worker */
  s->st = st;
  s->who = st->who;
  s->where = st->where;
  s->cpu = c->k->device == GS_DEV_CPU;
  s->step = -1;
  s->scale = c->scaler.scale;
  int64_t timeout = c->timeout_ms > 0 ? c->timeout_ms : 60000;
  timeout += timeout / 4 + 1000;  /* a loaded machine may hold the server's words a while */
  s->wait_ms = timeout > INT32_MAX ? INT32_MAX : (int)timeout;
  s->c.endpoints = NULL;
  s->c.bootstrap = NULL;
  s->c.host = NULL;
  s->wsize = gs_dtype_size(c->wire);
  int nb = c->nbuckets;
  s->buckets = malloc((size_t)nb * sizeof *s->buckets);
  s->ready = calloc((size_t)nb, 1);
  s->pushed = calloc((size_t)nb, 1);
  s->got = calloc((size_t)nb, 1);
  if (!s->buckets || !s->ready || !s->pushed || !s->got) {
    rc = GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
    goto fail;
  }
  memcpy(s->buckets, c->buckets, (size_t)nb * sizeof *s->buckets);
  s->c.buckets = s->buckets;

  const char *ep;
  /* a shard's worker beside no server goes over the wire */
  if (st->server || (c->rank == 0 && !st->dedicated && !st->shard)) {
    if (!st->thread_started) {
      rc = GS_FAIL(e, GS_EINVAL, "ps rank 0: open() before bootstrap() (the launcher must call "
                   "bootstrap on rank 0 to start the server)");
      goto fail;
    }
    ep = st->inproc_ep;
    s->inproc = true;
    snprintf(s->server_ep, sizeof s->server_ep, "%s", st->tcp_ep);
  } else {
    const char *blob = c->bootstrap;
    size_t len = c->bootstrap_len;
    if (!blob || len < 7 || len > GS_ENDPOINT_MAX || blob[len - 1] != '\0' ||
        strlen(blob) != len - 1 || (strncmp(blob, "tcp://", 6) && strncmp(blob, "ipc://@", 7))) {
      rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: the bootstrap blob is not the address of %s "
                   "(%zu bytes; expected \"tcp://host:port\" or \"ipc://@name\" from %s)",
                   c->rank, s->who, len, s->where);
      goto fail;
    }
    ep = blob;
    snprintf(s->server_ep, sizeof s->server_ep, "%s", blob);
    s->has_server = c->rank == 0 && st->dedicated;
  }

  if (!s->cpu || c->wire != GS_F32) {
    size_t bytes = c->n * s->wsize;
    s->stage_host = c->k->alloc_host(c->k, bytes);
    s->stage_host_bytes = bytes;
    if (!s->cpu && c->wire != GS_F32) {
      s->stage_dev = c->k->alloc(c->k, bytes);
      s->stage_dev_bytes = bytes;
    }
    gs_err ke = {0};
    if (!s->stage_host || (!s->cpu && c->wire != GS_F32 && !s->stage_dev) ||
        c->k->sync(c->k, &ke) < 0) {
      rc = GS_FAIL(e, GS_ENOMEM, "ps rank %d: cannot allocate %zu bytes of staging for "
                   "gradients%s%s", c->rank, bytes, ke.code ? ": " : "", ke.msg);
      goto fail;
    }
  }

  if ((rc = gs_ps_topk_open(s, e)) < 0 || (rc = gs_ps_psgd_open(s, e)) < 0) goto fail;

  gs_sock_opts so = GS_SOCK_BULK(ZMQ_DEALER);
  if (s->o.summation) so.sockbuf = GS_PS_SUM_SOCKBUF; /* ps_internal.h says why */
  so.max_msg = gs_sock_frame_max(c->n * sizeof(float));
  /* a fixed routing id: after a dropped connection comes back the server
   * still knows whose it is (it lets the new connection take it over) */
  char rid[32];
  snprintf(rid, sizeof rid, "gs-ps-%d", c->rank);
  so.routing_id = rid;
  so.reconnect_ms = 20;
  if (!(s->sock = gs_sock_open(st->zctx, &so, e))) {
    gs_err_prefix(e, "ps rank %d: ", c->rank);
    rc = GS_EIO;
    goto fail;
  }
  s->resent_step = -1;
  if ((rc = gs_dial_open(st->zctx, s->sock, &c->cred, ep, &s->dial, e)) < 0) {
    gs_err_prefix(e, "ps rank %d: connecting to %s: ", c->rank, s->who);
    goto fail;
  }
  if ((rc = send_hello(s, e)) < 0 || (rc = wait_welcome(s, e)) < 0) goto fail;
  *out = s;
  return GS_OK;

fail:
  /* open() owns the state: release everything, and let the server go. */
  s->failed = true;
  if (s->sock) gs_ps_close(s, false, NULL);
  else gs_ps_free(s);
  return rc;
}
