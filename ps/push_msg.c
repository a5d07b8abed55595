/* push_msg.c: one Push message from a ps worker to its server, as
 * client.c sends a bucket (zero-copy: a counter says what ZeroMQ still
 * holds, so end_step knows when backward may overwrite the gradients) and
 * powersgd_push.c sends a part of one (copied: its buffer takes the sum).
 * Below both, so neither calls the other to reach the wire. */
#include "ps/ps_internal.h"

static void release_count(void *data, void *hint) {
  (void)data;
  atomic_fetch_sub((atomic_int *)hint, 1);
}

/* part > 0: PowerSGD's part of count floats, copied (data is overwritten
 * by its sum); part 0: the bucket, zero-copy */
static int send_msg(ps_worker *s, int b, int part, size_t cnt, const void *data, size_t bytes,
                    bool again, gs_err *e) {
  Gradsync__Envelope env;
  Gradsync__Push p = GRADSYNC__PUSH__INIT;
  gs_wire_env(&env, s->c.job, (uint32_t)s->c.rank);
  p.step = (uint64_t)s->step;
  p.bucket = (uint32_t)b;
  p.offset = s->buckets[b].offset;
  p.count = cnt;
  p.dtype = gs_wire_pbdtype(part ? GS_F32 : s->c.wire);
  p.again = again;
  p.base_version = s->base;
  p.part = (uint32_t)part;
  if (s->stale) p.scale = s->base_scale;
  if (s->topk) p.kept = s->topk_kept[b];
  env.body_case = GRADSYNC__ENVELOPE__BODY_PUSH;
  env.push = &p;
  if (!part) atomic_fetch_add(&s->inflight, 1);
  gs_err we = {0};
  if (gs_wire_send(s->sock, NULL, 0, &env, data, bytes, part ? NULL : release_count,
                   part ? NULL : &s->inflight, s->wait_ms, s->inproc ? NULL : &s->sent, &we) < 0)
    return GS_FAIL(e, we.code, "ps rank %d: pushing step %lld bucket %d%s to %s (%s, %s): %s",
                   s->c.rank, (long long)s->step, b, part == 1 ? "'s uncompressed tensors"
                   : part == 2 ? "'s P" : part == 3 ? "'s Q" : "", s->who, s->server_ep,
                   s->where, we.msg);
  return GS_OK;
}

int gs_ps_send_push(ps_worker *s, int b, const void *data, bool again, gs_err *e) {
  size_t cnt = s->buckets[b].count;
  size_t bytes = s->topk ? gs_topk_bytes(s->topk_kept[b], cnt) : cnt * s->wsize;
  return send_msg(s, b, 0, cnt, data, bytes, again, e);
}

int gs_ps_send_part(ps_worker *s, int b, int part, const float *data, size_t count, gs_err *e) {
  return send_msg(s, b, part, count, data, count * sizeof(float), false, e);
}
