/* profile_read.c: reading and checking a profile (profile_read.h).
 *
 * A profile comes from a user's file, so every field is checked before
 * anything is built from it, and a refusal names the field: a missing or
 * mistyped one, a shape whose dimensions do not multiply out to its
 * "numel", a negative or non-finite time, a layer index out of range, a
 * readiness order that is not a permutation of the parameters. Fields the
 * profiler writes for people (environment, command, step) are not
 * required. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/profile_read.h"

#define MAX_PARAMS (1 << 16)
#define MAX_LAYERS (1 << 16)
#define MAX_ELEMS ((size_t)1 << 40)
#define MAX_FILE ((size_t)64 << 20)

static int need(json_t *obj, const char *key, const char *where, const char *what,
                json_t **out, gs_err *e) {
  *out = json_object_get(obj, key);
  if (!*out)
    return GS_FAIL(e, GS_EINVAL, "%s: %s%s%s is missing", what, where, *where ? "." : "", key);
  return GS_OK;
}

/* a number >= 0 and finite */
static int seconds(json_t *obj, const char *key, const char *where, const char *what, double *out,
                   gs_err *e) {
  json_t *v;
  GS_TRY(need(obj, key, where, what, &v, e));
  double d = json_number_value(v);
  if (!json_is_number(v) || !isfinite(d) || d < 0)
    return GS_FAIL(e, GS_EINVAL, "%s: %s%s%s must be a number of seconds >= 0", what, where,
                   *where ? "." : "", key);
  *out = d;
  return GS_OK;
}

static int text(json_t *obj, const char *key, const char *where, const char *what, char *out,
                size_t cap, gs_err *e) {
  json_t *v;
  GS_TRY(need(obj, key, where, what, &v, e));
  const char *s = json_string_value(v);
  if (!s || !*s)
    return GS_FAIL(e, GS_EINVAL, "%s: %s%s%s must be a non-empty string", what, where,
                   *where ? "." : "", key);
  if (strlen(s) >= cap)
    return GS_FAIL(e, GS_EINVAL, "%s: %s%s%s is longer than %zu characters", what, where,
                   *where ? "." : "", key, cap - 1);
  snprintf(out, cap, "%s", s);
  return GS_OK;
}

static int index_of(json_t *v, int n, const char *where, const char *what, int *out, gs_err *e) {
  json_int_t i = json_integer_value(v);
  if (!json_is_integer(v) || i < 0 || i >= n)
    return GS_FAIL(e, GS_EINVAL, "%s: %s must be an index from 0 to %d", what, where, n - 1);
  *out = (int)i;
  return GS_OK;
}

static int read_layers(json_t *root, const char *what, gs_profile *p, gs_err *e) {
  json_t *arr;
  GS_TRY(need(root, "layers", "", what, &arr, e));
  size_t n = json_array_size(arr);
  if (!json_is_array(arr) || n < 1 || n > MAX_LAYERS)
    return GS_FAIL(e, GS_EINVAL, "%s: layers must be an array of 1 to %d layers", what,
                   MAX_LAYERS);
  p->layers = calloc(n, sizeof *p->layers);
  if (!p->layers) return GS_FAIL(e, GS_ENOMEM, "%s: out of memory", what);
  p->nlayers = (int)n;
  for (size_t i = 0; i < n; i++) {
    char where[48];
    snprintf(where, sizeof where, "layers[%zu]", i);
    json_t *l = json_array_get(arr, i);
    gs_prof_layer *d = &p->layers[i];
    if (!json_is_object(l)) return GS_FAIL(e, GS_EINVAL, "%s: %s must be an object", what, where);
    GS_TRY(text(l, "name", where, what, d->name, sizeof d->name, e));
    GS_TRY(seconds(l, "forward_s", where, what, &d->fwd_s, e));
    GS_TRY(seconds(l, "backward_s", where, what, &d->bwd_s, e));
    json_t *m;
    GS_TRY(need(l, "macs", where, what, &m, e));
    d->macs = json_is_null(m) ? -1 : json_number_value(m);
    if (!json_is_null(m) && (!json_is_number(m) || !isfinite(d->macs) || d->macs < 0))
      return GS_FAIL(e, GS_EINVAL, "%s: %s.macs must be a number >= 0, or null where not counted",
                     what, where);
  }
  return GS_OK;
}

