/* sync_model.c: the ps consistency model (sync.h gs_ps_sync) as users
 * write it (--ps-sync bsp | ssp:K | async, --ps-backup B) and as reports
 * show it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps.h"

int gs_ps_sync_parse(const char *spec, gs_ps_sync *y, gs_err *e) {
  if (!strcmp(spec, "bsp")) {
    y->model = GS_PS_BSP;
    y->staleness = 0;
    return GS_OK;
  }
  if (!strcmp(spec, "async")) {
    y->model = GS_PS_ASYNC;
    y->staleness = 0;
    return GS_OK;
  }
  if (!strncmp(spec, "ssp:", 4)) {
    char *end;
    errno = 0;
    long k = strtol(spec + 4, &end, 10);
    if (spec[4] >= '0' && spec[4] <= '9' && !errno && !*end && k <= 1000) {
      y->model = GS_PS_SSP;
      y->staleness = (int)k;
      return GS_OK;
    }
    return GS_FAIL(e, GS_EINVAL, "--ps-sync %s: ssp:K takes K, the most updates a worker may "
                   "miss, a whole number in 0..1000", spec);
  }
  return GS_FAIL(e, GS_EINVAL, "--ps-sync %s: bsp (wait for every rank, DataParallel), ssp:K "
                 "(at most K updates stale) or async (apply each gradient on arrival)", spec);
}

void gs_ps_sync_text(const gs_ps_sync *y, char *buf, size_t cap) {
  char backup[32] = "";
  if (y->backup_on) snprintf(backup, sizeof backup, "+backup:%d", y->backup);
  if (y->model == GS_PS_SSP) snprintf(buf, cap, "ssp:%d%s", y->staleness, backup);
  else snprintf(buf, cap, "%s%s", y->model == GS_PS_ASYNC ? "async" : "bsp", backup);
}
