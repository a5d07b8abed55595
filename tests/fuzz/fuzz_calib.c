/* fuzz_calib.c: the cost model's calibration record (costmodel.h
 * gs_cm_calib_from_json: `bench --project --calibration F`, a file users
 * edit by hand) on arbitrary JSON text. What jansson cannot parse never
 * reaches the reader. A record it accepts must pass the record's own check,
 * be written again (gs_cm_calib_json) and read back, and the two writings
 * must be the same JSON. */
#include <jansson.h>

#include "bench/costmodel/costmodel.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_error_t je;
  json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
  if (!j) {
    gs_err e = {0};
    fuzz_verdict(GS_FAIL(&e, GS_EPROTO, "not JSON: %s", je.text), &e, "json_loadb");
    return 0;
  }
  static gs_cm_calib c, d;
  gs_err e = {0};
  int rc = gs_cm_calib_from_json(j, "input", &c, &e);
  json_decref(j);
  fuzz_verdict(rc, &e, "gs_cm_calib_from_json");
  if (rc < 0) return 0;
  gs_err e2 = {0};
  FUZZ_CHECK(gs_cm_calib_check(&c, &e2) == 0, "an accepted record fails its check: %s", e2.msg);
  json_t *back = gs_cm_calib_json(&c);
  FUZZ_CHECK(back != NULL, "an accepted record cannot be written%s", "");
  rc = gs_cm_calib_from_json(back, "written", &d, &e2);
  FUZZ_CHECK(rc == 0, "a written record is refused: %s", e2.msg);
  json_t *again = gs_cm_calib_json(&d);
  FUZZ_CHECK(again != NULL && json_equal(back, again),
             "written, read back and written again, the record changed");
  json_decref(again);
  json_decref(back);
  return 0;
}
