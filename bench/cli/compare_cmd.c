/* compare_cmd.c: the --compare role: several results directories' runs side
 * by side (bench/report/compare.c does the work); the command line's part
 * is the list, --out and --target-loss. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/report/report.h"

#define COMPARE_MAX 64

int gs_compare_main(const gs_opts *o) {
  if (!o->out) {
    fprintf(stderr, "bench: --compare writes compare.json, loss.svg and staleness.svg: give "
            "--out DIR for them\n");
    return 2;
  }
  char *list = strdup(o->compare);
  if (!list) {
    fprintf(stderr, "bench: out of memory\n");
    return 1;
  }
  const char *dirs[COMPARE_MAX];
  int n = 0;
  for (char *save = NULL, *d = strtok_r(list, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
    if (n == COMPARE_MAX) {
      fprintf(stderr, "bench: --compare takes at most %d directories\n", COMPARE_MAX);
      free(list);
      return 2;
    }
    dirs[n++] = d;
  }
  if (n == 0) {
    fprintf(stderr, "bench: --compare %s: no directory in the list\n", o->compare);
    free(list);
    return 2;
  }
  gs_err e = {0};
  int rc = gs_report_compare(dirs, n, o->out, o->target_loss, stdout, &e);
  if (rc < 0) fprintf(stderr, "bench: %s\n", e.msg);
  free(list);
  return rc == GS_OK ? 0 : rc == GS_EINVAL ? 2 : 1;
}
