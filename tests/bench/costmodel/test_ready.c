/* test_ready.c: when gradients are ready (bench/costmodel/readiness.c) and
 * where the cost model gets it from.
 *  - from layer work: each tensor is ready once backward has done its work
 *    and that of every tensor after it; nonsense is refused;
 *  - a plan knows, per bucket, the tensor that completes it, and gives the
 *    bucket that tensor's readiness; a readiness of another model (another
 *    tensor count) is refused naming both counts;
 *  - VGG-16's plan with 64 MiB buckets: by its layers' work the 411 MB fc6
 *    bucket is ready within 1% of backward (by bytes: 89%), and the ring at
 *    128 ranks on 25 Gbit/s projects a higher efficiency for it;
 *  - a calibration's per-tensor readiness goes out to JSON and comes back,
 *    and a growing or out-of-range one is refused naming the field;
 *  - timing an mlp's backward per tensor gives one fraction per tensor, the
 *    first layer's gradient last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"
#include "worker/sync.h"

static void from_work(void) {
  const double macs[4] = {1, 2, 3, 4};
  double r[4];
  gs_err e = {0};
  CHECK_OK(gs_cm_ready_from_macs(macs, 4, r, &e), &e);
  CHECK(mt_near(r[3], 0.4, 1e-12) && mt_near(r[2], 0.7, 1e-12) && mt_near(r[1], 0.9, 1e-12) &&
        r[0] == 1.0, "%g %g %g %g", r[0], r[1], r[2], r[3]);
  CHECK_OK(gs_cm_ready_check(r, 4, "t", &e), &e);
  const double zero[2] = {0, 0}, neg[2] = {1, -1};
  CHECK(gs_cm_ready_from_macs(zero, 2, r, &e) == GS_EINVAL && strstr(e.msg, "no work"));
  gs_err_clear(&e);
  CHECK(gs_cm_ready_from_macs(neg, 2, r, &e) == GS_EINVAL && strstr(e.msg, "tensor 1"));
  const double grows[3] = {1, 0.2, 0.5}, big[2] = {1.5, 0};
  gs_err_clear(&e);
  CHECK(gs_cm_ready_check(grows, 3, "t", &e) == GS_EINVAL && strstr(e.msg, "tensor 2"),
        "%s", e.msg);
  gs_err_clear(&e);
  CHECK(gs_cm_ready_check(big, 2, "t", &e) == GS_EINVAL && strstr(e.msg, "[0, 1]"));
}

static void plan_buckets(void) {
  size_t sizes[6] = {300000, 20, 9000000, 500, 4000000, 10};
  gs_cm_plan p;
  gs_err e = {0};
  CHECK_OK(gs_cm_plan_from_sizes(sizes, 6, 4, 1, 25, &p, &e), &e);
  gs_bucket *b = NULL;
  int nb = 0;
  CHECK_OK(gs_plan_buckets(sizes, 6, 4, 1 << 20, 25 << 20, &b, &nb, &e), &e);
  CHECK(p.ntensors == 6 && p.first_tensor && p.nbuckets == nb && nb >= 2);
  for (int i = 0; p.first_tensor && i < nb; i++) {
    size_t off = 0;
    for (int t = 0; t < p.first_tensor[i]; t++) off += sizes[t];
    CHECK(off == b[i].offset, "bucket %d starts at %zu, its first tensor %d at %zu", i,
          b[i].offset, p.first_tensor[i], off);
  }
  const double tr[6] = {1, 0.9, 0.8, 0.3, 0.2, 0.1};
  double br[8];
  CHECK_OK(gs_cm_plan_ready(&p, tr, 6, br, &e), &e);
  for (int i = 0; p.first_tensor && i < nb; i++) CHECK(br[i] == tr[p.first_tensor[i]]);
  CHECK(br[nb - 1] == 1.0);
  gs_err_clear(&e);
  CHECK(gs_cm_plan_ready(&p, tr, 5, br, &e) == GS_EINVAL && strstr(e.msg, "5 tensors") &&
        strstr(e.msg, "has 6"), "%s", e.msg);
  free(b);
  gs_cm_plan_free(&p);
  CHECK(p.first_tensor == NULL && p.tensor_macs == NULL);
  /* a plan that does not know its tensors */
  size_t bytes[2] = {100, 200};
  gs_cm_plan bare = mt_plan(bytes, 2);
  gs_err_clear(&e);
  CHECK(gs_cm_plan_ready(&bare, tr, 6, br, &e) == GS_EINVAL && strstr(e.msg, "tensors"));
}

