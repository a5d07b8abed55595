/* replay.c: an apply-order log (worker.h) replayed in one process. Each
 * rank of the logged world gets a trainer of its own (its shard of the
 * data); the server's side is a master copy and gs_update, the optimizer
 * state every backend uses. For each update, in the log's order, each of
 * its gradients is computed again on a copy of the version it was computed
 * on, the gradients are summed in the logged order (the first copied, the
 * others added: the server's order of operations), averaged over their
 * number and applied; the parameters' hash must then be the logged one.
 * Versions that a later gradient was computed on are kept until their last
 * use, so memory is what the staleness needs, not one copy per update. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker.h"

#define MAX_REPLAY_WORLD 1024

typedef struct replay {
  const gs_apply_log *l;
  gs_kernels *k;
  gs_trainer **t;       /* world entries, made on first use */
  float **kept;         /* kept[v]: version v (host), while a later gradient needs it */
  uint32_t *uses;       /* gradients still to come computed on version v */
  float *master;        /* the server's parameters (k's device) */
  float *acc;           /* the sum (k's device) */
  size_t n;
} replay;

static int trainer_of(replay *r, int rank, gs_err *e) {
  if (r->t[rank]) return GS_OK;
  gs_train_opts o = r->l->train;
  o.rank = rank;
  o.world = r->l->world;
  GS_TRY(gs_trainer_create(&o, r->k, &r->t[rank], e));
  if (gs_trainer_nparams(r->t[rank]) != r->n)
    return GS_FAIL(e, GS_EINVAL, "replay: model %s has %zu parameters, the log's run %zu",
                   o.model, gs_trainer_nparams(r->t[rank]), r->n);
  return GS_OK;
}

static int keep(replay *r, uint64_t v, gs_err *e) {
  if (!r->uses[v]) return GS_OK;
  if (!(r->kept[v] = malloc(r->n * sizeof(float))))
    return GS_FAIL(e, GS_ENOMEM, "replay: out of memory keeping version %llu",
                   (unsigned long long)v);
  r->k->to_host(r->k, r->kept[v], r->master, r->n * sizeof(float));
  return r->k->sync(r->k, e);
}

static int one_update(replay *r, const gs_apply_update *x, gs_update *u, gs_err *e) {
  gs_kernels *k = r->k;
  for (int i = 0; i < x->n; i++) {
    const gs_apply_grad *g = &r->l->grads[x->first + (size_t)i];
    if (!r->kept[g->base])
      return GS_FAIL(e, GS_EINVAL, "replay: update %llu needs version %llu, already dropped",
                     (unsigned long long)x->version, (unsigned long long)g->base);
    GS_TRY(trainer_of(r, g->rank, e));
    gs_sync_config c;
    memset(&c, 0, sizeof c);
    gs_trainer_sync_config(r->t[g->rank], &c);
    k->to_device(k, c.params, r->kept[g->base], r->n * sizeof(float));
    int rc = gs_trainer_gradient(r->t[g->rank], g->step, e);
    if (rc < 0) {
      gs_err_prefix(e, "replay: update %llu, rank %d's step %lld: ",
                    (unsigned long long)x->version, g->rank, (long long)g->step);
      return rc;
    }
    if (i == 0) k->copy(k, r->acc, c.grads, r->n * sizeof(float));
    else k->add(k, r->n, r->acc, c.grads);
    if (--r->uses[g->base] == 0) {
      free(r->kept[g->base]);
      r->kept[g->base] = NULL;
    }
  }
  GS_TRY(k->sync(k, e));
  gs_update_range rg = {.offset = 0, .count = r->n, .grad = r->acc};
  gs_update_result res;
  u->world = x->n;
  return gs_update_apply(u, r->master, &rg, 1, false, true, &res, e);
}

static int hash_of(replay *r, float *host, uint64_t *h, gs_err *e) {
  r->k->to_host(r->k, host, r->master, r->n * sizeof(float));
  GS_TRY(r->k->sync(r->k, e));
  *h = gs_params_hash(host, r->n);
  return GS_OK;
}

