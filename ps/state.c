/* state.c: where one server's worker finds its server, and the end of it
 * all. prepare forks a dedicated server process (before any ZeroMQ
 * context of ours exists, so the child inherits none) and makes the
 * worker's context; rank 0 of one server starts the in-process server
 * thread, or reads the dedicated process's address; a rank hosting one of
 * K servers binds it in prepare and serves from open on. gs_ps_end stops
 * and reaps whatever of that st holds, for discard and close alike. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"

int gs_ps_prepare_one(const gs_sync_config *c, bool host_server, ps_worker_state **out, gs_err *e) {
  *out = NULL;
  ps_worker_state *st = calloc(1, sizeof *st);
  if (!st) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  st->rank = c->rank;
  st->dedicated = gs_ps_opts_of(c).dedicated;
  st->child = st->child_fd = -1;
  snprintf(st->who, sizeof st->who, "the ps server");
  snprintf(st->where, sizeof st->where, st->dedicated ? "rank 0's dedicated process" : "rank 0");
  /* Fork first: the child must not inherit a context of ours. */
  if (c->rank == 0 && st->dedicated) {
    int rc = gs_ps_spawn(c, &st->child, &st->child_fd, e);
    if (rc < 0) {
      free(st);
      return rc;
    }
  }
  /* the server's host's context carries the in-process server's connections */
  st->zctx = gs_sock_context(host_server ? gs_ps_io_threads(c->world - 1) : 0, e);
  if (!st->zctx) {
    if (st->child > 0) gs_ps_spawn_reap(st->child, st->child_fd, 0, NULL);
    free(st);
    gs_err_prefix(e, "ps rank %d: ", c->rank);
    return GS_EIO;
  }
  *out = st;
  return GS_OK;
}

static void *server_main(void *arg) {
  ps_worker_state *st = arg;
  st->server_rc = gs_ps_server_run(st->server, &st->server_err);
  return NULL;
}

int gs_ps_host_server(ps_worker_state *st, const gs_sync_config *c, gs_err *e) {
  gs_kernels *k = c->k->clone(c->k, e);
  if (!k) {
    gs_err_prefix(e, "ps rank %d: the server's kernels: ", c->rank);
    return e ? e->code : GS_EDEVICE;
  }
  gs_ps_server_opts o = {
    .zctx = st->zctx, .host = c->host, .inproc = true, .inproc_rank = c->rank, .job = c->job,
    .cred = c->cred, .timeout_ms = c->timeout_ms, .max_elems = c->n, .k = k,
    .span = c->span, .span_ctx = c->span_ctx,
    /* the apply order of this server (a shard's: of its range) */
    .applied = gs_ps_opts_of(c).applied,
    .sockbuf = gs_ps_opts_of(c).summation ? GS_PS_SUM_SOCKBUF : 0,
  };
  int rc = gs_zap_start(st->zctx, &c->cred, 0, "ps server", &st->zap, e);
  if (rc < 0) {
    k->destroy(k);
    return rc;
  }
  return gs_ps_server_create(&o, &st->server, st->tcp_ep, st->inproc_ep, e);
}

int gs_ps_serve(ps_worker_state *st, gs_err *e) {
  /* The handler of SIGINT belongs to the training thread. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&st->thread, NULL, server_main, st);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    gs_ps_server_destroy(st->server);
    st->server = NULL;
    return GS_FAIL(e, GS_EIO, "ps rank %d: cannot start the server thread: %s", st->rank,
                   strerror(rc));
  }
  st->thread_started = true;
  return GS_OK;
}

int gs_ps_start(ps_worker_state *st, const gs_sync_config *c, char ep[GS_ENDPOINT_MAX], gs_err *e) {
  if (st->server || st->thread_started)
    return GS_FAIL(e, GS_EINVAL, "ps: bootstrap() called twice");
  if (st->dedicated) {
    GS_TRY(gs_ps_spawn_endpoint(st->child, st->child_fd, c->timeout_ms > 0 ? c->timeout_ms : 60000,
                                st->tcp_ep, e));
  } else {
    GS_TRY(gs_ps_host_server(st, c, e));
    GS_TRY(gs_ps_serve(st, e));
  }
  snprintf(ep, GS_ENDPOINT_MAX, "%s", st->tcp_ep);
  return GS_OK;
}

int gs_ps_end(ps_worker_state *st, bool orderly, bool kill_child, int wait_ms, gs_err *e) {
  if (!st) return GS_OK;
  int rc = GS_OK;
  if (st->thread_started) {
    if (!orderly) gs_ps_server_stop(st->server);
    pthread_join(st->thread, NULL);
    if (orderly && st->server_rc < 0) rc = GS_FAIL(e, st->server_rc, "%s", st->server_err.msg);
  }
  if (st->server) gs_ps_server_destroy(st->server);
  if (st->child > 0) {
    if (kill_child) kill(st->child, SIGKILL);
    gs_err ce = {0};
    int crc = gs_ps_spawn_reap(st->child, st->child_fd, wait_ms, &ce);
    if (orderly && crc < 0 && rc == GS_OK) rc = GS_FAIL(e, crc, "%s", ce.msg);
  }
  /* all messages released: the gradients are free again */
  gs_sock_context_end(st->zctx, st->zap);
  free(st);
  return rc;
}
