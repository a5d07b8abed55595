/* test_device.c: the ps device paths (workers stage gradients in
 * pinned host buffers, the master uploads, reduces and updates on its
 * device), run on fakedev, a fake GPU that checks every pointer.
 *
 * Every rank and the in-process server compute on fakedev; the results
 * must be the reference bits (the arithmetic underneath is the CPU's), no
 * op may have received a pointer of the wrong kind (host vs device), and
 * rank 0 must report the server's device and host buffers. */
#include <string.h>

#include "fakedev.h"
#include "ps_harness.h"
#include "ps/server.h"

static int baseline;  /* violations of the checker's self-test */

static void run(job_opts *o, const char *what) {
  job_result *r = result_new(o);
  int rc = run_threads(o, r);
  for (int i = 0; i < o->world; i++) REQUIRE(r->rc[i] == 0, "%s: rank %d: %s", what, i, r->err[i]);
  REQUIRE(rc == 0, "%s", what);
  bool sk[16];
  float sc[16];
  REQUIRE(o->steps <= 16, "%s: at most 16 steps", what);
  float *ref = check_reference(o, r, what, sk, sc);
  for (int s = 0; s < o->steps; s++)
    REQUIRE(r->stats[(size_t)s * o->world + 1].skipped == sk[s], "%s: step %d verdict", what, s);
  REQUIRE(fakedev_violations() == baseline, "%s: %d ops got a pointer of the wrong kind", what,
        fakedev_violations() - baseline);
  if (!o->dedicated) {
    double S = (double)o->n * sizeof(float);
    /* the server: master, accumulator, momentum (not in sum_only), all
     * fp32, and one push on the device; a host mirror of what goes out */
    REQUIRE(r->mem_dev[0] >= (o->sum_only ? 2 : 3) * S && r->mem_host[0] >= S,
          "%s: rank 0 reports %llu device / %llu host bytes", what,
          (unsigned long long)r->mem_dev[0], (unsigned long long)r->mem_host[0]);
    /* a worker: a pinned staging buffer in the wire dtype (and a device
     * one when it converts) */
    double ws = o->n * (o->wire == GS_F32 ? 4.0 : 2.0);
    REQUIRE(r->mem_host[1] == ws && r->mem_dev[1] == (o->wire == GS_F32 ? 0 : ws),
          "%s: worker staging %llu host / %llu device bytes", what,
          (unsigned long long)r->mem_host[1], (unsigned long long)r->mem_dev[1]);
    printf("  %s: rank 0 holds %.1f MB on the device and %.1f MB on the host for the server; "
           "a worker %.1f MB pinned\n", what, r->mem_dev[0] / 1e6, r->mem_host[0] / 1e6,
           r->mem_host[1] / 1e6);
  }
  free(ref);
  result_free(r);
  printf("ok: %s\n", what);
}

int main(void) {
  /* the checker itself catches a host pointer passed to a device op */
  gs_err e = {0};
  gs_kernels *k = fakedev_create(&e);
  float host[4] = {0};
  float *dev = k->alloc(k, sizeof host);
  k->add(k, 4, dev, host);
  REQUIRE(k->sync(k, &e) == GS_EDEVICE && strstr(e.msg, "add"), "fakedev missed a host pointer");
  int base = fakedev_violations();
  k->release(k, dev);
  k->destroy(k);
  REQUIRE(base == 1, "violations %d", base);
  baseline = base;
  /* from here on, count only the ps code's (the in-process server runs on
   * the fake device too: its table is a clone of rank 0's) */

  job_opts o;
  job_defaults(&o);
  o.fake_device = true;
  o.world = 3;
  o.n = 50000;
  o.bucket_elems = 12000;
  o.steps = 3;
  o.overlap = true;
  o.jitter_us = 500;
  run(&o, "fp32 training on the device");
  o.wire = GS_F16;
  o.grad_scale = 1e-3f;
  gs_scaler_init(&o.scaler, 65536.0f, true);
  o.inf_rank = 2;
  o.inf_step = 1;
  run(&o, "fp16 pushes, overflow in step 1, on the device");
  job_defaults(&o);
  o.fake_device = true;
  o.world = 2;
  o.sum_only = true;
  o.wire = GS_BF16;
  run(&o, "bf16 sum_only on the device");
  /* a dedicated server reduces on the CPU; the workers stage on the device */
  o.dedicated = true;
  o.wire = GS_F32;
  run(&o, "workers on the device, dedicated CPU server");
  return 0;
}
