/* run_ids.c: a run's id (job.h, GS_RUN_ID_CHARS hex digits), which
 * steps.csv and report.json carry: random for an invocation of bench, or a
 * hash of the job token on every rank of a job another launcher started,
 * so that all of them agree without revealing the token; and the results
 * directory of a job started by hand, which that id makes its own. */
#include <sodium.h>
#include <string.h>
#include <time.h>

#include "bench/job/job.h"

void gs_run_id_new(char out[GS_RUN_ID_CHARS + 1]) {
  unsigned char b[GS_RUN_ID_CHARS / 2];
  randombytes_buf(b, sizeof b);
  sodium_bin2hex(out, GS_RUN_ID_CHARS + 1, b, sizeof b);
}

void gs_run_id_of_job(uint64_t token, char out[GS_RUN_ID_CHARS + 1]) {
  unsigned char b[GS_RUN_ID_CHARS / 2];
  crypto_generichash(b, sizeof b, (const unsigned char *)&token, sizeof token,
                     (const unsigned char *)"gradsync run id", 15);
  sodium_bin2hex(out, GS_RUN_ID_CHARS + 1, b, sizeof b);
}

bool gs_job_results_dir(const gs_job *j, char *buf, size_t cap) {
  if (cap) *buf = 0;
  if (j->rank != 0 || !j->first_token) return false;
  char stamp[32], id[GS_RUN_ID_CHARS + 1];
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  gs_run_id_of_job(j->first_token, id);
  const char *dash = strrchr(j->env.source, '-'); /* "bench --nnodes": nnodes */
  snprintf(buf, cap, "results/%s-%s-%.6s", stamp, dash ? dash + 1 : j->env.source, id);
  return true;
}
