/* powersgd_recv.c: the ps server's side of --compress powersgd:R
 * (compress.h, Init.powersgd_rank). From the start step on, a rank pushes
 * each bucket in parts, not whole:
 *
 *   rank r                              server
 *   part 1 (uncompressed tensors) ---->  sum in rank order (server_reduce.c)
 *   part 2 (P = M Q)              ---->  sum in rank order
 *                                 <----  both sums, once every rank's are in
 *   orthogonalize P, Q = M^T P
 *   part 3 (Q)                    ---->  sum in rank order
 *                                 <----  Q's sum
 *   decode: its error feedback           rebuild the bucket's sum from the
 *                                        three (P orthogonalized as every
 *                                        rank did it), then the optimizer
 *                                 <----  the bucket's parameters (server.c)
 *
 * so the server reduces P and Q as DDP's all-reduce would, and still runs
 * the optimizer and sends parameters back dense, as DataParallel's master
 * does: PowerSGD shrinks the pushes, not the pull. A bucket without
 * compressed tensors has part 1 only. Parts travel copied (they are
 * small). Nothing a rank says is trusted: a part it should not send, of
 * the wrong size, twice, or Q before P's sum went out fails the job,
 * naming the rank, the step, the bucket and the part. A part pushed again
 * after a dropped connection fails it too: the exchange has state on both
 * sides and is not resumed. */
#include <stdlib.h>
#include <string.h>

#include "ps/server_core.h"

static const char *const part_name[] = {"?", "the uncompressed tensors", "P", "Q"};

int gs_pss_psgd_init(gs_ps_server *s, const Gradsync__Init *in, gs_err *e) {
  if (!in->powersgd_rank) return GS_OK;
  if (!s->cpu)
    return FAIL(s, e, GS_EINVAL, "ps server: --compress powersgd runs on the CPU; this server "
                "has %s kernels", s->k->name);
  size_t nt = in->n_tensor_offset;
  gs_compress_tensor *t = malloc((nt ? nt : 1) * sizeof *t);
  if (!t) return FAIL(s, e, GS_ENOMEM, "ps server: out of memory");
  for (size_t i = 0; i < nt; i++)
    t[i] = (gs_compress_tensor){.offset = in->tensor_offset[i], .rows = in->tensor_rows[i],
                                .cols = in->tensor_cols[i]};
  gs_compress c;
  gs_compress_default(&c);
  c.kind = GS_COMPRESS_POWERSGD;
  c.rank = (int)in->powersgd_rank;
  c.min_rate = in->powersgd_min_rate;
  c.start = (int64_t)in->powersgd_start;
  gs_err pe = {0};
  int rc = gs_powersgd_create(&c, s->k, t, (int)nt, s->nb, s->world, &s->psgd, &pe);
  free(t);
  if (rc < 0) return FAIL(s, e, rc, "ps server: rank 0's Init: %s", pe.msg);
  s->psgd_start = in->powersgd_start;
  size_t nb = (size_t)s->nb;
  s->psgd_n = calloc(nb * 3, sizeof *s->psgd_n);
  s->psgd_got = calloc((size_t)s->world * nb, 1);
  s->psgd_done = calloc(nb, 1);
  s->psgd_grad = malloc(s->n * sizeof *s->psgd_grad);
  for (int k = 0; k < 3; k++) s->psgd_off[k] = calloc(nb, sizeof *s->psgd_off[k]);
  if (!s->psgd_n || !s->psgd_got || !s->psgd_done || !s->psgd_grad || !s->psgd_off[0] ||
      !s->psgd_off[1] || !s->psgd_off[2])
    return FAIL(s, e, GS_ENOMEM, "ps server: out of memory for PowerSGD's sums");
  size_t total[3] = {0, 0, 0};
  for (int b = 0; b < s->nb; b++) {
    if (gs_powersgd_parts(s->psgd, b, s->off[b], s->cnt[b], &s->psgd_n[3 * b], &pe) < 0)
      return FAIL(s, e, GS_EPROTO, "ps server: rank 0's Init: bucket %d: %s", b, pe.msg);
    for (int k = 0; k < 3; k++) {
      s->psgd_off[k][b] = total[k];
      total[k] += s->psgd_n[3 * b + k];
    }
  }
  for (int k = 0; k < 3; k++) {
    size_t cnt[nb];
    for (size_t b = 0; b < nb; b++) cnt[b] = s->psgd_n[3 * b + k];
    gs_ps_reduce_cfg rc3 = {
      .k = s->k, .world = s->world, .nb = s->nb, .off = s->psgd_off[k], .cnt = cnt,
      .n = total[k] ? total[k] : 1, .wire = GS_F32, .inproc = s->o.inproc,
      .inproc_rank = s->o.inproc_rank, .span = s->o.span, .span_ctx = s->o.span_ctx};
    GS_TRY(gs_ps_reduce_create(&rc3, &s->psgd_red[k], e));
  }
  s->dev_bytes += s->n * sizeof(float);
  return GS_OK;
}

void gs_pss_psgd_free(gs_ps_server *s) {
  for (int k = 0; k < 3; k++) {
    gs_ps_reduce_destroy(s->psgd_red[k]);
    free(s->psgd_off[k]);
  }
  gs_powersgd_destroy(s->psgd);
  free(s->psgd_n);
  free(s->psgd_got);
  free(s->psgd_done);
  free(s->psgd_grad);
}

bool gs_pss_psgd_step(const gs_ps_server *s, uint64_t step) {
  return s->psgd && step >= s->psgd_start;
}

float *gs_pss_psgd_grad(gs_ps_server *s, int b) {
  return gs_pss_psgd_step(s, s->step) ? s->psgd_grad + s->off[b] : NULL;
}

