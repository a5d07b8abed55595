/* server_reduce.c: the ps server's reduction in rank order (see server_reduce.h). */
#include "ps/server_reduce.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* smaller pushes are cheap to copy, and ZeroMQ may pack them at any
 * offset of its shared receive buffer */
#define ADOPT_MIN (64u << 10)

struct gs_ps_reduce {
  gs_ps_reduce_cfg c;
  size_t *off, *cnt;
  bool cpu;
  int *next;                  /* [nb] next rank to add */
  zmq_msg_t *held;            /* [world * nb] pushes waiting for their turn */
  uint8_t *has_held;
  float **sum;                /* [nb] bucket b's sum: acc + off, or an adopted push */
  zmq_msg_t *summsg;          /* [nb] adopted first pushes */
  uint8_t *has_sum;
  float *acc;                 /* only once a push cannot be adopted */
  void *stage;                /* one push on the device (devices only) */
  size_t maxcnt;
  _Atomic uint64_t dev_bytes, held_bytes, held_peak;
};

static void *dev_alloc(gs_ps_reduce *r, size_t bytes, gs_err *e) {
  void *p = r->c.k->alloc(r->c.k, bytes);
  if (!p) {
    r->c.k->sync(r->c.k, NULL);
    GS_FAIL(e, GS_ENOMEM, "ps server: cannot allocate %zu bytes on %s for the reduction", bytes,
            r->c.k->name);
    return NULL;
  }
  atomic_fetch_add(&r->dev_bytes, bytes);
  return p;
}

int gs_ps_reduce_create(const gs_ps_reduce_cfg *c, gs_ps_reduce **out, gs_err *e) {
  *out = NULL;
  gs_ps_reduce *r = calloc(1, sizeof *r);
  if (!r) return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory");
  r->c = *c;
  r->cpu = c->k->device == GS_DEV_CPU;
  size_t w = (size_t)c->world, nb = (size_t)c->nb;
  r->off = malloc(nb * sizeof *r->off);
  r->cnt = malloc(nb * sizeof *r->cnt);
  r->next = calloc(nb, sizeof *r->next);
  r->held = calloc(w * nb, sizeof *r->held);
  r->has_held = calloc(w * nb, 1);
  r->sum = calloc(nb, sizeof *r->sum);
  r->summsg = calloc(nb, sizeof *r->summsg);
  r->has_sum = calloc(nb, 1);
  if (!r->off || !r->cnt || !r->next || !r->held || !r->has_held || !r->sum || !r->summsg ||
      !r->has_sum) {
    gs_ps_reduce_destroy(r);
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory for %d ranks x %d buckets",
                   c->world, c->nb);
  }
  memcpy(r->off, c->off, nb * sizeof *r->off);
  memcpy(r->cnt, c->cnt, nb * sizeof *r->cnt);
  r->c.off = r->off;
  r->c.cnt = r->cnt;
  for (size_t b = 0; b < nb; b++)
    if (r->cnt[b] > r->maxcnt) r->maxcnt = r->cnt[b];
  /* the accumulator is needed at once where nothing can be adopted */
  int rc = GS_OK;
  if ((!r->cpu || c->wire != GS_F32) && !(r->acc = dev_alloc(r, c->n * sizeof(float), e)))
    rc = GS_ENOMEM;
  if (rc == GS_OK && !r->cpu &&
      !(r->stage = dev_alloc(r, r->maxcnt * gs_dtype_size(c->wire), e)))
    rc = GS_ENOMEM;
  if (rc < 0) {
    gs_ps_reduce_destroy(r);
    return rc;
  }
  *out = r;
  return GS_OK;
}

void gs_ps_reduce_destroy(gs_ps_reduce *r) {
  if (!r) return;
  size_t all = (size_t)r->c.world * (size_t)r->c.nb;
  for (size_t i = 0; r->has_held && i < all; i++)
    if (r->has_held[i]) zmq_msg_close(&r->held[i]);
  for (int b = 0; r->has_sum && b < r->c.nb; b++)
    if (r->has_sum[b]) zmq_msg_close(&r->summsg[b]);
  if (r->acc) r->c.k->release(r->c.k, r->acc);
  if (r->stage) r->c.k->release(r->c.k, r->stage);
  free(r->off);
  free(r->cnt);
  free(r->next);
  free(r->held);
  free(r->has_held);
  free(r->sum);
  free(r->summsg);
  free(r->has_sum);
  free(r);
}

static void hold(gs_ps_reduce *r, size_t bytes) {
  uint64_t now = atomic_fetch_add(&r->held_bytes, bytes) + bytes;
  if (now > atomic_load(&r->held_peak)) atomic_store(&r->held_peak, now);
}

void gs_ps_reduce_release(gs_ps_reduce *r, int b) {
  if (!r->has_sum[b]) return;
  atomic_fetch_sub(&r->held_bytes, zmq_msg_size(&r->summsg[b]));
  zmq_msg_close(&r->summsg[b]);
  r->has_sum[b] = 0;
}

/* Whether a push can become the sum itself: ZeroMQ received it into a
 * buffer of its own (not a rank's gradient buffer handed over inproc, not
 * a slice of ZeroMQ's shared buffer for small messages), fp32, on the CPU.
 * The sum is read as floats, so it must be aligned for them. */
