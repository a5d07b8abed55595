/* fuzz_meas.c: a rank's measurements as rank 0 takes them in the gather
 * (bench/gather.c gs_measurements_unpack): a packed Measurements message
 * and the step and span counts its Stats header announced.
 *
 * The input's first two bytes are those counts (0..255 each), the rest the
 * message. An accepted message must hold exactly the announced rows (this
 * rank's, steps 0, 1, ...) and spans with terminated names, and pack back
 * (gs_measurements_pack) to a message that unpacks to the same values; a
 * refused one leaves a reason and nothing allocated. */
#include <stdlib.h>
#include <string.h>

#include "bench/internal.h"
#include "fuzz.h"

#define RANK 1

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint64_t steps = data[0], nspans = data[1];
  gs_rank_result x = {.rank = RANK};
  char why[512] = "";
  int rc = gs_measurements_unpack(data + 2, size - 2, steps, nspans, RANK, &x, why, sizeof why);
  gs_err e = {0};
  if (rc < 0) GS_FAIL(&e, rc, "%s", why);
  fuzz_verdict(rc, &e, "gs_measurements_unpack");
  if (rc < 0) {
    FUZZ_CHECK(!x.rows && !x.spans, "a refused message left buffers behind");
    return 0;
  }
  FUZZ_CHECK(x.nrows == steps && x.nspans == nspans, "%zu rows, %zu spans for %llu, %llu",
             x.nrows, x.nspans, (unsigned long long)steps, (unsigned long long)nspans);
  for (size_t i = 0; i < x.nrows; i++)
    FUZZ_CHECK(x.rows[i].rank == RANK && x.rows[i].step == (int64_t)i, "row %zu: rank %d step %lld",
               i, x.rows[i].rank, (long long)x.rows[i].step);
  uint8_t *packed = NULL;
  size_t len = 0;
  gs_err pe = {0};
  fuzz_check_err(gs_measurements_pack(&x, &packed, &len, &pe), &pe, "gs_measurements_pack");
  gs_rank_result y = {.rank = RANK};
  rc = gs_measurements_unpack(packed, len, steps, nspans, RANK, &y, why, sizeof why);
  FUZZ_CHECK(rc == 0, "what was accepted and packed again is refused: %s", why);
  FUZZ_CHECK(!x.nrows || !memcmp(x.rows, y.rows, x.nrows * sizeof *x.rows),
             "rows differ after a round trip");
  FUZZ_CHECK(!x.nspans || !memcmp(x.spans, y.spans, x.nspans * sizeof *x.spans),
             "spans differ after a round trip");
  free(packed);
  gs_rank_result_free(&x);
  gs_rank_result_free(&y);
  return 0;
}
