/* fuzz_summary.c: a run's record as bench reads it back from run.json and
 * report.json (report.h gs_summary_from_json: `bench --compare`, the
 * report of a sweep that goes on) on arbitrary JSON text. What jansson
 * cannot parse never reaches the reader. A record it accepts must be
 * written again (gs_summary_json) and read back, and the two writings must
 * be the same JSON. */
#include <jansson.h>

#include "bench/report/report.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_error_t je;
  json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
  if (!j) {
    gs_err e = {0};
    fuzz_verdict(GS_FAIL(&e, GS_EPROTO, "not JSON: %s", je.text), &e, "json_loadb");
    return 0;
  }
  gs_summary s;
  gs_err e = {0};
  int rc = gs_summary_from_json(j, &s, &e);
  json_decref(j);
  fuzz_verdict(rc, &e, "gs_summary_from_json");
  if (rc < 0) return 0;
  gs_err e2 = {0};
  json_t *back = gs_summary_json(&s, &e2);
  FUZZ_CHECK(back != NULL, "an accepted record cannot be written: %s", e2.msg);
  gs_summary t;
  rc = gs_summary_from_json(back, &t, &e2);
  FUZZ_CHECK(rc == 0, "a written record is refused: %s", e2.msg);
  json_t *again = gs_summary_json(&t, &e2);
  FUZZ_CHECK(again != NULL && json_equal(back, again),
             "written, read back and written again, the record changed");
  json_decref(again);
  json_decref(back);
  gs_summary_free(&t);
  gs_summary_free(&s);
  return 0;
}
