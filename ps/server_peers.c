/* server_peers.c: what the ps server's files share (server_core.h):
 * the peers' routing identities, warnings about dropped messages (a few,
 * then quiet), the errors sent to one worker or to every one when the job
 * fails, the kernels' sticky error as such a failure, and the count of
 * bytes the server allocated and of messages ZeroMQ still holds. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ps/server_core.h"

void gs_pss_release_count(void *data, void *hint) {
  (void)data;
  atomic_fetch_sub((atomic_int *)hint, 1);
}

void gs_pss_warn(gs_ps_server *s, const char *fmt, ...) {
  if (++s->warnings > WARN_MAX) return;
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "gradsync ps server: warning: %s%s\n", msg,
          s->warnings == WARN_MAX ? " (further warnings suppressed)" : "");
}

/* Tell one worker why the job stops (best effort, 100 ms). */
void gs_pss_send_error(gs_ps_server *s, const peer *p, const gs_err *e) {
  Gradsync__Envelope env;
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  gs_wire_env(&env, s->o.job, GS_SERVER_RANK);
  er.phase = (char *)"ps server";
  er.message = (char *)e->msg;
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &er;
  gs_err ignore = {0};
  gs_wire_send(s->sock, p->id, p->idlen, &env, NULL, 0, NULL, NULL, 100, NULL, &ignore);
}

/* Tell every registered worker why the job stops (once, best effort: a
 * dead peer is unreachable and that is fine). */
void gs_pss_broadcast_error(gs_ps_server *s, const gs_err *e) {
  if (s->failed) return;
  s->failed = true;
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].known) gs_pss_send_error(s, &s->peers[r], e);
}


int gs_pss_find_peer(const gs_ps_server *s, const zmq_msg_t *id) {
  size_t len = zmq_msg_size((zmq_msg_t *)id);
  const void *d = zmq_msg_data((zmq_msg_t *)id);
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].known && s->peers[r].idlen == len && memcmp(s->peers[r].id, d, len) == 0)
      return r;
  return -1;
}

bool gs_pss_id_fits(const gs_wire_msg *m) {
  return !m->has_id || zmq_msg_size((zmq_msg_t *)&m->id) <= sizeof(((peer *)0)->id);
}

void gs_pss_set_id(uint8_t *dst, size_t *dlen, const zmq_msg_t *id) {
  size_t len = zmq_msg_size((zmq_msg_t *)id);
  if (len > sizeof(((peer *)0)->id)) len = sizeof(((peer *)0)->id);
  memcpy(dst, zmq_msg_data((zmq_msg_t *)id), len);
  *dlen = len;
}

int gs_pss_kernel_check(gs_ps_server *s, const char *what, gs_err *e) {
  gs_err ke = {0};
  if (s->k->sync(s->k, &ke) < 0)
    return FAIL(s, e, ke.code, "ps server (%s kernels), %s: %s", s->k->name, what, ke.msg);
  return GS_OK;
}


void *gs_pss_dev_alloc(gs_ps_server *s, size_t bytes) {
  void *p = s->k->alloc(s->k, bytes);
  if (p) atomic_fetch_add(&s->dev_bytes, bytes);
  return p;
}
