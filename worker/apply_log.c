/* apply_log.c: the apply-order log of a stale ps server (worker.h): built
 * update by update from the server's hook, written as text, read back
 * for a replay. The header is what makes every gradient again: the
 * training configuration, the world (each rank's shard) and the BLAS
 * threads of a rank (and, for one of K sharded servers, which shard). A
 * reader trusts nothing: every line is checked and every size bounded
 * before it is used. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/worker.h"

#define MAGIC "gradsync-apply-order 1"
#define MAX_WORLD 65536
#define MAX_FILE ((size_t)1 << 30)
#define MAX_STR 4096
#define MAX_SHARDS 1024

uint64_t gs_params_hash(const float *p, size_t n) {
  return gs_hash_bytes(GS_HASH_INIT, p, n * sizeof(float));
}

static char *dup_str(const char *s) { return strdup(s ? s : ""); }

int gs_apply_log_init(gs_apply_log *l, const gs_train_opts *t, int threads, const char *sync,
                      size_t nparams, gs_err *e) {
  memset(l, 0, sizeof *l);
  l->train = *t;
  l->model = dup_str(t->model);
  l->data = dup_str(t->data);
  l->sync = dup_str(sync);
  if (!l->model || !l->data || !l->sync) {
    gs_apply_log_free(l);
    return GS_FAIL(e, GS_ENOMEM, "out of memory for the apply-order log");
  }
  l->train.model = l->model;
  l->train.data = l->data;
  l->load = t->load_params ? strdup(t->load_params) : NULL;
  l->train.load_params = l->load;
  l->freeze = t->freeze && *t->freeze ? strdup(t->freeze) : NULL;
  l->train.freeze = l->freeze;
  if ((t->load_params && !l->load) || (t->freeze && *t->freeze && !l->freeze)) {
    gs_apply_log_free(l);
    return GS_FAIL(e, GS_ENOMEM, "out of memory for the apply-order log");
  }
  l->world = t->world;
  l->threads = threads;
  l->shards = 1;
  l->nparams = nparams;
  return GS_OK;
}

void gs_apply_log_free(gs_apply_log *l) {
  free(l->model);
  free(l->data);
  free(l->sync);
  free(l->load);
  free(l->freeze);
  free(l->up);
  free(l->grads);
  memset(l, 0, sizeof *l);
}

static int grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * size);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

/* one update, appended; false when memory ran out */
static bool append(gs_apply_log *l, uint64_t version, uint64_t hash, int n, const int *ranks,
                   const int64_t *steps, const uint64_t *bases) {
  if (grow((void **)&l->up, &l->capup, l->nup + 1, sizeof *l->up) ||
      grow((void **)&l->grads, &l->capgrads, l->ngrads + (size_t)n, sizeof *l->grads))
    return false;
  l->up[l->nup++] = (gs_apply_update){.version = version, .hash = hash, .first = l->ngrads,
                                      .n = n};
  for (int i = 0; i < n; i++)
    l->grads[l->ngrads++] = (gs_apply_grad){.rank = ranks[i], .step = steps[i],
                                            .base = bases[i]};
  return true;
}

void gs_apply_log_add(void *ctx, const gs_applied *a) {
  gs_apply_log *l = ctx;
  if (l->lost) return;
  if (!l->nparams) l->nparams = a->count; /* a server of its own learns it from rank 0 */
  if (!append(l, a->version, gs_params_hash(a->params, a->count), a->n, a->ranks, a->steps,
              a->bases))
    l->lost = true;
}

/* ---- text ---- */

typedef struct buf {
  char *p;
  size_t len, cap;
  bool oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = true;
      return;
    }
    if (b->p && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    if (grow((void **)&b->p, &b->cap, b->len + (size_t)n + 1, 1)) {
      b->oom = true;
      return;
    }
  }
}