static bool adoptable(const gs_ps_reduce *r, int rank, zmq_msg_t *msg) {
  return r->cpu && r->c.wire == GS_F32 && !(r->c.inproc && rank == r->c.inproc_rank) &&
         zmq_msg_size(msg) >= ADOPT_MIN && (uintptr_t)zmq_msg_data(msg) % sizeof(float) == 0;
}

/* The push's bytes where the kernels can read them: as received on the
 * CPU (the kernels take any byte address), staged on a device. */
static const void *readable(gs_ps_reduce *r, zmq_msg_t *msg) {
  if (r->cpu) return zmq_msg_data(msg);
  r->c.k->to_device(r->c.k, r->stage, zmq_msg_data(msg), zmq_msg_size(msg));
  return r->stage;
}

static int kcheck(gs_ps_reduce *r, const char *what, gs_err *e) {
  gs_err ke = {0};
  if (r->c.k->sync(r->c.k, &ke) < 0)
    return GS_FAIL(e, ke.code, "ps server (%s kernels), %s: %s", r->c.k->name, what, ke.msg);
  return GS_OK;
}

/* sum[b] += push (fp32 accumulation of any wire dtype). */
static int add_push(gs_ps_reduce *r, int b, zmq_msg_t *msg, gs_err *e) {
  gs_kernels *k = r->c.k;
  const void *src = readable(r, msg);
  if (r->c.wire == GS_F32) k->add(k, r->cnt[b], r->sum[b], src);
  else k->add_lp(k, r->c.wire, r->cnt[b], r->sum[b], src);
  return kcheck(r, "adding a push", e);
}

/* Start bucket b's sum from rank `base`'s push, then add `other`'s (or
 * nothing). The first push is adopted when it can be; otherwise the
 * accumulator takes a copy of it. */
static int start_sum(gs_ps_reduce *r, int b, int base, zmq_msg_t *bmsg, zmq_msg_t *omsg,
                     gs_err *e) {
  gs_kernels *k = r->c.k;
  gs_ps_reduce_release(r, b);
  if (adoptable(r, base, bmsg)) {
    zmq_msg_init(&r->summsg[b]);
    zmq_msg_move(&r->summsg[b], bmsg);
    r->has_sum[b] = 1;
    r->sum[b] = zmq_msg_data(&r->summsg[b]); /* its bytes were counted when held */
  } else {
    if (!r->acc && !(r->acc = dev_alloc(r, r->c.n * sizeof(float), e))) return GS_ENOMEM;
    r->sum[b] = r->acc + r->off[b];
    const void *src = readable(r, bmsg);
    if (r->c.wire == GS_F32) k->copy(k, r->sum[b], src, r->cnt[b] * sizeof(float));
    else k->convert(k, GS_F32, r->sum[b], r->c.wire, src, r->cnt[b]);
    GS_TRY(kcheck(r, "starting a sum", e));
  }
  return omsg ? add_push(r, b, omsg, e) : GS_OK;
}

static void unpark(gs_ps_reduce *r, size_t i) {
  atomic_fetch_sub(&r->held_bytes, zmq_msg_size(&r->held[i]));
  zmq_msg_close(&r->held[i]);
  r->has_held[i] = 0;
}

int gs_ps_reduce_push(gs_ps_reduce *r, int rank, int b, zmq_msg_t *msg, bool *done,
                      double *reduce_s, gs_err *e) {
  size_t nb = (size_t)r->c.nb, slot = (size_t)rank * nb + (size_t)b;
  *done = false;
  if (rank < 0 || rank >= r->c.world || b < 0 || b >= r->c.nb || r->has_held[slot] ||
      rank < r->next[b])
    return GS_FAIL(e, GS_EPROTO, "ps server: a second push of bucket %d from rank %d in one "
                   "round", b, rank);
  zmq_msg_init(&r->held[slot]);
  zmq_msg_move(&r->held[slot], msg);
  r->has_held[slot] = 1;
  hold(r, zmq_msg_size(&r->held[slot]));
  /* add what rank order allows */
  while (r->next[b] < r->c.world) {
    int q = r->next[b];
    double t0 = gs_now();
    int rc;
    if (q == 0) {
      if (!r->has_held[b]) return GS_OK;
      if (r->c.pair_start) {
        if (!r->has_held[nb + b]) return GS_OK;
        rc = start_sum(r, b, 1, &r->held[nb + b], &r->held[b], e);
        unpark(r, nb + b);
        r->next[b] = 1;
      } else {
        rc = start_sum(r, b, 0, &r->held[b], NULL, e);
      }
      unpark(r, b);
    } else {
      size_t i = (size_t)q * nb + (size_t)b;
      if (!r->has_held[i]) return GS_OK;
      rc = add_push(r, b, &r->held[i], e);
      unpark(r, i);
    }
    if (rc < 0) return rc;
    r->next[b]++;
    double t1 = gs_now();
    if (reduce_s) *reduce_s += t1 - t0;
    if (r->c.span) r->c.span(r->c.span_ctx, "reduce", b, t0, t1, 1);
  }
  *done = true;
  return GS_OK;
}

float *gs_ps_reduce_sum(gs_ps_reduce *r, int b) { return r->sum[b]; }

void gs_ps_reduce_round(gs_ps_reduce *r) {
  for (int b = 0; b < r->c.nb; b++) r->next[b] = 0;
}

void gs_ps_reduce_bytes(gs_ps_reduce *r, uint64_t *device, uint64_t *held_peak) {
  if (device) *device = atomic_load(&r->dev_bytes);
  if (held_peak) *held_peak = atomic_load(&r->held_peak);
}
