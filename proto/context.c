/* context.c: a job's ZeroMQ context, made and ended (proto.h
 * gs_sock_context*): the end waits for every socket's linger, which also
 * ends the loop of the context's ZAP handler (auth.c), whose thread it then
 * joins. Apart from socket.c so that the sockets, which the ZAP handler
 * itself opens, need nothing of the handler. */
#include "proto/proto.h"

#include <errno.h>

void *gs_sock_context(int io_threads, gs_err *e) {
  void *ctx = zmq_ctx_new();
  if (!ctx) {
    int err = errno;
    GS_FAIL(e, GS_EIO, "zmq_ctx_new: %s", zmq_strerror(err));
    errno = err;
    return NULL;
  }
  if (io_threads > 0) zmq_ctx_set(ctx, ZMQ_IO_THREADS, io_threads);
  return ctx;
}

void gs_sock_context_end(void *ctx, gs_zap *zap) {
  /* waits for every socket's linger, and ends the ZAP handler's loop */
  if (ctx) zmq_ctx_term(ctx);
  gs_zap_join(zap);
}