void gs_pss_psgd_round(gs_ps_server *s) {
  if (!s->psgd) return;
  memset(s->psgd_got, 0, (size_t)s->world * (size_t)s->nb);
  memset(s->psgd_done, 0, (size_t)s->nb);
  for (int k = 0; k < 3; k++) gs_ps_reduce_round(s->psgd_red[k]);
}

/* The sum of part k of bucket b to every rank, copied. */
static int send_sum(gs_ps_server *s, int b, int k, gs_err *e) {
  size_t cnt = s->psgd_n[3 * b + k - 1];
  Gradsync__Envelope env;
  Gradsync__Params p = GRADSYNC__PARAMS__INIT;
  gs_wire_env(&env, s->o.job, GS_SERVER_RANK);
  p.step = s->step;
  p.bucket = (uint32_t)b;
  p.offset = s->off[b];
  p.count = cnt;
  p.part = (uint32_t)k;
  p.scale = s->u.scaler.scale;
  p.dtype = gs_wire_pbdtype(GS_F32);
  env.body_case = GRADSYNC__ENVELOPE__BODY_PARAMS;
  env.params = &p;
  const float *sum = gs_powersgd_part(s->psgd, b, k - 1);
  for (int r = 0; r < s->world; r++) {
    peer *pr = &s->peers[r];
    gs_err se = {0};
    int rc = gs_wire_send(s->sock, pr->id, pr->idlen, &env, sum, cnt * sizeof(float), NULL,
                          NULL, s->timeout_ms, pr->inproc ? NULL : &s->sent, &se);
    if (rc < 0)
      return FAIL(s, e, rc, "ps server: sending step %llu bucket %d's sum of %s to rank %d: %s",
                  (unsigned long long)s->step, b, part_name[k], r, se.msg);
  }
  return GS_OK;
}

int gs_pss_psgd_push(gs_ps_server *s, int r, gs_wire_msg *m, bool *done, gs_err *e) {
  const Gradsync__Push *p = m->env->push;
  int b = (int)p->bucket, k = (int)p->part;
  unsigned long long step = (unsigned long long)p->step;
  *done = false;
  if (!s->psgd)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed part %d of step %llu bucket %d; "
                "this job does not run PowerSGD", r, k, step, b);
  if (p->step < s->psgd_start)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed part %d of step %llu bucket %d; "
                "PowerSGD starts at step %llu (before, a bucket goes whole)", r, k, step, b,
                (unsigned long long)s->psgd_start);
  if (k == 0)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d whole; from "
                "step %llu on PowerSGD sends it in parts", r, step, b,
                (unsigned long long)s->psgd_start);
  unsigned have = gs_powersgd_part_bits(&s->psgd_n[3 * b]);
  if (k > 3 || !(have & (1u << k)))
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed part %d of step %llu bucket %d, "
                "which has no such part (parts 1 to 3, those with floats)", r, k, step, b);
  size_t cnt = s->psgd_n[3 * b + k - 1];
  gs_err pe = {0};
  if (p->offset != s->off[b] || p->count != cnt || gs_wire_dtype(p->dtype) != GS_F32 ||
      gs_wire_expect_payload(m, cnt, GS_F32, &pe) < 0)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d, step %llu bucket %d, %s: %llu floats at "
                "%llu in dtype %d; the part is %zu fp32 of the bucket at %zu%s%s", r, step, b,
                part_name[k], (unsigned long long)p->count, (unsigned long long)p->offset,
                (int)p->dtype, cnt, s->off[b], pe.msg[0] ? ": " : "", pe.msg);
  uint8_t *got = &s->psgd_got[(size_t)r * s->nb + b];
  if (*got & (1u << k))
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed %s of step %llu bucket %d %s", r,
                part_name[k], step, b, p->again ? "again after a dropped connection; a PowerSGD "
                "exchange is not resumed: run again" : "twice");
  unsigned first = have & 6u;
  if (k == 3 && (s->psgd_done[b] & first) != first)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed Q of step %llu bucket %d before the "
                "server sent the sums it is computed from", r, step, b);
  *got |= (uint8_t)(1u << k);
  bool summed = false;
  gs_err re = {0};
  if (gs_ps_reduce_push(s->psgd_red[k - 1], r, b, &m->payload, &summed, &s->reduce_s, &re) < 0)
    return FAIL(s, e, re.code, "%s (%s)", re.msg, part_name[k]);
  if ((*got & have) == have) { /* this rank's last part of the bucket */
    s->got[(size_t)r * s->nb + b] = 1;
    s->peers[r].pushed++;
  }
  if (!summed) return GS_OK;
  memcpy(gs_powersgd_part(s->psgd, b, k - 1), gs_ps_reduce_sum(s->psgd_red[k - 1], b),
         cnt * sizeof(float));
  gs_ps_reduce_release(s->psgd_red[k - 1], b);
  s->psgd_done[b] |= (uint8_t)(1u << k);
  if (k < 3 && (s->psgd_done[b] & first) == first)
    for (int j = 1; j <= 2; j++)
      if (have & (1u << j)) GS_TRY(send_sum(s, b, j, e));
  if (k == 3) GS_TRY(send_sum(s, b, 3, e));
  if ((s->psgd_done[b] & have) != have) return GS_OK;
  double t0 = gs_now();
  if (gs_powersgd_rebuild(s->psgd, b, s->psgd_grad, &pe) < 0)
    return FAIL(s, e, pe.code, "ps server: step %llu bucket %d, rebuilding it from P and Q: %s",
                step, b, pe.msg);
  s->reduce_s += gs_now() - t0;
  *done = true;
  return GS_OK;
}