static int read_shape(json_t *par, const char *where, const char *what, gs_prof_param *d,
                      gs_err *e) {
  json_t *shape, *numel;
  GS_TRY(need(par, "shape", where, what, &shape, e));
  GS_TRY(need(par, "numel", where, what, &numel, e));
  size_t nd = json_array_size(shape);
  if (!json_is_array(shape) || nd > 4)
    return GS_FAIL(e, GS_EINVAL, "%s: %s.shape must be an array of at most 4 sizes", what, where);
  d->ndim = (int)nd;
  size_t count = 1;
  for (size_t j = 0; j < nd; j++) {
    json_t *v = json_array_get(shape, j);
    json_int_t s = json_integer_value(v);
    if (!json_is_integer(v) || s < 1 || (size_t)s > MAX_ELEMS || count > MAX_ELEMS / (size_t)s)
      return GS_FAIL(e, GS_EINVAL, "%s: %s.shape[%zu] must be a size from 1, and the shape at "
                     "most 2^40 elements", what, where, j);
    d->shape[j] = s;
    count *= (size_t)s;
  }
  json_int_t want = json_integer_value(numel);
  if (!json_is_integer(numel) || want < 0 || (size_t)want != count)
    return GS_FAIL(e, GS_EINVAL, "%s: %s.shape multiplies out to %zu elements, and its numel "
                   "says %s%lld", what, where, count,
                   json_is_integer(numel) ? "" : "(not a number) ", (long long)want);
  d->count = count;
  return GS_OK;
}

static int read_params(json_t *root, const char *what, gs_profile *p, gs_err *e) {
  json_t *arr;
  GS_TRY(need(root, "parameters", "", what, &arr, e));
  size_t n = json_array_size(arr);
  if (!json_is_array(arr) || n < 1 || n > MAX_PARAMS)
    return GS_FAIL(e, GS_EINVAL, "%s: parameters must be an array of 1 to %d parameters", what,
                   MAX_PARAMS);
  p->params = calloc(n, sizeof *p->params);
  if (!p->params) return GS_FAIL(e, GS_ENOMEM, "%s: out of memory", what);
  p->nparams = (int)n;
  static const char *const dtypes[] = {"float32", "float16", "bfloat16", "float64"};
  for (size_t i = 0; i < n; i++) {
    char where[48];
    snprintf(where, sizeof where, "parameters[%zu]", i);
    json_t *par = json_array_get(arr, i);
    gs_prof_param *d = &p->params[i];
    if (!json_is_object(par))
      return GS_FAIL(e, GS_EINVAL, "%s: %s must be an object", what, where);
    GS_TRY(text(par, "name", where, what, d->name, sizeof d->name, e));
    for (size_t j = 0; j < i; j++)
      if (!strcmp(p->params[j].name, d->name))
        return GS_FAIL(e, GS_EINVAL, "%s: %s.name %s is parameters[%zu]'s too", what, where,
                       d->name, j);
    GS_TRY(read_shape(par, where, what, d, e));
    if (p->total > MAX_ELEMS - d->count)
      return GS_FAIL(e, GS_EINVAL, "%s: parameters: more than 2^40 elements", what);
    p->total += d->count;
    GS_TRY(text(par, "dtype", where, what, d->dtype, sizeof d->dtype, e));
    bool known = false;
    for (size_t j = 0; j < sizeof dtypes / sizeof dtypes[0]; j++)
      known |= !strcmp(dtypes[j], d->dtype);
    if (!known)
      return GS_FAIL(e, GS_EINVAL, "%s: %s.dtype %s: want float32, float16, bfloat16 or float64",
                     what, where, d->dtype);
    json_t *l;
    GS_TRY(need(par, "layer", where, what, &l, e));
    char lw[64];
    snprintf(lw, sizeof lw, "%s.layer", where);
    GS_TRY(index_of(l, p->nlayers, lw, what, &d->layer, e));
  }
  return GS_OK;
}

