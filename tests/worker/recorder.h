/* recorder.h: a test backend that checks the trainer's side of sync.h.
 * It records when each bucket is handed over, snapshots the bucket's
 * gradients at that moment, and at end_step checks that (1) every bucket
 * came, once, in order 0, 1, 2..., (2) no gradient of a bucket changed
 * after it was handed over. It does not update parameters. */
#ifndef GS_TEST_RECORDER_H
#define GS_TEST_RECORDER_H

#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "worker/worker.h"

typedef struct recorder {
  gs_sync base;
  gs_sync_config c;
  float *snap;           /* gradients as they were at bucket_ready */
  int ready;             /* buckets so far this step */
  int steps;
  double t_first, t_last;  /* gs_now() of ready(0) and ready(last) in the last step */
  double t_end;            /* gs_now() at end_step */
  bool bad_order, changed;
} recorder;

static int rec_begin(gs_sync *s, int64_t step, gs_err *e) {
  ((recorder *)s)->ready = 0;
  return 0;
}

static int rec_ready(gs_sync *s, int b, gs_err *e) {
  recorder *r = (recorder *)s;
  if (b != r->ready) r->bad_order = true;
  r->ready++;
  const gs_bucket *bk = &r->c.buckets[b];
  memcpy(r->snap + bk->offset, r->c.grads + bk->offset, bk->count * sizeof(float));
  double now = gs_now();
  if (b == 0) r->t_first = now;
  r->t_last = now;
  return 0;
}

static int rec_end(gs_sync *s, gs_sync_stats *st, gs_err *e) {
  recorder *r = (recorder *)s;
  r->t_end = gs_now();
  if (r->ready != r->c.nbuckets) r->bad_order = true;
  if (memcmp(r->snap, r->c.grads, r->c.n * sizeof(float)) != 0) r->changed = true;
  r->steps++;
  *st = (gs_sync_stats){.scale = r->c.scaler.scale};
  return 0;
}

static int rec_close(gs_sync *s, bool ok, gs_err *e) {
  recorder *r = (recorder *)s;
  free(r->snap);
  free(r);
  return 0;
}

static const gs_sync_ops rec_ops = {rec_begin, rec_ready, rec_end, rec_close};

/* CPU kernels only: the snapshot reads gradients directly. */
static recorder *recorder_open(gs_trainer *t) {
  recorder *r = calloc(1, sizeof *r);
  r->base.ops = &rec_ops;
  r->base.name = "recorder";
  gs_trainer_sync_config(t, &r->c);
  r->snap = calloc(r->c.n, sizeof(float));
  return r;
}

#endif
