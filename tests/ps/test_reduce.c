/* test_reduce.c: the ps server's reduction (ps/server_reduce.h) without sockets.
 *
 * Pushes are plain zmq_msg_t built here; each scenario hands them over in
 * many random arrival orders and checks that every bucket's sum is
 * complete exactly when the last rank's push is in, that it has the bits
 * of the sum in rank order (0 + 1 + ... + N-1, in float, as one process
 * would add), that the first push was adopted where it can be (large fp32
 * pushes: the sum is the message's own buffer) and copied where it cannot
 * (small ones, fp16, rank 0's own buffer handed over inproc), that a
 * second push of a bucket in one round is refused, and that every held
 * byte is returned. */
#include <string.h>
#include <zmq.h>

#include "ps_harness.h"
#include "kernels/elem.h"
#include "ps/server_reduce.h"

#define W 4
#define NB 3

static float value(int rank, size_t i) {
  /* values whose sums depend on the order (rounding), so order bugs show */
  return (float)((int)((i * 2654435761u + (size_t)rank * 40503u) % 2001) - 1000) * 1.37e-3f *
         (float)(rank + 1);
}

/* one push: cnt elements of bucket [off, off + cnt) in the wire dtype, in
 * a buffer of its own (as ZeroMQ hands over a large received message) */
static void make_push(zmq_msg_t *m, int rank, size_t off, size_t cnt, gs_dtype wire) {
  size_t es = gs_dtype_size(wire);
  REQUIRE(zmq_msg_init_size(m, cnt * es) == 0, "zmq_msg_init_size");
  char *d = zmq_msg_data(m);
  for (size_t i = 0; i < cnt; i++) {
    float v = value(rank, off + i);
    if (wire == GS_F16) gs_store_u16(d, i, gs_f32_to_f16(v));
    else gs_store_f32(d, i, v);
  }
}

static float widened(int rank, size_t i, gs_dtype wire) {
  float v = value(rank, i);
  return wire == GS_F16 ? gs_f16_to_f32(gs_f32_to_f16(v)) : v;
}

static void scenario(const char *name, const size_t *off, const size_t *cnt, size_t n,
                     gs_dtype wire, bool inproc0, bool pair_start, int rounds, uint64_t seed) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  REQUIRE(k, "%s: kernels: %s", name, e.msg);
  gs_ps_reduce_cfg c = {.k = k, .world = W, .nb = NB, .off = off, .cnt = cnt, .n = n,
                        .wire = wire, .inproc = inproc0, .pair_start = pair_start};
  gs_ps_reduce *r = NULL;
  REQUIRE(gs_ps_reduce_create(&c, &r, &e) == GS_OK, "%s: create: %s", name, e.msg);
  uint64_t s = seed;
  for (int round = 0; round < rounds; round++) {
    int order[W * NB];
    for (int i = 0; i < W * NB; i++) order[i] = i;
    for (int i = W * NB - 1; i > 0; i--) { /* a shuffle from a fixed seed */
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      int j = (int)((s >> 33) % (uint64_t)(i + 1)), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    int arrived[NB] = {0};
    for (int i = 0; i < W * NB; i++) {
      int rank = order[i] / NB, b = order[i] % NB;
      zmq_msg_t m;
      make_push(&m, rank, off[b], cnt[b], wire);
      bool done = false;
      double red = 0;
      REQUIRE(gs_ps_reduce_push(r, rank, b, &m, &done, &red, &e) == GS_OK, "%s: push: %s", name,
            e.msg);
      zmq_msg_close(&m);
      arrived[b]++;
      REQUIRE(done == (arrived[b] == W), "%s round %d: bucket %d done=%d after %d of %d pushes",
            name, round, b, done, arrived[b], W);
      if (!done) continue;
      /* the sum in rank order, as one process adds */
      const float *sum = gs_ps_reduce_sum(r, b);
      size_t bad = 0;
      for (size_t j = 0; j < cnt[b]; j++) {
        float want = 0;
        if (pair_start) want = widened(1, off[b] + j, wire) + widened(0, off[b] + j, wire);
        else want = widened(0, off[b] + j, wire);
        for (int q = pair_start ? 2 : 1; q < W; q++) want += widened(q, off[b] + j, wire);
        bad += gs_load_f32(sum, j) != want;
      }
      REQUIRE(bad == 0, "%s round %d bucket %d: %zu of %zu sums differ from rank order", name,
            round, b, bad, cnt[b]);
      gs_ps_reduce_release(r, b);
    }
    /* a push of a bucket already summed this round is a protocol error */
    zmq_msg_t m;
    make_push(&m, 1, off[0], cnt[0], wire);
    bool done;
    gs_err de = {0};
    REQUIRE(gs_ps_reduce_push(r, 1, 0, &m, &done, NULL, &de) == GS_EPROTO &&
              strstr(de.msg, "second push"), "%s: a duplicate push: '%s'", name, de.msg);
    zmq_msg_close(&m);
    gs_ps_reduce_round(r);
  }
  uint64_t dev = 0, peak = 0;
  gs_ps_reduce_bytes(r, &dev, &peak);
  REQUIRE(peak > 0, "%s: no held bytes counted", name);
  bool adopts = wire == GS_F32 && cnt[0] * 4 >= (64u << 10);
  printf("%s: %d rounds in random orders, sums in rank order; %s; held peak %llu B, "
         "accumulator %llu B\n", name, rounds, adopts ? "large pushes adopted" : "sums copied",
         (unsigned long long)peak, (unsigned long long)dev);
  REQUIRE(!adopts || inproc0 || dev == 0, "%s: an accumulator of %llu B beside adopted pushes",
        name, (unsigned long long)dev);
  gs_ps_reduce_destroy(r);
  k->destroy(k);
}

