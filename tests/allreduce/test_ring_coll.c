/* test_ring_coll.c: the ring's other collectives (allreduce.h,
 * ring_coll.c): reduce-scatter, all-gather, broadcast and reduce, rank per
 * process.
 *
 *   test_ring_coll exact W1 W2   worlds W1..W2; lengths 1, 2, W-1, W, W+1
 *                                and odd larger ones (parts empty when the
 *                                length is below the world); fp32, fp16 and
 *                                bf16 wires; tiny and default chunks (so the
 *                                pipeline runs many chunks per part); in
 *                                place and out of place; every root: each
 *                                rank holds the exact integer result the
 *                                collective defines (its part of the sum,
 *                                every rank's part, the root's vector, the
 *                                sum on the root), out-of-place src is left
 *                                alone, and replicated results (all-gather,
 *                                broadcast) of random values are the same
 *                                bits on every rank
 *   test_ring_coll root          a root outside the world: a clear error */
#include <stdlib.h>
#include <string.h>

#include "allreduce/allreduce.h"
#include "allreduce_harness.h"

#define MAXN 5003
enum { RS, AG, BC, RED, NCOLL };
static const char *NAMES[NCOLL] = {"reduce-scatter", "all-gather", "broadcast", "reduce"};
static gs_kernels *K;

static size_t lengths_for(int world, size_t *out) {
  size_t base[] = {1, 2, (size_t)world - 1, (size_t)world, (size_t)world + 1, 7, 13, 101, 1001,
                   MAXN};
  size_t n = 0;
  for (size_t i = 0; i < sizeof base / sizeof *base; i++)
    if (base[i] > 0) out[n++] = base[i];
  return n;
}

static int run(gs_comm *r, int c, const float *src, float *dst, size_t n, int root, int64_t step,
               gs_err *e) {
  switch (c) {
  case RS: return gs_comm_reduce_scatter(r, GS_REDOP_SUM, src, dst, n, step, NULL, e);
  case AG: return gs_comm_all_gather(r, src, dst, n, step, NULL, e);
  case BC: return gs_comm_broadcast(r, src, dst, n, root, step, NULL, e);
  default: return gs_comm_reduce(r, GS_REDOP_SUM, src, dst, n, root, step, NULL, e);
  }
}

/* the value rank r contributes to element i of case slot */
static float value(bool random, uint64_t seed, int r, size_t i, int slot) {
  return random ? th_randf(seed, r, i) : th_contribution(r, i, slot);
}