static void vgg16(void) {
  gs_cm_plan p;
  gs_err e = {0};
  CHECK_OK(gs_cm_plan_model("vgg16", GS_F32, 64, 64, &p, &e), &e);
  if (e.code) return;
  CHECK(p.nbuckets == 3 && p.ntensors == 32 && p.tensor_macs, "%d buckets, %d tensors",
        p.nbuckets, p.ntensors);
  double tr[32], layers[3], bytes[3];
  CHECK_OK(gs_cm_ready_from_macs(p.tensor_macs, p.ntensors, tr, &e), &e);
  CHECK_OK(gs_cm_plan_ready(&p, tr, p.ntensors, layers, &e), &e);
  double cum = 0;
  for (int b = 0; b < 3; b++) bytes[b] = (cum += (double)p.bytes[b]) / p.total;
  printf("vgg16, 64 MiB buckets: ready by layers %.4f %.4f %.4f, by bytes %.3f %.3f %.3f\n",
         layers[0], layers[1], layers[2], bytes[0], bytes[1], bytes[2]);
  CHECK(layers[1] < 0.01 && bytes[1] > 0.85, "fc6's bucket: %g by layers, %g by bytes",
        layers[1], bytes[1]);
  CHECK(layers[2] == 1.0);
  /* Horovod's cluster, roughly: 4 per host, 25 Gbit/s, batch 64 */
  gs_cm_machine m = mt_machine();
  m.link_Bps = 25e9 / 8;
  m.link_latency_s = 3e-6;
  m.alpha_s = 5e-6;
  m.local_Bps = 1e10;
  m.reduce_Bps = 2.5e11;
  m.copy_Bps = 3e11;
  m.optim_pps = 2e10;
  gs_cm_job j = {.mode = GS_CM_RING, .world = 128, .hosts = 32, .plan = &p, .batch = 64,
                 .fwd_s = 2.16e-3, .bwd_s = 4.33e-3, .overlap = true};
  gs_cm_result by_bytes, by_layers;
  CHECK_OK(gs_cm_predict(&m, &j, &by_bytes, &e), &e);
  j.ready = layers;
  CHECK_OK(gs_cm_predict(&m, &j, &by_layers, &e), &e);
  printf("ring, 128 ranks: efficiency %.2f by bytes, %.2f by layers\n", by_bytes.efficiency,
         by_layers.efficiency);
  CHECK(by_layers.exposed_s < 0.5 * by_bytes.exposed_s && by_layers.step_s < by_bytes.step_s);
  gs_cm_plan_free(&p);
}

static gs_cm_calib calib(void) {
  gs_cm_calib c = {.alpha_s = 2e-5, .local_Bps = 3e9, .reduce_Bps = 8e9, .copy_Bps = 1e10,
                   .optim_pps = 1e9, .fwd_s = 0.01, .bwd_s = 0.02};
  snprintf(c.transport, sizeof c.transport, "zmq-tcp-loopback");
  snprintf(c.model, sizeof c.model, "mlp:4-3-2");
  snprintf(c.precision, sizeof c.precision, "fp32");
  return c;
}

static void calib_json(void) {
  gs_cm_calib c = calib(), back;
  gs_err e = {0};
  const double r[4] = {1, 0.75, 0.5, 0.125};
  memcpy(c.ready, r, sizeof r);
  c.nready = 4;
  json_t *j = gs_cm_calib_json(&c);
  CHECK_OK(gs_cm_calib_from_json(j, "t.json", &back, &e), &e);
  CHECK(back.nready == 4 && !memcmp(back.ready, r, sizeof r));
  json_decref(j);
  /* without the array: none */
  c.nready = 0;
  j = gs_cm_calib_json(&c);
  CHECK(!json_object_get(json_object_get(j, "compute"), "ready_fraction"));
  CHECK_OK(gs_cm_calib_from_json(j, "t.json", &back, &e), &e);
  CHECK(back.nready == 0);
  /* growing, out of range, not numbers, empty */
  json_t *comp = json_object_get(j, "compute");
  json_object_set_new(comp, "ready_fraction", json_pack("[f, f]", 0.5, 0.9));
  gs_err_clear(&e);
  CHECK(gs_cm_calib_from_json(j, "t.json", &back, &e) == GS_EINVAL &&
        strstr(e.msg, "compute.ready_fraction") && strstr(e.msg, "tensor 1"), "%s", e.msg);
  json_object_set_new(comp, "ready_fraction", json_pack("[f, f]", 1.0, -0.1));
  gs_err_clear(&e);
  CHECK(gs_cm_calib_from_json(j, "t.json", &back, &e) == GS_EINVAL && strstr(e.msg, "[0, 1]"));
  json_object_set_new(comp, "ready_fraction", json_pack("[f, s]", 1.0, "x"));
  gs_err_clear(&e);
  CHECK(gs_cm_calib_from_json(j, "t.json", &back, &e) == GS_EINVAL &&
        strstr(e.msg, "ready_fraction[1]"));
  json_object_set_new(comp, "ready_fraction", json_array());
  gs_err_clear(&e);
  CHECK(gs_cm_calib_from_json(j, "t.json", &back, &e) == GS_EINVAL &&
        strstr(e.msg, "one per tensor"));
  json_decref(j);
}

static void timed(void) {
  gs_cm_measure_cfg mc;
  memset(&mc, 0, sizeof mc);
  gs_train_opts_default(&mc.train);
  mc.train.model = "mlp:64-256-256-10";
  mc.train.batch = 32;
  mc.threads = 1;
  gs_cm_calib c;
  memset(&c, 0, sizeof c);
  gs_calib_notes n;
  gs_err e = {0};
  CHECK_OK(gs_calibrate_compute(&mc, &c, &n, &e), &e);
  CHECK(c.nready == 6, "%d tensors timed", c.nready);
  if (c.nready != 6) return;
  CHECK_OK(gs_cm_ready_check(c.ready, c.nready, "timed", &e), &e);
  printf("mlp:64-256-256-10 backward, per tensor:");
  for (int i = 0; i < 6; i++) printf(" %.3f", c.ready[i]);
  printf("\n");
  CHECK(c.ready[0] > c.ready[5], "fc1.weight at %g, fc3.bias at %g", c.ready[0], c.ready[5]);
  CHECK(c.fwd_s > 0 && c.bwd_s > 0 && !strcmp(c.model, "mlp:64-256-256-10"));
}

int main(void) {
  from_work();
  plan_buckets();
  vgg16();
  calib_json();
  timed();
  return check_done("model_ready");
}