/* adoption: the sum of a large fp32 bucket is the first push's own buffer */
static void adoption(void) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  size_t off[1] = {0}, cnt[1] = {1 << 15};
  gs_ps_reduce_cfg c = {.k = k, .world = 2, .nb = 1, .off = off, .cnt = cnt, .n = cnt[0],
                        .wire = GS_F32};
  gs_ps_reduce *r = NULL;
  REQUIRE(gs_ps_reduce_create(&c, &r, &e) == GS_OK, "create: %s", e.msg);
  zmq_msg_t a, b;
  make_push(&a, 0, 0, cnt[0], GS_F32);
  make_push(&b, 1, 0, cnt[0], GS_F32);
  void *abuf = zmq_msg_data(&a);
  bool done;
  REQUIRE(gs_ps_reduce_push(r, 0, 0, &a, &done, NULL, &e) == GS_OK && !done, "push 0");
  REQUIRE(gs_ps_reduce_push(r, 1, 0, &b, &done, NULL, &e) == GS_OK && done, "push 1");
  REQUIRE(gs_ps_reduce_sum(r, 0) == abuf, "the first large fp32 push was not adopted as the sum");
  uint64_t dev = 1;
  gs_ps_reduce_bytes(r, &dev, NULL);
  REQUIRE(dev == 0, "an adopting reduction allocated %llu device bytes", (unsigned long long)dev);
  zmq_msg_close(&a);
  zmq_msg_close(&b);
  gs_ps_reduce_release(r, 0);
  gs_ps_reduce_destroy(r);
  k->destroy(k);
  printf("adoption: rank 0's 128 KiB push became the sum, no accumulator\n");
}

int main(void) {
  /* buckets in readiness order, as the planner makes them (last params first) */
  size_t off_big[NB] = {50000, 20000, 0}, cnt_big[NB] = {30000, 30000, 20000};
  size_t off_small[NB] = {70, 10, 0}, cnt_small[NB] = {33, 60, 10};
  scenario("fp32, large buckets (adopted)", off_big, cnt_big, 80000, GS_F32, false, false, 12, 1);
  scenario("fp32, small buckets (copied)", off_small, cnt_small, 103, GS_F32, false, false, 40, 2);
  scenario("fp16 wire (fp32 sums)", off_big, cnt_big, 80000, GS_F16, false, false, 8, 3);
  scenario("rank 0 inproc, sums from 1 + 0", off_big, cnt_big, 80000, GS_F32, true, true, 12, 4);
  adoption();
  return 0;
}
