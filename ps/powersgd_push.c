/* powersgd_push.c: a ps worker's side of --compress powersgd:R
 * (powersgd_recv.c draws the exchange with the server). A bucket of a step
 * that compresses goes out as its first parts (the uncompressed tensors,
 * P); once their sums are back this rank computes Q from them and sends
 * it; once Q's sum is back it updates its error feedback. The parameters
 * come back whole afterwards, as for any push. The arithmetic is
 * compress/powersgd.c's; this file orders it around the messages. */
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"

static const char *const part_name[] = {"?", "the uncompressed tensors", "P", "Q"};

int gs_ps_psgd_open(ps_worker *s, gs_err *e) {
  const gs_sync_config *c = &s->c;
  if (c->compress.kind != GS_COMPRESS_POWERSGD) return GS_OK;
  gs_err pe = {0};
  if (gs_powersgd_create(&c->compress, c->k, c->tensors, c->ntensors, c->nbuckets, c->world,
                         &s->psgd, &pe) < 0)
    return GS_FAIL(e, pe.code, "ps rank %d: %s", c->rank, pe.msg);
  s->psgd_n = calloc((size_t)c->nbuckets * 3, sizeof *s->psgd_n);
  s->psgd_got = calloc((size_t)c->nbuckets, 1);
  if (!s->psgd_n || !s->psgd_got)
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  for (int b = 0; b < c->nbuckets; b++)
    if (gs_powersgd_parts(s->psgd, b, c->buckets[b].offset, c->buckets[b].count,
                          &s->psgd_n[3 * b], &pe) < 0)
      return GS_FAIL(e, pe.code, "ps rank %d, bucket %d: %s", c->rank, b, pe.msg);
  return GS_OK;
}

void gs_ps_psgd_free(ps_worker *s) {
  gs_powersgd_destroy(s->psgd);
  free(s->psgd_n);
  free(s->psgd_got);
}

static int send(ps_worker *s, int b, int k, gs_err *e) {
  size_t n = s->psgd_n[3 * b + k - 1];
  if (n == 0) return GS_OK;
  return gs_ps_send_part(s, b, k, gs_powersgd_part(s->psgd, b, k - 1), n, e);
}

int gs_ps_psgd_push(ps_worker *s, int b, gs_err *e) {
  gs_powersgd_stats st = {0};
  gs_err pe = {0};
  s->psgd_got[b] = 0;
  if (gs_powersgd_encode(s->psgd, b, s->c.grads, s->buckets[b].offset, s->buckets[b].count, &st,
                         &pe) < 0)
    return GS_FAIL(e, pe.code, "ps rank %d, step %lld bucket %d, PowerSGD: %s", s->c.rank,
                   (long long)s->step, b, pe.msg);
  s->psgd_s += st.compute_s;
  GS_TRY(send(s, b, 1, e));
  return send(s, b, 2, e);
}

/* what the sums received so far let this rank do */
static int advance(ps_worker *s, int b, int k, gs_err *e) {
  unsigned have = gs_powersgd_part_bits(&s->psgd_n[3 * b]), first = have & 6u;
  gs_powersgd_stats st = {0};
  gs_err pe = {0};
  int rc = GS_OK;
  if (k < 3 && (s->psgd_got[b] & first) == first) {
    rc = gs_powersgd_project(s->psgd, b, s->c.grads, &st, &pe);
    if (rc == GS_OK && (have & 8u)) rc = send(s, b, 3, e);
    else if (rc == GS_OK) rc = gs_powersgd_decode(s->psgd, b, s->c.grads, &st, &pe);
  } else if (k == 3) {
    rc = gs_powersgd_decode(s->psgd, b, s->c.grads, &st, &pe);
  }
  s->psgd_s += st.compute_s;
  if (rc < 0 && pe.code)
    return GS_FAIL(e, rc, "ps rank %d, step %lld bucket %d, PowerSGD: %s", s->c.rank,
                   (long long)s->step, b, pe.msg);
  return rc;
}

int gs_ps_psgd_sum(ps_worker *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Params *p = m->env->params;
  int r = s->c.rank, k = (int)p->part;
  if (!s->psgd || !gs_powersgd_active(s->psgd, s->step))
    return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: the ps server sent the sum of part %d "
                   "of a bucket; this step sends buckets whole", r, (long long)s->step, k);
  if (p->step != (uint64_t)s->step || p->bucket >= (uint32_t)s->c.nbuckets || k > 3 ||
      !s->pushed[p->bucket])
    return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: the ps server sent the sum of part %d "
                   "of step %llu bucket %u, which this rank did not push", r, (long long)s->step,
                   k, (unsigned long long)p->step, p->bucket);
  int b = (int)p->bucket;
  unsigned have = gs_powersgd_part_bits(&s->psgd_n[3 * b]);
  size_t n = s->psgd_n[3 * b + k - 1];
  gs_err pe = {0};
  if (!(have & (1u << k)) || (s->psgd_got[b] & (1u << k)) || (k == 3 && !(s->psgd_got[b] & 4u)) ||
      p->offset != s->buckets[b].offset || p->count != n || gs_wire_dtype(p->dtype) != GS_F32 ||
      gs_wire_expect_payload(m, n, GS_F32, &pe) < 0)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld bucket %d: the ps server's sum of %s "
                   "(%llu floats) is not one this rank waits for (%zu fp32, once, Q after P) %s",
                   r, (long long)s->step, b, part_name[k], (unsigned long long)p->count, n,
                   pe.msg);
  /* the payload may sit at any offset of ZeroMQ's buffer: copied, not read as floats */
  memcpy(gs_powersgd_part(s->psgd, b, k - 1), zmq_msg_data(&m->payload), n * sizeof(float));
  s->psgd_got[b] |= (uint8_t)(1u << k);
  if (!s->inproc) s->recv += m->bytes;
  return advance(s, b, k, e);
}
