/* fuzz_meas.c: a rank's measurements as rank 0 takes them in the gather
 * (bench/job/gather.c gs_gather_take): one part, the rank's whole report, a
 * packed Measurements message and the step and span counts its Stats
 * header announced.
 *
 * The input's first two bytes are those counts (0..255 each), the rest the
 * message. An accepted report must hold exactly the announced rows (this
 * rank's, steps 0, 1, ...) and spans with terminated names, and pack back
 * (gs_measurements_pack_part) to a part that is taken to the same values;
 * a refused one leaves a reason and nothing allocated. */
#include <stdlib.h>
#include <string.h>

#include "bench/job/job.h"
#include "fuzz.h"
#include "proto/proto.h"

#define RANK 1

static int take_one(const uint8_t *data, size_t len, uint64_t steps, uint64_t nspans,
                    gs_rank_result *x) {
  Gradsync__Stats st = GRADSYNC__STATS__INIT;
  st.steps = steps;
  st.spans = nspans;
  st.last = true;
  gs_gather_limits lim = {.rows = 255, .spans = 255};
  *x = (gs_rank_result){.rank = RANK};
  gs_err e = {0};
  int rc = gs_gather_take(&st, data, len, &lim, x, &e);
  FUZZ_CHECK(rc == 1, "one whole part did not end the report (%d: %s)", rc, e.msg);
  return x->failed ? GS_EPROTO : GS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint64_t steps = data[0], nspans = data[1];
  gs_rank_result x;
  int rc = take_one(data + 2, size - 2, steps, nspans, &x);
  gs_err e = {0};
  if (rc < 0) GS_FAIL(&e, rc, "%s", x.error);
  fuzz_verdict(rc, &e, "gs_gather_take");
  if (rc < 0) {
    FUZZ_CHECK(!x.rows && !x.spans, "a refused report left buffers behind");
    return 0;
  }
  FUZZ_CHECK(x.nrows == steps && x.nspans == nspans, "%zu rows, %zu spans for %llu, %llu",
             x.nrows, x.nspans, (unsigned long long)steps, (unsigned long long)nspans);
  for (size_t i = 0; i < x.nrows; i++)
    FUZZ_CHECK(x.rows[i].rank == RANK && x.rows[i].step == (int64_t)i, "row %zu: rank %d step %lld",
               i, x.rows[i].rank, (long long)x.rows[i].step);
  size_t cap = GS_RDV_FRAME_MAX, len = 0, row = 0, span = 0;
  uint8_t *packed = malloc(cap);
  gs_err pe = {0};
  FUZZ_CHECK(packed != NULL, "out of memory%s", "");
  fuzz_check_err(gs_measurements_pack_part(&x, &row, &span, packed, cap, &len, &pe), &pe,
                 "gs_measurements_pack_part");
  FUZZ_CHECK(row == x.nrows && span == x.nspans, "what was taken does not pack in one part");
  gs_rank_result y;
  rc = take_one(packed, len, steps, nspans, &y);
  FUZZ_CHECK(rc == 0, "what was accepted and packed again is refused: %s", y.error);
  FUZZ_CHECK(!x.nrows || !memcmp(x.rows, y.rows, x.nrows * sizeof *x.rows),
             "rows differ after a round trip");
  FUZZ_CHECK(!x.nspans || !memcmp(x.spans, y.spans, x.nspans * sizeof *x.spans),
             "spans differ after a round trip");
  free(packed);
  gs_rank_result_free(&x);
  gs_rank_result_free(&y);
  return 0;
}
