/* fuzz_opts.c: bench's flag parser (gs_opts_parse, bench/bench.h).
 *
 * Input: the arguments after "bench", separated by NUL bytes (each copied
 * to a buffer of its own size, so a read past an argument is seen). The
 * parser must accept or refuse with a message naming the problem; what it
 * accepts must lie in the documented ranges; parsing the same arguments
 * twice must give the same result (getopt keeps state between calls). */
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/job/job.h"
#include "fuzz.h"

#define MAXARGS 64

static void check_ranges(const gs_opts *o) {
  FUZZ_CHECK(o->nmodes >= 1 && o->nmodes <= 3, "%d modes", o->nmodes);
  for (int i = 0; i < o->nmodes; i++)
    FUZZ_CHECK(o->modes[i] >= GS_MODE_PS && o->modes[i] <= GS_MODE_SINGLE, "mode %d", o->modes[i]);
  FUZZ_CHECK(o->nworlds >= 1 && o->nworlds <= GS_LIST_MAX, "%d worlds", o->nworlds);
  for (int i = 0; i < o->nworlds; i++)
    FUZZ_CHECK(o->worlds[i] >= 1 && o->worlds[i] <= 1024, "world %d", o->worlds[i]);
  FUZZ_CHECK(o->nbatches >= 1 && o->nbatches <= GS_LIST_MAX, "%d batches", o->nbatches);
  for (int i = 0; i < o->nbatches; i++)
    FUZZ_CHECK(o->batches[i] >= 1 && o->batches[i] <= (1 << 20), "batch %d", o->batches[i]);
  FUZZ_CHECK(o->nmodels >= 1 && o->nmodels <= GS_LIST_MAX, "%d models", o->nmodels);
  for (int i = 0; i < o->nmodels; i++) FUZZ_CHECK(o->models[i] && *o->models[i], "model %d", i);
  FUZZ_CHECK(o->nbucket_mbs >= 1 && o->nbucket_mbs <= GS_LIST_MAX, "%d buckets", o->nbucket_mbs);
  for (int i = 0; i < o->nbucket_mbs; i++)
    FUZZ_CHECK(o->bucket_mbs[i] >= 0 && o->bucket_mbs[i] <= 4096, "bucket %g MiB",
               o->bucket_mbs[i]);
  FUZZ_CHECK(o->train.first_bucket_mb >= 0 && o->train.first_bucket_mb <= 4096,
             "first bucket %g MiB", o->train.first_bucket_mb);
  FUZZ_CHECK(o->timeout_s >= 0.05 && o->timeout_s <= 86400, "timeout %g s", o->timeout_s);
  FUZZ_CHECK(o->train.steps >= 0 && o->warmup >= 0, "steps %lld, warmup %d",
             (long long)o->train.steps, o->warmup);
  FUZZ_CHECK(o->train.loss_scale > 0, "loss scale %g", o->train.loss_scale);
  FUZZ_CHECK(o->min_bytes <= o->max_bytes && o->factor > 1 && o->iters >= 1 &&
                 o->warmup_iters >= 0,
             "collective -b %zu -e %zu -f %g -n %d -w %d", o->min_bytes, o->max_bytes, o->factor,
             o->iters, o->warmup_iters);
  FUZZ_CHECK(o->train.data && *o->train.data && o->device, "empty data or device%s", "");
  if (o->save_params) {
    /* without --world the launcher's world counts (the sweep checks its
     * default list itself) */
    int runs = o->nmodes * (o->world_given ? o->nworlds : 1) * o->nmodels * o->nbatches *
               o->nbucket_mbs;
    FUZZ_CHECK(runs == 1, "--save-params with %d runs", runs);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *argv[MAXARGS + 2];
  int argc = 0;
  argv[argc++] = strdup("bench");
  size_t at = 0;
  while (at < size && argc <= MAXARGS) {
    const uint8_t *nul = memchr(data + at, 0, size - at);
    size_t len = nul ? (size_t)(nul - (data + at)) : size - at;
    char *a = malloc(len + 1);
    FUZZ_CHECK(a != NULL, "out of memory%s", "");
    memcpy(a, data + at, len);
    a[len] = '\0';
    argv[argc++] = a;
    at += len + 1;
  }
  argv[argc] = NULL;
  /* getopt permutes argv: keep the pointers to free */
  char *owned[MAXARGS + 2];
  memcpy(owned, argv, sizeof(char *) * (size_t)argc);

  gs_opts o;
  bool help = false;
  gs_err e = {0};
  int rc = gs_opts_parse(argc, argv, &o, &help, &e);
  fuzz_verdict(rc, &e, "gs_opts_parse");
  char settings[8192] = "";
  if (rc == 0 && !help) {
    check_ranges(&o);
    size_t n = gs_run_settings(&o, o.modes[0], o.worlds[0], settings, sizeof settings);
    FUZZ_CHECK(n > 0, "no settings%s", "");
  }
  gs_opts_free(&o);

  /* the same arguments again: a parse must not depend on the one before */
  memcpy(argv, owned, sizeof(char *) * (size_t)argc);
  bool help2 = false;
  gs_err e2 = {0};
  int rc2 = gs_opts_parse(argc, argv, &o, &help2, &e2);
  char settings2[8192] = "";
  if (rc2 == 0 && !help2) gs_run_settings(&o, o.modes[0], o.worlds[0], settings2, sizeof settings2);
  FUZZ_CHECK(rc2 == rc && help2 == help && !strcmp(e2.msg, e.msg) && !strcmp(settings2, settings),
             "a second parse of the same arguments differs: %d%s '%s' then %d%s '%s'", rc,
             help ? " (help)" : "", e.msg, rc2, help2 ? " (help)" : "", e2.msg);
  gs_opts_free(&o);
  for (int i = 0; i < argc; i++) free(owned[i]);
  return 0;
}