int gs_replay(const gs_apply_log *l, gs_kernels *k, const char *save_dir, gs_replay_result *res,
              gs_err *e) {
  memset(res, 0, sizeof *res);
  if (l->world < 1 || l->world > MAX_REPLAY_WORLD)
    return GS_FAIL(e, GS_EINVAL, "replay: world %d; one process replays at most %d ranks",
                   l->world, MAX_REPLAY_WORLD);
  replay r = {.l = l, .k = k, .n = l->nparams};
  size_t nv = l->nup + 1;
  r.t = calloc((size_t)l->world, sizeof *r.t);
  r.kept = calloc(nv, sizeof *r.kept);
  r.uses = calloc(nv, sizeof *r.uses);
  float *host = malloc(r.n * sizeof(float));
  gs_update u;
  memset(&u, 0, sizeof u);
  bool have_u = false;
  int rc = r.t && r.kept && r.uses && host ? GS_OK : GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (size_t i = 0; rc == GS_OK && i < l->ngrads; i++) r.uses[l->grads[i].base]++;
  /* version 0: the parameters every rank starts from (rank 0's, as the
   * server's Init carries them) */
  if (rc == GS_OK) rc = trainer_of(&r, 0, e);
  gs_sync_config c;
  memset(&c, 0, sizeof c);
  if (rc == GS_OK) {
    gs_trainer_sync_config(r.t[0], &c);
    r.master = k->alloc(k, r.n * sizeof(float));
    r.acc = k->alloc(k, r.n * sizeof(float));
    if (!r.master || !r.acc) rc = GS_FAIL(e, GS_ENOMEM, "replay: out of device memory");
  }
  if (rc == GS_OK) {
    k->copy(k, r.master, c.params, r.n * sizeof(float));
    rc = gs_update_init(&u, k, r.n, l->world, c.sgd, GS_F32, c.scaler, e);
    have_u = rc == GS_OK;
  }
  if (rc == GS_OK) rc = keep(&r, 0, e);
  for (size_t i = 0; rc == GS_OK && i < l->nup; i++) {
    const gs_apply_update *x = &l->up[i];
    uint64_t h = 0;
    rc = one_update(&r, x, &u, e);
    if (rc == GS_OK) rc = hash_of(&r, host, &h, e);
    if (rc == GS_OK && h != x->hash) {
      rc = GS_FAIL(e, GS_EPROTO, "replay: after update %llu (gradients of",
                   (unsigned long long)x->version);
      for (int j = 0; j < x->n && j < 8; j++) {
        const gs_apply_grad *g = &l->grads[x->first + (size_t)j];
        size_t m = strlen(e->msg);
        snprintf(e->msg + m, sizeof e->msg - m, " rank %d step %lld on version %llu%s", g->rank,
                 (long long)g->step, (unsigned long long)g->base, j + 1 < x->n ? "," : "");
      }
      size_t m = strlen(e->msg);
      snprintf(e->msg + m, sizeof e->msg - m, ") the parameters' hash is %016llx, the server's "
               "was %016llx: not the run's bits (another build, machine or BLAS thread count, "
               "or a log out of order)", (unsigned long long)h, (unsigned long long)x->hash);
    }
    if (rc == GS_OK) rc = keep(&r, x->version, e);
    if (rc == GS_OK) {
      res->updates++;
      res->gradients += (uint64_t)x->n;
      res->hash = h;
    }
  }
  if (rc == GS_OK && save_dir) {
    k->copy(k, c.params, r.master, r.n * sizeof(float));
    rc = k->sync(k, e);
    if (rc == GS_OK) rc = gs_trainer_save(r.t[0], save_dir, e);
  }
  if (have_u) gs_update_free(&u);
  if (r.master) k->release(k, r.master);
  if (r.acc) k->release(k, r.acc);
  for (size_t v = 0; r.kept && v < nv; v++) free(r.kept[v]);
  for (int i = 0; r.t && i < l->world; i++) gs_trainer_destroy(r.t[i]);
  free(r.t);
  free(r.kept);
  free(r.uses);
  free(host);
  return rc;
}