char *gs_apply_log_text(const gs_apply_log *l, size_t *len, gs_err *e) {
  if (l->lost) {
    GS_FAIL(e, GS_ENOMEM, "the apply-order log lost an update (out of memory)");
    return NULL;
  }
  const gs_train_opts *t = &l->train;
  buf b = {0};
  put(&b, "%s\n", MAGIC);
  put(&b, "# the updates a ps server applied, in order; bench --mode local --replay FILE "
          "recomputes them (docs/stragglers.md)\n");
  put(&b, "sync %s\nworld %d\nthreads %d\nparams %zu\n", l->sync, l->world, l->threads,
      l->nparams);
  if (l->shards > 1) put(&b, "shards %d\nshard %d\n", l->shards, l->shard);
  put(&b, "model %s\ndata %s\nsynthetic_samples %" PRId64 "\nbatch %d\nsteps %" PRId64 "\n",
      t->model, t->data, t->synthetic_samples, t->batch, t->steps);
  /* floats as their bits' exact decimal (%a would be exact too, but less readable) */
  put(&b, "lr %.9g\nmomentum %.9g\nweight_decay %.9g\nseed %" PRIu64 "\nshuffle %d\n"
          "drop_last %d\ncompute_ms %.17g\n",
      (double)t->lr, (double)t->momentum, (double)t->weight_decay, t->seed, t->shuffle,
      t->drop_last, t->compute_ms);
  if (l->load) put(&b, "load_params %s\n", l->load);
  if (l->freeze) put(&b, "freeze %s\n", l->freeze);
  for (size_t u = 0; u < l->nup; u++) {
    const gs_apply_update *x = &l->up[u];
    put(&b, "update %" PRIu64 " hash %016" PRIx64 " grads", x->version, x->hash);
    for (int i = 0; i < x->n; i++) {
      const gs_apply_grad *g = &l->grads[x->first + (size_t)i];
      put(&b, " %d:%" PRId64 ":%" PRIu64, g->rank, g->step, g->base);
    }
    put(&b, "\n");
  }
  if (b.oom) {
    free(b.p);
    GS_FAIL(e, GS_ENOMEM, "out of memory writing the apply-order log");
    return NULL;
  }
  *len = b.len;
  return b.p;
}

/* ---- reading ---- */

#define BAD(...) GS_FAIL(e, GS_EINVAL, __VA_ARGS__)

static int get_i64(const char *v, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) return -1;
  *out = x;
  return 0;
}

static int get_f(const char *v, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || x != x) return -1;
  *out = x;
  return 0;
}

/* one "key value" header line into l; 0, or -1 for an unknown key, -2 for
 * a bad value */
static int header(gs_apply_log *l, const char *key, const char *v) {
  gs_train_opts *t = &l->train;
  int64_t i;
  double d;
  if (!strcmp(key, "sync")) return (l->sync = strdup(v)) ? 0 : -2;
  if (!strcmp(key, "model")) return (l->model = strdup(v)) ? 0 : -2;
  if (!strcmp(key, "data")) return (l->data = strdup(v)) ? 0 : -2;
  if (!strcmp(key, "load_params")) return (l->load = strdup(v)) ? 0 : -2;
  if (!strcmp(key, "freeze")) return (l->freeze = strdup(v)) ? 0 : -2;
  if (!strcmp(key, "world")) {
    if (get_i64(v, 2, MAX_WORLD, &i)) return -2;
    l->world = (int)i;
  } else if (!strcmp(key, "shards")) {
    if (get_i64(v, 2, MAX_SHARDS, &i)) return -2;
    l->shards = (int)i;
  } else if (!strcmp(key, "shard")) {
    if (get_i64(v, 0, MAX_SHARDS - 1, &i)) return -2;
    l->shard = (int)i;
  } else if (!strcmp(key, "threads")) {
    if (get_i64(v, 1, 1024, &i)) return -2;
    l->threads = (int)i;
  } else if (!strcmp(key, "params")) {
    if (get_i64(v, 1, INT64_C(1) << 40, &i)) return -2;
    l->nparams = (size_t)i;
  } else if (!strcmp(key, "synthetic_samples")) {
    if (get_i64(v, 1, INT64_C(1) << 40, &i)) return -2;
    t->synthetic_samples = i;
  } else if (!strcmp(key, "batch")) {
    if (get_i64(v, 1, 1 << 24, &i)) return -2;
    t->batch = (int)i;
  } else if (!strcmp(key, "steps")) {
    if (get_i64(v, 1, INT64_C(1) << 40, &i)) return -2;
    t->steps = i;
  } else if (!strcmp(key, "seed")) {
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 10);
    if (errno || end == v || *end || *v == '-') return -2;
    t->seed = s;
  } else if (!strcmp(key, "shuffle") || !strcmp(key, "drop_last")) {
    if (get_i64(v, 0, 1, &i)) return -2;
    *(!strcmp(key, "shuffle") ? &t->shuffle : &t->drop_last) = i == 1;
  } else if (!strcmp(key, "lr") || !strcmp(key, "momentum") || !strcmp(key, "weight_decay")) {
    if (get_f(v, &d) || d < 0 || d > 1e6) return -2;
    *(!strcmp(key, "lr") ? &t->lr : !strcmp(key, "momentum") ? &t->momentum
                                                              : &t->weight_decay) = (float)d;
  } else if (!strcmp(key, "compute_ms")) {
    if (get_f(v, &d) || d < 0 || d > 1e7) return -2;
    t->compute_ms = d;
  } else {
    return -1;
  }
  return 0;
}

