/* run_ids.c: a run's id (job.h, GS_RUN_ID_CHARS hex digits), which
 * steps.csv and report.json carry: random for an invocation of bench, or a
 * hash of the job token on every rank of a job another launcher started,
 * so that all of them agree without revealing the token. */
#include <sodium.h>

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
