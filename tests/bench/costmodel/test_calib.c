/* test_calib.c: the calibration record (bench/costmodel/calib.c).
 *  - a record written and read back holds the same values (with and
 *    without the optional link and comment), and fills a machine;
 *  - a file with a missing, negative, non-numeric, misspelt or out-of-range
 *    field, a wrong format or version, a duplicate key, broken JSON, a
 *    number too large for a double, or no file at all is refused with a
 *    message naming what is wrong;
 *  - writing an invalid record fails and leaves no file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt.h"

static char dir[256];

static gs_cm_calib sample(void) {
  gs_cm_calib c = {.alpha_s = 2.25e-5, .local_Bps = 3.1e9, .reduce_Bps = 8.5e9,
                   .copy_Bps = 1.25e10, .optim_pps = 9.5e8, .has_link = true,
                   .link_Bps = 1.25e8, .link_latency_s = 1e-4, .fwd_s = 0.0123,
                   .bwd_s = 0.0246};
  snprintf(c.transport, sizeof c.transport, "zmq-tcp-loopback");
  snprintf(c.model, sizeof c.model, "resnet50");
  snprintf(c.precision, sizeof c.precision, "fp16");
  snprintf(c.comment, sizeof c.comment, "compute per sample: a V100 by hand");
  return c;
}

static void same(const gs_cm_calib *a, const gs_cm_calib *b) {
  CHECK(!strcmp(a->transport, b->transport) && !strcmp(a->model, b->model));
  CHECK(!strcmp(a->precision, b->precision) && !strcmp(a->comment, b->comment));
  CHECK(a->has_link == b->has_link);
  const double va[] = {a->alpha_s, a->local_Bps, a->reduce_Bps, a->copy_Bps, a->optim_pps,
                       a->link_Bps, a->link_latency_s, a->fwd_s, a->bwd_s};
  const double vb[] = {b->alpha_s, b->local_Bps, b->reduce_Bps, b->copy_Bps, b->optim_pps,
                       b->link_Bps, b->link_latency_s, b->fwd_s, b->bwd_s};
  for (size_t i = 0; i < sizeof va / sizeof va[0]; i++)
    CHECK(mt_near(va[i], vb[i], 1e-9), "field %zu: %.17g vs %.17g", i, va[i], vb[i]);
}

static void round_trip(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/cal.json", dir);
  gs_cm_calib c = sample(), back;
  gs_err e = {0};
  CHECK_OK(gs_cm_calib_write(path, &c, &e), &e);
  CHECK_OK(gs_cm_calib_read(path, &back, &e), &e);
  same(&c, &back);
  c.has_link = false;
  c.link_Bps = c.link_latency_s = 0;
  c.comment[0] = 0;
  CHECK_OK(gs_cm_calib_write(path, &c, &e), &e);
  CHECK_OK(gs_cm_calib_read(path, &back, &e), &e);
  same(&c, &back);
  gs_cm_machine m = {.link_Bps = 7, .link_latency_s = 8};
  gs_cm_calib_machine(&back, &m);
  CHECK(m.link_Bps == 7 && m.link_latency_s == 8);  /* no link part: left to the flags */
  CHECK(m.alpha_s == back.alpha_s && m.reduce_Bps == back.reduce_Bps && m.optim_pps == back.optim_pps);
  back = sample();
  gs_cm_calib_machine(&back, &m);
  CHECK(m.link_Bps == back.link_Bps && m.link_latency_s == back.link_latency_s);
  unlink(path);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* Read path and expect a refusal whose message contains needle. */
static void refused(const char *path, const char *needle, const char *why) {
  gs_cm_calib c;
  gs_err e = {0};
  int rc = gs_cm_calib_read(path, &c, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, needle), "%s: expected '%s', got %d: %s", why, needle,
         rc, e.msg);
}

static void rejects(void) {
  /* one change to a good record each: in object `obj` ("" for the top),
   * set `key` to the JSON `value`, or delete it when value is NULL */
  static const struct {
    const char *obj, *key, *value, *needle, *why;
  } cases[] = {
      {"", "reduce_Bps", NULL, "reduce_Bps", "missing field"},
      {"", "copy_Bps", "-1", "copy_Bps", "negative rate"},
      {"", "optimizer_params_per_s", "\"fast\"", "optimizer_params_per_s must be", "string"},
      {"", "reduce_bps", "1e9", "unknown key \"reduce_bps\"", "misspelt key"},
      {"", "format", "\"report\"", "\"format\"", "wrong format"},
      {"", "version", "2", "\"version\"", "wrong version"},
      {"compute", "precision", "\"fp64\"", "compute.precision", "unknown precision"},
      {"link", "latency_s", NULL, "link.latency_s", "half a link"},
      {"compute", "forward_s_per_sample", NULL, "compute.forward_s_per_sample", "no forward"},
      {"transport", "alpha_s", "-2e-6", "transport.alpha_s", "negative alpha"},
      {"transport", "bandwidth_Bps", "0", "transport.bandwidth_Bps", "zero bandwidth"},
      {"compute", "gpu", "\"h100\"", "unknown key \"gpu\" in compute", "unknown nested key"},
      {"", "transport", "3", "\"transport\" must be an object", "transport not an object"},
  };
  char path[300];
  snprintf(path, sizeof path, "%s/bad.json", dir);
  gs_cm_calib good = sample();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *j = gs_cm_calib_json(&good);
    json_t *o = *cases[i].obj ? json_object_get(j, cases[i].obj) : j;
    if (cases[i].value)
      json_object_set_new(o, cases[i].key, json_loads(cases[i].value, JSON_DECODE_ANY, NULL));
    else
      json_object_del(o, cases[i].key);
    CHECK(json_dump_file(j, path, 0) == 0);
    json_decref(j);
    refused(path, cases[i].needle, cases[i].why);
  }
  json_t *j = gs_cm_calib_json(&good);
  char *text = json_dumps(j, 0);
  json_decref(j);
  char buf[2048];
  /* the same key twice: the second would silently win */
  snprintf(buf, sizeof buf, "{\"copy_Bps\": 1e9, %s", text + 1);
  write_text(path, buf);
  refused(path, "duplicate", "duplicate key");
  snprintf(buf, sizeof buf, "%.*s", (int)strlen(text) - 1, text);  /* no closing brace */
  write_text(path, buf);
  refused(path, "line", "truncated JSON");
  write_text(path, "{\"copy_Bps\": 1e999}");
  refused(path, "overflow", "number beyond a double");
  write_text(path, "[1, 2]");
  refused(path, "not a JSON object", "array");
  free(text);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/none.json", dir);
  refused(missing, missing, "no file");
  unlink(path);

  /* an invalid record is not written */
  gs_cm_calib bad = sample();
  bad.reduce_Bps = -5;
  gs_err e = {0};
  CHECK(gs_cm_calib_write(path, &bad, &e) == GS_EINVAL && strstr(e.msg, "reduce_Bps"));
  CHECK(access(path, F_OK) != 0);
  bad = sample();
  bad.fwd_s = INFINITY;
  gs_err_clear(&e);
  CHECK(gs_cm_calib_check(&bad, &e) == GS_EINVAL && strstr(e.msg, "forward"));
  bad = sample();
  bad.model[0] = 0;
  gs_err_clear(&e);
  CHECK(gs_cm_calib_check(&bad, &e) == GS_EINVAL && strstr(e.msg, "compute.model"));
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/gs-model-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  round_trip();
  rejects();
  rmdir(dir);
  return check_done("model_calib");
}
