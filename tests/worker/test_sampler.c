/* test_sampler.c: DistributedSampler semantics of worker/sampler.c:
 * PyTorch's num_samples / total_size formulas, the exact no-shuffle
 * indices, disjoint shards that cover the padded list, drop_last, a new
 * order every epoch, determinism. */
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "worker/sampler.h"

/* torch/utils/data/distributed.py, transcribed */
static int64_t torch_num_samples(int64_t n, int world, bool drop_last) {
  if (drop_last && n % world != 0) return (n - world + world - 1) / world;
  return (n + world - 1) / world;
}

static void known_values(void) {
  /* n = 10, world = 3, no shuffle: padded 0..9,0,1 */
  static const int64_t want[3][4] = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  static const int64_t want_drop[3][3] = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int r = 0; r < 3; r++) {
    gs_sampler s;
    gs_err e = {0};
    int64_t got[4];
    CHECK_OK(gs_sampler_init(&s, 10, r, 3, false, false, 0, &e), &e);
    CHECK(s.num_samples == 4 && s.total_size == 12);
    gs_sampler_epoch(&s, 0, got);
    CHECK(!memcmp(got, want[r], sizeof want[r]));
    gs_sampler_epoch(&s, 5, got);  /* no shuffle: the same every epoch */
    CHECK(!memcmp(got, want[r], sizeof want[r]));
    gs_sampler_free(&s);
    CHECK_OK(gs_sampler_init(&s, 10, r, 3, false, true, 0, &e), &e);
    CHECK(s.num_samples == 3 && s.total_size == 9);
    gs_sampler_epoch(&s, 0, got);
    CHECK(!memcmp(got, want_drop[r], sizeof want_drop[r]));
    gs_sampler_free(&s);
  }
}

/* every (n, world, shuffle, drop_last): shards are disjoint positions of
 * the padded list and together are exactly that list */
static void properties(int64_t n, int world, bool shuffle, bool drop_last, uint64_t seed) {
  gs_err e = {0};
  int64_t ns = torch_num_samples(n, world, drop_last);
  int64_t total = ns * world;
  int64_t *count = calloc((size_t)n, sizeof *count);
  int64_t **shards = calloc((size_t)world, sizeof *shards);
  for (int epoch = 0; epoch < 3; epoch++) {
    memset(count, 0, (size_t)n * sizeof *count);
    for (int r = 0; r < world; r++) {
      gs_sampler s;
      CHECK_OK(gs_sampler_init(&s, n, r, world, shuffle, drop_last, seed, &e), &e);
      CHECK(s.num_samples == ns, "n %lld world %d: %lld != %lld", (long long)n, world,
             (long long)s.num_samples, (long long)ns);
      CHECK(s.total_size == total);
      int64_t *idx = malloc((size_t)ns * sizeof *idx);
      gs_sampler_epoch(&s, epoch, idx);
      for (int64_t i = 0; i < ns; i++) {
        CHECK(idx[i] >= 0 && idx[i] < n);
        if (idx[i] >= 0 && idx[i] < n) count[idx[i]]++;
        if (!shuffle) CHECK(idx[i] == (r + i * world) % n);  /* PyTorch's exact list */
      }
      if (epoch == 0) {
        free(shards[r]);
        shards[r] = idx;
      } else {
        if (shuffle && ns >= 5) CHECK(memcmp(idx, shards[r], (size_t)ns * sizeof *idx) != 0,
                                      "n %lld world %d rank %d: epoch %d has epoch 0's order",
                                      (long long)n, world, r, epoch);
        free(idx);
      }
      gs_sampler_free(&s);
    }
    /* the padded list holds index i floor(total/n) or ceil times; drop_last: at most once */
    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
      sum += count[i];
      if (drop_last) CHECK(count[i] <= 1);
      else CHECK(count[i] >= total / n && count[i] <= (total + n - 1) / n,
                  "index %lld appears %lld times", (long long)i, (long long)count[i]);
    }
    CHECK(sum == total);
    if (drop_last) CHECK(total <= n && total > n - world);
    else CHECK(total >= n && total < n + world);
  }
  for (int r = 0; r < world; r++) free(shards[r]);
  free(shards);
  free(count);
}

static void determinism(void) {
  gs_err e = {0};
  gs_sampler a, b, c;
  int64_t x[100], y[100], z[100];
  CHECK_OK(gs_sampler_init(&a, 200, 1, 2, true, false, 7, &e), &e);
  CHECK_OK(gs_sampler_init(&b, 200, 1, 2, true, false, 7, &e), &e);
  CHECK_OK(gs_sampler_init(&c, 200, 1, 2, true, false, 8, &e), &e);
  gs_sampler_epoch(&a, 3, x);
  gs_sampler_epoch(&b, 2, y);  /* visiting another epoch first changes nothing */
  gs_sampler_epoch(&b, 3, y);
  gs_sampler_epoch(&c, 3, z);
  CHECK(!memcmp(x, y, sizeof x));
  CHECK(memcmp(x, z, sizeof x) != 0);
  /* torch seeds with seed + epoch: (seed 7, epoch 3) == (seed 8, epoch 2) */
  gs_sampler_epoch(&c, 2, z);
  CHECK(!memcmp(x, z, sizeof x));
  gs_sampler_free(&a);
  gs_sampler_free(&b);
  gs_sampler_free(&c);
}

static void errors(void) {
  gs_sampler s;
  gs_err e = {0};
  CHECK(gs_sampler_init(&s, 2, 0, 3, true, true, 0, &e) == GS_EINVAL);
  CHECK(strstr(e.msg, "--drop-last") != NULL);
  gs_err_clear(&e);
  CHECK(gs_sampler_init(&s, 10, 3, 3, true, false, 0, &e) == GS_EINVAL);
  gs_err_clear(&e);
  CHECK(gs_sampler_init(&s, 0, 0, 1, true, false, 0, &e) == GS_EINVAL);
  /* fewer samples than ranks without drop_last: padding repeats the list */
  CHECK_OK(gs_sampler_init(&s, 2, 4, 5, false, false, 0, &e), &e);
  int64_t idx[1];
  gs_sampler_epoch(&s, 0, idx);
  CHECK(s.num_samples == 1 && idx[0] == 0);  /* padded list 0,1,0,1,0 */
  gs_sampler_free(&s);
}

int main(void) {
  known_values();
  static const int64_t ns[] = {1, 2, 7, 10, 64, 101, 1000};
  static const int worlds[] = {1, 2, 3, 4, 8};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (size_t j = 0; j < sizeof worlds / sizeof worlds[0]; j++)
      for (int sh = 0; sh < 2; sh++)
        for (int dl = 0; dl < 2; dl++) {
          if (dl && ns[i] < worlds[j]) continue;  /* an error, tested below */
          properties(ns[i], worlds[j], sh, dl, 42);
        }
  determinism();
  errors();
  return check_done("test_sampler");
}