static int body_exact(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  const gs_dtype wires[3] = {GS_F32, GS_F16, GS_BF16};
  const size_t chunks[2] = {64, 0};
  float *src = gs_alloc(MAXN * sizeof(float), &e), *dst = gs_alloc(MAXN * sizeof(float), &e);
  float *in = gs_alloc(MAXN * sizeof(float), &e);
  if (!src || !dst || !in) return th_report(sh, rank, &e);
  size_t lens[16];
  size_t nl = lengths_for(world, lens);
  int slot = 0, bad = 0, round = 0;
  int64_t step = 0;
  for (int wi = 0; wi < 3; wi++)
    for (int ci = 0; ci < 2; ci++) {
      gs_comm_opts o;
      th_ring_opts(&o, rank, world, MAXN, K);
      o.wire = wires[wi];
      o.chunk_bytes = chunks[ci];
      gs_comm *r;
      if (th_ring_open(sh, round++, &o, &r, &e) < 0) return th_report(sh, rank, &e);
      for (size_t li = 0; li < nl; li++)
        for (int c = 0; c < NCOLL; c++)
          for (int kind = 0; kind < 4; kind++) {
            size_t n = lens[li];
            bool inplace = kind & 1, random = kind & 2;
            /* random values only where the result is replicated: the bits
             * are compared across ranks, not to a sum */
            if (random && (c == RS || c == RED)) continue;
            int root = (int)(((size_t)slot + li) % (size_t)world);
            uint64_t seed = (uint64_t)slot + 1;
            size_t off, len;
            gs_comm_part(n, world, rank, &off, &len);
            for (size_t i = 0; i < n; i++) in[i] = value(random, seed, rank, i, slot);
            memcpy(src, in, n * sizeof(float));
            memset(dst, 0xff, n * sizeof(float));
            float *out = inplace ? src : dst;
            const float *arg_src = c == AG ? src + off : src;
            if (run(r, c, arg_src, out, n, root, step++, &e) < 0)
              return th_report(sh, rank, &e);
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < n; i++) {
              float want = 0;
              bool checked = true;
              size_t owner_off, owner_len;
              switch (c) {
              case RS:
              case RED:
                checked = c == RS ? i >= off && i < off + len : rank == root;
                for (int q = 0; q < world; q++) want += value(false, seed, q, i, slot);
                break;
              case AG:
                for (int q = 0; q < world; q++) {
                  gs_comm_part(n, world, q, &owner_off, &owner_len);
                  if (i >= owner_off && i < owner_off + owner_len)
                    want = value(random, seed, q, i, slot);
                }
                break;
              default: want = value(random, seed, root, i, slot);
              }
              /* a 16-bit wire carries random values rounded: their bits are
               * compared across ranks below */
              if (random && wires[wi] != GS_F32) checked = false;
              if (checked && out[i] != want && wrong++ == 0) first = i;
            }
            if (wrong) {
              fprintf(stderr, "rank %d: %s, %s wire, chunk %zu, length %zu, root %d, %s %s: %zu "
                      "wrong elements, first [%zu] = %.9g\n", rank, NAMES[c],
                      gs_dtype_name(wires[wi]), chunks[ci], n, root,
                      random ? "random" : "integers", inplace ? "in place" : "out of place",
                      wrong, first, out[first]);
              bad++;
            }
            if (!inplace && memcmp(src, in, n * sizeof(float))) {
              fprintf(stderr, "rank %d: out-of-place %s changed src\n", rank, NAMES[c]);
              bad++;
            }
            /* replicated results: the same bits on every rank (one
             * running hash per ring and collective) */
            bool repl = c == AG || c == BC;
            uint64_t *h = &sh->u64[rank][(round - 1) * NCOLL + c];
            *h = th_mix(*h ^ (repl ? th_hash(out, n * sizeof(float)) : wrong));
            slot++;
          }
      gs_comm_close(r, true, NULL);
    }
  sh->u64[rank][TH_SLOTS - 1] = (uint64_t)(round * NCOLL);
  gs_free(src);
  gs_free(dst);
  gs_free(in);
  return bad ? 1 : 0;
}

static int body_root(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  gs_comm_opts o;
  th_ring_opts(&o, rank, world, 16, K);
  gs_comm *r;
  if (th_ring_open(sh, 0, &o, &r, &e) < 0) return th_report(sh, rank, &e);
  float v[16] = {0};
  int rc = gs_comm_broadcast(r, v, v, 16, world, 0, NULL, &e);
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  sh->u64[rank][0] = (uint64_t)(int64_t)rc;
  gs_comm_close(r, true, NULL);
  return 0;
}

int main(int argc, char **argv) {
  K = th_start();
  if (!K) return 1;
  const char *what = argc > 1 ? argv[1] : "exact";
  if (!strcmp(what, "exact")) {
    int lo = argc > 2 ? atoi(argv[2]) : 2, hi = argc > 3 ? atoi(argv[3]) : lo;
    CHECK(th_worlds_agree(lo, hi, body_exact, 120) == 0, "worlds %d..%d", lo, hi);
  } else if (!strcmp(what, "root")) {
    th_shared *sh = th_run(3, body_root, NULL, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "root: a rank failed");
    for (int r = 0; sh && r < 3; r++)
      CHECK(sh->u64[r][0] == (uint64_t)(int64_t)GS_EINVAL && strstr(sh->msg[r], "root 3"),
            "rank %d: code %d, message: %s", r, (int)(int64_t)sh->u64[r][0], sh->msg[r]);
    th_free(sh);
  } else {
    fprintf(stderr, "usage: test_ring_coll exact W1 W2 | root\n");
    return 2;
  }
  K->destroy(K);
  return check_done(what);
}