/* "update V hash H grads r:s:b ..." */
static int update_line(gs_apply_log *l, char *line, const char *name, size_t lno, gs_err *e) {
  char *save = NULL, *w[4];
  for (int i = 0; i < 4; i++) w[i] = strtok_r(i ? NULL : line, " ", &save);
  int64_t v;
  char *end;
  if (!w[3] || strcmp(w[0], "update") || strcmp(w[2] ? w[2] : "", "hash") ||
      get_i64(w[1], 1, INT64_MAX, &v))
    return BAD("%s line %zu: not 'update V hash H grads RANK:STEP:BASE ...'", name, lno);
  errno = 0;
  uint64_t h = strtoull(w[3], &end, 16);
  char *g = strtok_r(NULL, " ", &save);
  if (errno || *end || end == w[3] || !g || strcmp(g, "grads"))
    return BAD("%s line %zu: update %" PRId64 ": not 'hash H grads ...' with H in hex", name,
               lno, v);
  if ((uint64_t)v != l->nup + 1)
    return BAD("%s line %zu: update %" PRId64 " where update %zu was due (updates are numbered "
               "1, 2, ... in the order they were applied)", name, lno, v, l->nup + 1);
  int ranks[64], n = 0;
  int64_t steps[64];
  uint64_t bases[64];
  int *rk = l->world <= 64 ? ranks : malloc((size_t)l->world * sizeof *rk);
  int64_t *st = l->world <= 64 ? steps : malloc((size_t)l->world * sizeof *st);
  uint64_t *bs = l->world <= 64 ? bases : malloc((size_t)l->world * sizeof *bs);
  int rc = rk && st && bs ? GS_OK : GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (char *x = strtok_r(NULL, " ", &save); rc == GS_OK && x; x = strtok_r(NULL, " ", &save)) {
    long long r, s;
    unsigned long long b;
    int used = 0;
    if (n >= l->world)
      rc = BAD("%s line %zu: update %" PRId64 " sums more gradients than the world's %d ranks",
               name, lno, v, l->world);
    else if (sscanf(x, "%lld:%lld:%llu%n", &r, &s, &b, &used) != 3 || x[used] || r < 0 ||
             r >= l->world || s < 0 || s >= l->train.steps || b >= (uint64_t)v || x[0] == '-')
      rc = BAD("%s line %zu: update %" PRId64 ": '%.40s' is not RANK:STEP:BASE with a rank "
               "below %d, a step below %" PRId64 " and a base version below %" PRId64, name,
               lno, v, x, l->world, l->train.steps, v);
    else
      rk[n] = (int)r, st[n] = s, bs[n++] = b;
  }
  if (rc == GS_OK && n == 0)
    rc = BAD("%s line %zu: update %" PRId64 " sums no gradient", name, lno, v);
  if (rc == GS_OK && !append(l, (uint64_t)v, h, n, rk, st, bs))
    rc = GS_FAIL(e, GS_ENOMEM, "out of memory reading %s", name);
  if (rk != ranks) free(rk);
  if (st != steps) free(st);
  if (bs != bases) free(bs);
  return rc;
}

