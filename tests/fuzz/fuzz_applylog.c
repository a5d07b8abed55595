/* fuzz_applylog.c: the apply-order log reader (worker.h gs_apply_log_parse)
 * on arbitrary text. What it accepts must be a log a replay can trust:
 * updates numbered 1, 2, ... with at least one and at most world
 * gradients each, ranks inside the world, steps inside the run, every base
 * version older than its update, a shard inside its shards. Written out
 * again and read back, it must give the same updates. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "worker/worker.h"

static void check_log(const gs_apply_log *l) {
  FUZZ_CHECK(l->nup > 0 && l->world >= 2 && l->nparams > 0, "accepted an empty log");
  FUZZ_CHECK(l->shards >= 1 && l->shard >= 0 && l->shard < l->shards, "shard %d of %d",
             l->shard, l->shards);
  for (size_t u = 0; u < l->nup; u++) {
    const gs_apply_update *x = &l->up[u];
    FUZZ_CHECK(x->version == u + 1, "update %zu numbered %llu", u + 1,
               (unsigned long long)x->version);
    FUZZ_CHECK(x->n >= 1 && x->n <= l->world && x->first + (size_t)x->n <= l->ngrads,
               "update %zu sums %d gradients", u + 1, x->n);
    for (int i = 0; i < x->n; i++) {
      const gs_apply_grad *g = &l->grads[x->first + (size_t)i];
      FUZZ_CHECK(g->rank >= 0 && g->rank < l->world && g->step >= 0 &&
                 g->step < l->train.steps && g->base < x->version,
                 "update %zu: gradient %d:%lld:%llu", u + 1, g->rank, (long long)g->step,
                 (unsigned long long)g->base);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gs_apply_log l;
  gs_err e = {0};
  int rc = gs_apply_log_parse((const char *)data, size, "input", &l, &e);
  fuzz_verdict(rc, &e, "gs_apply_log_parse");
  if (rc < 0) return 0;
  check_log(&l);
  size_t len = 0;
  gs_err e2 = {0};
  char *text = gs_apply_log_text(&l, &len, &e2);
  FUZZ_CHECK(text != NULL, "an accepted log cannot be written: %s", e2.msg);
  gs_apply_log m;
  rc = gs_apply_log_parse(text, len, "written", &m, &e2);
  FUZZ_CHECK(rc == 0, "a written log is refused: %s", e2.msg);
  FUZZ_CHECK(m.nup == l.nup && m.ngrads == l.ngrads && m.world == l.world &&
             !strcmp(m.model, l.model) && !strcmp(m.data, l.data) &&
             m.train.lr == l.train.lr && m.train.seed == l.train.seed &&
             m.shard == l.shard && m.shards == l.shards,
             "written and read back, the log changed");
  for (size_t u = 0; u < l.nup; u++)
    FUZZ_CHECK(m.up[u].hash == l.up[u].hash && m.up[u].n == l.up[u].n,
               "update %zu changed when written and read back", u + 1);
  /* field by field: a gradient's padding bytes are nobody's */
  for (size_t i = 0; i < l.ngrads; i++)
    FUZZ_CHECK(m.grads[i].rank == l.grads[i].rank && m.grads[i].step == l.grads[i].step &&
               m.grads[i].base == l.grads[i].base,
               "gradient %zu changed when written and read back", i);
  free(text);
  gs_apply_log_free(&m);
  gs_apply_log_free(&l);
  return 0;
}
