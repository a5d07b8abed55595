/* replay.c: the apply-order logs (worker.h) of one run replayed in one
 * process. Each rank of the logged world gets a trainer of its own (its
 * shard of the data); each server's side is a master copy of its range and
 * a gs_update, the optimizer state every backend uses. Each gradient is
 * computed again on the parameters it was computed on, from that rank's
 * batch of that step; a server's update sums its range of the gradients in
 * the logged order (the first copied, the others added: the server's order
 * of operations), averages over their number and applies; the range's hash
 * must then be the logged one.
 *
 * One server: its updates in the log's order, each gradient on the version
 * it names. K servers (the sharded ps): a gradient's parameters are each
 * server's version that its rank based its push to that server on, in
 * range order, so a server's next update can run once every server has
 * made the versions its gradients need; the servers are taken in turn,
 * each as far as it can go, and logs whose updates no order can satisfy
 * are refused. Versions are kept until their last use, so memory is what
 * the staleness needs, not one copy per update. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker.h"

#define MAX_REPLAY_WORLD 1024
#define MAX_REPLAY_INDEX ((uint64_t)1 << 26) /* world x steps, per server of several */
#define NONE UINT64_MAX

typedef struct server {
  const gs_apply_log *l;
  size_t off, n;        /* its range of the parameters */
  float **kept;         /* kept[v]: version v (host), while a later gradient needs it */
  uint32_t *uses;       /* gradients still to come computed on version v */
  uint64_t *base;       /* several servers: base of rank r's step s here ([r * steps + s]) */
  float *master, *acc;  /* k's device */
  gs_update u;
  bool have_u;
  size_t next;          /* updates replayed: its current version */
} server;

typedef struct replay {
  const gs_apply_log *l; /* the first log: the run's configuration */
  int K;
  server *s;
  gs_kernels *k;
  gs_trainer **t;       /* world entries, made on first use */
  float *full;          /* host: a gradient's parameters, or a range to hash */
  size_t n;
} replay;

static int trainer_of(replay *r, int rank, gs_err *e) {
  if (r->t[rank]) return GS_OK;
  gs_train_opts o = r->l->train;
  o.rank = rank;
  o.world = r->l->world;
  GS_TRY(gs_trainer_create(&o, r->k, &r->t[rank], e));
  gs_sync_config c; /* the parameters that train: the server's */
  memset(&c, 0, sizeof c);
  gs_trainer_sync_config(r->t[rank], &c);
  if (c.n != r->n)
    return GS_FAIL(e, GS_EINVAL, "replay: model %s has %zu parameters, the log's run %zu",
                   o.model, c.n, r->n);
  return GS_OK;
}

/* server j's version that gradient g of server k's log was computed on */
static uint64_t version_of(const replay *r, int j, int k, const gs_apply_grad *g) {
  if (j == k) return g->base;
  return r->s[j].base[(size_t)g->rank * (size_t)r->l->train.steps + (size_t)g->step];
}