int gs_apply_log_parse(const char *text, size_t len, const char *name, gs_apply_log *l,
                       gs_err *e) {
  memset(l, 0, sizeof *l);
  gs_train_opts_default(&l->train);
  l->shards = 1;
  char *copy = malloc(len + 1);
  if (!copy) return GS_FAIL(e, GS_ENOMEM, "out of memory reading %s", name);
  memcpy(copy, text, len);
  copy[len] = 0;
  int rc = GS_OK;
  if (memchr(text, 0, len)) rc = BAD("%s: not an apply-order log (a NUL byte)", name);
  size_t lno = 0;
  char *save = NULL;
  bool magic = false;
  for (char *line = rc ? NULL : strtok_r(copy, "\n", &save); rc == GS_OK && line;
       line = strtok_r(NULL, "\n", &save)) {
    lno++;
    if (!magic) {
      if (strcmp(line, MAGIC))
        rc = BAD("%s: not an apply-order log of this version (its first line is not '%s')",
                 name, MAGIC);
      magic = true;
      continue;
    }
    if (line[0] == '#') continue;
    if (!strncmp(line, "update ", 7)) {
      if (!l->sync || !l->world || !l->threads || !l->model || !l->data || !l->nparams)
        rc = BAD("%s line %zu: an update before the header's sync, world, threads, model, "
                 "data and params", name, lno);
      else
        rc = update_line(l, line, name, lno, e);
      continue;
    }
    /* the updates were checked against the header above them: a key after
     * them (another world, fewer steps) would void those checks */
    if (l->nup) {
      rc = BAD("%s line %zu: a header line after update %zu (the header comes first, then "
               "the updates)", name, lno, l->nup);
      continue;
    }
    char *sp = strchr(line, ' ');
    if (!sp || strlen(sp + 1) > MAX_STR) {
      rc = BAD("%s line %zu: not 'KEY VALUE'", name, lno);
      continue;
    }
    *sp = 0;
    bool again = (!strcmp(line, "sync") && l->sync) || (!strcmp(line, "model") && l->model) ||
                 (!strcmp(line, "data") && l->data) || (!strcmp(line, "load_params") && l->load) ||
                 (!strcmp(line, "freeze") && l->freeze);
    int h = again ? -2 : header(l, line, sp + 1);
    if (h == -1) rc = BAD("%s line %zu: unknown key '%.40s'", name, lno, line);
    if (h == -2) rc = BAD("%s line %zu: bad value for %.40s: '%.60s'", name, lno, line, sp + 1);
  }
  free(copy);
  if (rc == GS_OK && !magic) rc = BAD("%s: empty, not an apply-order log", name);
  if (rc == GS_OK && l->nup == 0) rc = BAD("%s: no update in it", name);
  if (rc == GS_OK && l->shard >= l->shards)
    rc = BAD("%s: shard %d of %d (a sharded log says 'shards K' and 'shard k' with k < K)",
             name, l->shard, l->shards);
  if (rc == GS_OK) {
    l->train.model = l->model;
    l->train.data = l->data;
    l->train.load_params = l->load;
    l->train.freeze = l->freeze;
    l->train.world = l->world;
  }
  if (rc < 0) gs_apply_log_free(l);
  return rc;
}

int gs_apply_log_read(const char *path, gs_apply_log *l, gs_err *e) {
  memset(l, 0, sizeof *l);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > MAX_FILE) {
    int err = errno;
    if (fd >= 0) close(fd);
    return GS_FAIL(e, GS_EINVAL, "--replay %s: %s", path,
                   fd < 0 ? strerror(err) : "not a regular file of at most 1 GiB");
  }
  size_t len = (size_t)st.st_size, got = 0;
  char *text = malloc(len + 1);
  while (text && got < len) {
    ssize_t r = read(fd, text + got, len - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (!text || got != len) {
    free(text);
    return GS_FAIL(e, GS_EIO, "--replay %s: cannot read it", path);
  }
  int rc = gs_apply_log_parse(text, len, path, l, e);
  free(text);
  return rc;
}
