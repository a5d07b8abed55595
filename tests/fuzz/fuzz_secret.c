/* fuzz_secret.c: a job secret file as a rank reads it (bench/job/job.h
 * gs_job_secret with --secret-file).
 *
 * Input: the file's bytes, written to a fresh file of mode 0600. The
 * verdict must agree with an independent reading: the first 4096 bytes,
 * without the line ends at their end, are the secret, accepted when they
 * are 16 bytes or more; an accepted secret gives the key gs_cred_derive
 * makes of those bytes; a refusal says why. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/job/job.h"
#include "fuzz.h"
#include "proto/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) {
    unsetenv("GS_JOB_SECRET");
    snprintf(path, sizeof path, "/tmp/gs-fuzz-secret-%d", (int)getpid());
  }
  unlink(path);
  FILE *f = fopen(path, "wb");
  FUZZ_CHECK(f != NULL, "cannot write %s", path);
  FUZZ_CHECK(fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", path);
  FUZZ_CHECK(chmod(path, 0600) == 0, "chmod %s", path);
  gs_cred c, want;
  gs_err e = {0};
  int rc = gs_job_secret(path, NULL, false, &c, &e);
  size_t n = size < 4096 ? size : 4096;
  while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r')) n--;
  fuzz_verdict(rc, &e, "gs_job_secret");
  FUZZ_CHECK((rc == 0) == (n >= 16), "%zu secret bytes: rc %d (%s)", n, rc, e.msg);
  if (rc == 0) {
    gs_err de = {0};
    FUZZ_CHECK(gs_cred_derive(&want, data, n, false, &de) == 0, "%s", de.msg);
    FUZZ_CHECK(!memcmp(c.key, want.key, sizeof c.key), "the key is not the secret's%s", "");
  }
  unlink(path);
  return 0;
}