static int read_order(json_t *root, const char *what, gs_profile *p, gs_err *e) {
  json_t *arr;
  GS_TRY(need(root, "ready_order", "", what, &arr, e));
  if (!json_is_array(arr) || json_array_size(arr) != (size_t)p->nparams)
    return GS_FAIL(e, GS_EINVAL, "%s: ready_order must list each of the %d parameters once (it "
                   "has %zu entries)", what, p->nparams, json_array_size(arr));
  p->ready = malloc((size_t)p->nparams * sizeof *p->ready);
  int *seen = malloc((size_t)p->nparams * sizeof *seen);
  if (!p->ready || !seen) {
    free(seen);
    return GS_FAIL(e, GS_ENOMEM, "%s: out of memory", what);
  }
  for (int i = 0; i < p->nparams; i++) seen[i] = -1;
  int rc = GS_OK;
  for (int i = 0; i < p->nparams && rc == GS_OK; i++) {
    char where[48];
    snprintf(where, sizeof where, "ready_order[%d]", i);
    rc = index_of(json_array_get(arr, (size_t)i), p->nparams, where, what, &p->ready[i], e);
    if (rc == GS_OK && seen[p->ready[i]] >= 0)
      rc = GS_FAIL(e, GS_EINVAL, "%s: ready_order[%d] is parameter %d, already at ready_order[%d]: "
                   "the order must be a permutation of the parameters", what, i, p->ready[i],
                   seen[p->ready[i]]);
    if (rc == GS_OK) seen[p->ready[i]] = i;
  }
  free(seen);
  return rc;
}

static int read_root(json_t *root, const char *what, gs_profile *p, gs_err *e) {
  if (!json_is_object(root)) return GS_FAIL(e, GS_EINVAL, "%s: not a JSON object", what);
  json_t *v;
  GS_TRY(need(root, "format", "", what, &v, e));
  if (!json_is_string(v) || strcmp(json_string_value(v), "gradsync-profile"))
    return GS_FAIL(e, GS_EINVAL, "%s: format must be \"gradsync-profile\" (tools/profile_model.py "
                   "writes profiles)", what);
  GS_TRY(need(root, "version", "", what, &v, e));
  if (!json_is_integer(v) || json_integer_value(v) != 1)
    return GS_FAIL(e, GS_EINVAL, "%s: version must be 1", what);
  GS_TRY(text(root, "model", "", what, p->model, sizeof p->model, e));
  GS_TRY(need(root, "batch", "", what, &v, e));
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
    return GS_FAIL(e, GS_EINVAL, "%s: batch must be a whole number of samples from 1", what);
  p->batch = (int)json_integer_value(v);
  GS_TRY(seconds(root, "forward_tail_s", "", what, &p->fwd_tail_s, e));
  GS_TRY(seconds(root, "backward_tail_s", "", what, &p->bwd_tail_s, e));
  GS_TRY(read_layers(root, what, p, e));
  GS_TRY(read_params(root, what, p, e));
  GS_TRY(read_order(root, what, p, e));
  double t = p->fwd_tail_s + p->bwd_tail_s;
  for (int i = 0; i < p->nlayers; i++) t += p->layers[i].fwd_s + p->layers[i].bwd_s;
  if (!(t > 0) || !isfinite(t))
    return GS_FAIL(e, GS_EINVAL, "%s: layers: no time measured (every forward_s and backward_s "
                   "is 0)", what);
  json_t *env = json_object_get(root, "environment");
  const char *dev = json_string_value(json_object_get(env, "device_name"));
  snprintf(p->device, sizeof p->device, "%s", dev ? dev : "");
  return GS_OK;
}

int gs_profile_parse(const char *text, size_t len, const char *what, gs_profile *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return GS_FAIL(e, GS_EINVAL, "%s: not a profile (JSON, line %d: %s)", what, je.line, je.text);
  int rc = read_root(root, what, out, e);
  json_decref(root);
  if (rc) gs_profile_free(out);
  return rc;
}

/* A regular file only (opened without blocking: a FIFO or a device is
 * refused, not waited on), of at most MAX_FILE bytes. */
int gs_profile_load(const char *path, gs_profile *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return GS_FAIL(e, GS_EINVAL, "%s: %s", path, strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return GS_FAIL(e, GS_EINVAL, "%s: not a regular file", path);
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return GS_FAIL(e, GS_ENOMEM, "%s: %s", path, strerror(errno));
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  int rc = buf ? GS_OK : GS_FAIL(e, GS_ENOMEM, "%s: out of memory", path);
  while (rc == GS_OK) {
    if (len == cap) {
      char *nb = cap < MAX_FILE ? realloc(buf, cap * 2) : NULL;
      if (!nb) rc = GS_FAIL(e, GS_EINVAL, "%s: larger than a profile may be (64 MiB)", path);
      else buf = nb, cap *= 2;
      if (rc) break;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) rc = GS_FAIL(e, GS_EIO, "%s: read error", path);
      break;
    }
  }
  fclose(f);
  if (rc == GS_OK) rc = gs_profile_parse(buf, len, path, out, e);
  free(buf);
  return rc;
}

void gs_profile_free(gs_profile *p) {
  free(p->params);
  free(p->layers);
  free(p->ready);
  memset(p, 0, sizeof *p);
}
