/* rank_result.c: the end of one rank's measurements (report.h
 * gs_rank_result), beside the type: the job fills them (bench/job/gather.c
 * on rank 0, rank.c for its own), the report reads them, and whoever holds
 * one frees it here without reaching up into the job. */
#include <stdlib.h>

#include "bench/report/report.h"

void gs_rank_result_free(gs_rank_result *r) {
  free(r->rows);
  free(r->spans);
  free(r->server_links);
  r->server_links = NULL;
  r->nserver_links = 0;
  r->rows = NULL;
  r->spans = NULL;
}
