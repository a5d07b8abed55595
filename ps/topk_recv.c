/* topk_recv.c: the ps server's side of sparse pushes (--compress
 * topk:FRACTION, Init.topk): a push of a topk job is checked (it is sparse,
 * its entry count is the server's own count for the bucket, its size what
 * compress.h's gs_topk_bytes says, its indices in the bucket and strictly
 * increasing) and made dense in a ZeroMQ message of the server's that takes the push's
 * place. The reduction (server_reduce.c) then sums it in rank order like any dense
 * push: the sum has the bits of dense pushes of the same values, zeros
 * where a rank sent nothing. Nothing the peer says is trusted. */
#include <string.h>

#include "ps/server_core.h"

int gs_pss_topk_dense(gs_ps_server *s, int r, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Push *p = m->env->push;
  int b = (int)p->bucket;
  size_t cnt = s->cnt[b];
  if (!(s->topk > 0))
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d sparse (%llu "
                "entries); this job's pushes are dense (no --compress topk)", r,
                (unsigned long long)p->step, b, (unsigned long long)p->kept);
  size_t k = gs_topk_count(s->topk, cnt);
  if (p->kept != k)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d with %llu kept "
                "entries; topk:%g keeps %zu of the bucket's %zu", r,
                (unsigned long long)p->step, b, (unsigned long long)p->kept, s->topk, k, cnt);
  zmq_msg_t dense;
  if (zmq_msg_init_size(&dense, cnt * sizeof(float)) < 0)
    return FAIL(s, e, GS_ENOMEM, "ps server: out of memory for rank %d's bucket %d", r, b);
  gs_err pe = {0};
  size_t got = m->has_payload ? zmq_msg_size(&m->payload) : 0;
  const void *data = m->has_payload ? zmq_msg_data(&m->payload) : NULL;
  if (gs_topk_unpack(data, got, k, cnt, zmq_msg_data(&dense), &pe) < 0) {
    zmq_msg_close(&dense);
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d, step %llu bucket %d: %s", r,
                (unsigned long long)p->step, b, pe.msg);
  }
  if (m->has_payload) zmq_msg_close(&m->payload);
  else m->has_payload = true;
  zmq_msg_init(&m->payload);
  zmq_msg_move(&m->payload, &dense);
  zmq_msg_close(&dense);
  return GS_OK;
}