static bool same_text(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

/* every log of the run's K, shard j at j, of the first one's run */
static int one_run(const gs_apply_log *l, int K, gs_err *e) {
  const gs_train_opts *a = &l[0].train;
  for (int j = 0; j < K; j++) {
    const gs_apply_log *x = &l[j];
    const gs_train_opts *b = &x->train;
    if (x->shards != K || x->shard != j)
      return GS_FAIL(e, GS_EINVAL, "replay: log %d of %d is shard %d of %d", j, K, x->shard,
                     x->shards);
    if (x->world != l[0].world || x->threads != l[0].threads ||
        !same_text(x->sync, l[0].sync) || !same_text(x->model, l[0].model) ||
        !same_text(x->data, l[0].data) || !same_text(x->load, l[0].load) ||
        !same_text(x->freeze, l[0].freeze) ||
        b->batch != a->batch || b->steps != a->steps || b->seed != a->seed ||
        b->lr != a->lr || b->momentum != a->momentum || b->weight_decay != a->weight_decay ||
        b->shuffle != a->shuffle || b->drop_last != a->drop_last ||
        b->compute_ms != a->compute_ms || b->synthetic_samples != a->synthetic_samples)
      return GS_FAIL(e, GS_EINVAL, "replay: shard %d's log is of another run than shard 0's "
                     "(their headers differ)", j);
  }
  return GS_OK;
}

/* Index and count: each server's base of each gradient it applied, and how
 * many gradients to come need each version of each server. */
static int plan(replay *r, gs_err *e) {
  int K = r->K;
  uint64_t idx = (uint64_t)r->l->world * (uint64_t)r->l->train.steps;
  if (K > 1 && idx > MAX_REPLAY_INDEX)
    return GS_FAIL(e, GS_EINVAL, "replay: %d ranks x %lld steps: too many gradients to index "
                   "over %d servers (at most %llu)", r->l->world, (long long)r->l->train.steps,
                   K, (unsigned long long)MAX_REPLAY_INDEX);
  for (int j = 0; j < K && K > 1; j++) {
    server *sv = &r->s[j];
    if (!(sv->base = malloc((size_t)idx * sizeof *sv->base)))
      return GS_FAIL(e, GS_ENOMEM, "replay: out of memory");
    for (uint64_t i = 0; i < idx; i++) sv->base[i] = NONE;
    for (size_t i = 0; i < sv->l->ngrads; i++) {
      const gs_apply_grad *g = &sv->l->grads[i];
      uint64_t *b = &sv->base[(size_t)g->rank * (size_t)r->l->train.steps + (size_t)g->step];
      if (*b != NONE)
        return GS_FAIL(e, GS_EINVAL, "replay: shard %d's log applies rank %d's step %lld "
                       "twice", j, g->rank, (long long)g->step);
      *b = g->base;
    }
  }
  for (int k = 0; k < K; k++)
    for (size_t i = 0; i < r->s[k].l->ngrads; i++) {
      const gs_apply_grad *g = &r->s[k].l->grads[i];
      for (int j = 0; j < K; j++) {
        uint64_t v = version_of(r, j, k, g);
        if (v == NONE)
          return GS_FAIL(e, GS_EINVAL, "replay: shard %d's log applies rank %d's step %lld, "
                         "which shard %d's log never applied (a run that dropped gradients "
                         "writes no sharded log)", k, g->rank, (long long)g->step, j);
        if (v > r->s[j].l->nup)
          return GS_FAIL(e, GS_EINVAL, "replay: rank %d's step %lld is based on version %llu "
                         "of shard %d, whose log has %zu updates", g->rank, (long long)g->step,
                         (unsigned long long)v, j, r->s[j].l->nup);
        r->s[j].uses[v]++;
      }
    }
  return GS_OK;
}

static int keep(replay *r, server *sv, uint64_t v, gs_err *e) {
  if (!sv->uses[v]) return GS_OK;
  if (!(sv->kept[v] = malloc(sv->n * sizeof(float))))
    return GS_FAIL(e, GS_ENOMEM, "replay: out of memory keeping version %llu",
                   (unsigned long long)v);
  r->k->to_host(r->k, sv->kept[v], sv->master, sv->n * sizeof(float));
  return r->k->sync(r->k, e);
}

/* Whether server k's next update has every version it needs; else *j, *v:
 * one it lacks. */
static bool ready(const replay *r, int k, int *j, uint64_t *v) {
  const server *sv = &r->s[k];
  const gs_apply_update *x = &sv->l->up[sv->next];
  for (int i = 0; i < x->n; i++)
    for (*j = 0; *j < r->K; (*j)++) {
      *v = version_of(r, *j, k, &sv->l->grads[x->first + (size_t)i]);
      if (*v > r->s[*j].next) return false;
    }
  return true;
}

static int one_update(replay *r, int k, gs_err *e) {
  gs_kernels *kk = r->k;
  server *sv = &r->s[k];
  const gs_apply_update *x = &sv->l->up[sv->next];
  for (int i = 0; i < x->n; i++) {
    const gs_apply_grad *g = &sv->l->grads[x->first + (size_t)i];
    GS_TRY(trainer_of(r, g->rank, e));
    gs_sync_config c;
    memset(&c, 0, sizeof c);
    gs_trainer_sync_config(r->t[g->rank], &c);
    for (int j = 0; j < r->K; j++) {
      uint64_t v = version_of(r, j, k, g);
      if (!r->s[j].kept[v])
        return GS_FAIL(e, GS_EINVAL, "replay: update %llu needs version %llu, already dropped",
                       (unsigned long long)x->version, (unsigned long long)v);
      memcpy(r->full + r->s[j].off, r->s[j].kept[v], r->s[j].n * sizeof(float));
    }
    kk->to_device(kk, c.params, r->full, r->n * sizeof(float));
    int rc = gs_trainer_gradient(r->t[g->rank], g->step, e);
    if (rc < 0) {
      gs_err_prefix(e, "replay: update %llu, rank %d's step %lld: ",
                    (unsigned long long)x->version, g->rank, (long long)g->step);
      return rc;
    }
    if (i == 0) kk->copy(kk, sv->acc, c.grads + sv->off, sv->n * sizeof(float));
    else kk->add(kk, sv->n, sv->acc, c.grads + sv->off);
    for (int j = 0; j < r->K; j++) {
      server *sj = &r->s[j];
      uint64_t v = version_of(r, j, k, g);
      if (--sj->uses[v] == 0) {
        free(sj->kept[v]);
        sj->kept[v] = NULL;
      }
    }
  }
  GS_TRY(kk->sync(kk, e));
  gs_update_range rg = {.offset = 0, .count = sv->n, .grad = sv->acc};
  gs_update_result res;
  sv->u.world = x->n;
  return gs_update_apply(&sv->u, sv->master, &rg, 1, false, true, &res, e);
}

static int hash_of(replay *r, const server *sv, uint64_t *h, gs_err *e) {
  r->k->to_host(r->k, r->full, sv->master, sv->n * sizeof(float));
  GS_TRY(r->k->sync(r->k, e));
  *h = gs_params_hash(r->full, sv->n);
  return GS_OK;
}

/* server k's next update, checked against its hash */
static int step_server(replay *r, int k, gs_replay_result *res, gs_err *e) {
  server *sv = &r->s[k];
  const gs_apply_update *x = &sv->l->up[sv->next];
  uint64_t h = 0;
  GS_TRY(one_update(r, k, e));
  GS_TRY(hash_of(r, sv, &h, e));
  if (h != x->hash) {
    int rc = GS_FAIL(e, GS_EPROTO, "replay: after update %llu", (unsigned long long)x->version);
    size_t m = strlen(e->msg);
    if (r->K > 1) snprintf(e->msg + m, sizeof e->msg - m, " of shard %d of %d", k, r->K);
    m = strlen(e->msg);
    snprintf(e->msg + m, sizeof e->msg - m, " (gradients of");
    for (int j = 0; j < x->n && j < 8; j++) {
      const gs_apply_grad *g = &sv->l->grads[x->first + (size_t)j];
      m = strlen(e->msg);
      snprintf(e->msg + m, sizeof e->msg - m, " rank %d step %lld on version %llu%s", g->rank,
               (long long)g->step, (unsigned long long)g->base, j + 1 < x->n ? "," : "");
    }
    m = strlen(e->msg);
    snprintf(e->msg + m, sizeof e->msg - m, ") the parameters' hash is %016llx, the server's "
             "was %016llx: not the run's bits (another build, machine or BLAS thread count, "
             "or a log out of order)", (unsigned long long)h, (unsigned long long)x->hash);
    return rc;
  }
  sv->next++;
  GS_TRY(keep(r, sv, x->version, e));
  res->updates++;
  res->gradients += (uint64_t)x->n;
  return GS_OK;
}

/* every server's every update, each as soon as the versions it needs exist */
static int run_all(replay *r, gs_replay_result *res, gs_err *e) {
  for (;;) {
    bool left = false, moved = false;
    int bj = 0, bk = 0;
    uint64_t bv = 0;
    for (int k = 0; k < r->K; k++) {
      int j = 0;
      uint64_t v = 0;
      while (r->s[k].next < r->s[k].l->nup && ready(r, k, &j, &v)) {
        GS_TRY(step_server(r, k, res, e));
        moved = true;
      }
      if (r->s[k].next < r->s[k].l->nup && !left) {
        left = true;
        bk = k, bj = j, bv = v;
      }
    }
    if (!left) return GS_OK;
    if (!moved)
      return GS_FAIL(e, GS_EINVAL, "replay: the logs' updates cannot be put in any order: "
                     "shard %d's update %zu needs version %llu of shard %d, which needs "
                     "versions not made yet", bk, r->s[bk].next + 1, (unsigned long long)bv,
                     bj);
  }
}

static void free_server(replay *r, server *sv) {
  gs_kernels *k = r->k;
  if (sv->have_u) gs_update_free(&sv->u);
  if (sv->master) k->release(k, sv->master);
  if (sv->acc) k->release(k, sv->acc);
  for (size_t v = 0; sv->kept && v <= sv->l->nup; v++) free(sv->kept[v]);
  free(sv->kept);
  free(sv->uses);
  free(sv->base);
}

int gs_replay(const gs_apply_log *l, int K, gs_kernels *k, const char *save_dir,
              gs_replay_result *res, gs_err *e) {
  memset(res, 0, sizeof *res);
  if (K < 1 || K != l[0].shards)
    return GS_FAIL(e, GS_EINVAL, "replay: %d logs of a run of %d servers", K, l[0].shards);
  if (l->world < 1 || l->world > MAX_REPLAY_WORLD)
    return GS_FAIL(e, GS_EINVAL, "replay: world %d; one process replays at most %d ranks",
                   l->world, MAX_REPLAY_WORLD);
  GS_TRY(one_run(l, K, e));
  replay r = {.l = l, .K = K, .k = k};
  r.s = calloc((size_t)K, sizeof *r.s);
  r.t = calloc((size_t)l->world, sizeof *r.t);
  int rc = r.s && r.t ? GS_OK : GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (int j = 0; rc == GS_OK && j < K; j++) {
    server *sv = &r.s[j];
    sv->l = &l[j];
    sv->off = r.n;
    sv->n = l[j].nparams;
    r.n += sv->n;
    sv->kept = calloc(l[j].nup + 1, sizeof *sv->kept);
    sv->uses = calloc(l[j].nup + 1, sizeof *sv->uses);
    if (!sv->kept || !sv->uses) rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  if (rc == GS_OK && !(r.full = malloc(r.n * sizeof(float))))
    rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (rc == GS_OK) rc = plan(&r, e);
  /* version 0: the parameters every rank starts from (rank 0's, as the
   * servers' Init carries them) */
  if (rc == GS_OK) rc = trainer_of(&r, 0, e);
  gs_sync_config c;
  memset(&c, 0, sizeof c);
  if (rc == GS_OK) gs_trainer_sync_config(r.t[0], &c);
  for (int j = 0; rc == GS_OK && j < K; j++) {
    server *sv = &r.s[j];
    sv->master = k->alloc(k, sv->n * sizeof(float));
    sv->acc = k->alloc(k, sv->n * sizeof(float));
    if (!sv->master || !sv->acc) rc = GS_FAIL(e, GS_ENOMEM, "replay: out of device memory");
    if (rc == GS_OK) {
      k->copy(k, sv->master, c.params + sv->off, sv->n * sizeof(float));
      rc = gs_update_init(&sv->u, k, sv->n, l->world, c.sgd, GS_F32, c.scaler, e);
      sv->have_u = rc == GS_OK;
    }
    if (rc == GS_OK) rc = keep(&r, sv, 0, e);
  }
  if (rc == GS_OK) rc = run_all(&r, res, e);
  for (int j = 0; rc == GS_OK && j < K; j++)
    k->copy(k, c.params + r.s[j].off, r.s[j].master, r.s[j].n * sizeof(float));
  if (rc == GS_OK) {
    k->to_host(k, r.full, c.params, r.n * sizeof(float));
    rc = k->sync(k, e);
    res->hash = gs_params_hash(r.full, r.n);
  }
  if (rc == GS_OK && save_dir) rc = gs_trainer_save(r.t[0], save_dir, e);
  for (int j = 0; r.s && j < K; j++)
    if (r.s[j].l) free_server(&r, &r.s[j]);
  for (int i = 0; r.t && i < l->world; i++) gs_trainer_destroy(r.t[i]);
  free(r.s);
  free(r.t);
  free(r.full);
  return rc;
}
