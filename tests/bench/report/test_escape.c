/* test_escape.c: text that came from a rank reaches the files of a run as
 * text, never as markup.
 *
 * A 2-rank run whose ranks reported span names and a host name full of
 * markup ("<script>", quotes, ampersands: each fits the 24 bytes of a
 * name) goes through the summary into run.json, trace.json, the timeline
 * SVG, report.json, the charts and report.html. No file may hold the raw
 * markup; the SVGs and the HTML hold it escaped; the JSON files parse and
 * hold it as the same string. The gather refuses a name with a byte that
 * is no printable ASCII (it would be no valid JSON string). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/job/job.h"
#include "bench/report/report.h"
#include "proto/proto.h"
#include "tests/check.h"

#define NAME "<script>x</script>"
#define NAME2 "\"'&<b>"
#define HOST "<img src=x onerror=y>"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = NULL;
  size_t cap = 0;
  ssize_t n = getdelim(&s, &cap, '\0', f);
  fclose(f);
  if (n < 0) {
    free(s);
    return NULL;
  }
  return s;
}

/* no raw markup of ours in path; when escaped, the entity forms there */
static void clean(const char *dir, const char *name, bool escaped) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *s = slurp(path);
  CHECK(s != NULL, "%s not written", path);
  if (!s) return;
  /* the rank's own strings, raw (the page's own markup, such as the
   * verdict's <b>, is no rank's) */
  CHECK(!strstr(s, NAME) && !strstr(s, "&<b>") && !strstr(s, HOST),
        "%s holds markup from a rank", name);
  if (escaped)
    CHECK(strstr(s, "&lt;script&gt;") || strstr(s, "&lt;img"),
          "%s does not hold the names escaped", name);
  free(s);
}

/* the JSON file parses and holds the string s somewhere */
static bool json_holds(json_t *j, const char *s) {
  if (json_is_string(j)) return !strcmp(json_string_value(j), s);
  const char *k;
  json_t *v;
  size_t i;
  if (json_is_object(j)) json_object_foreach(j, k, v) if (json_holds(v, s)) return true;
  if (json_is_array(j)) json_array_foreach(j, i, v) if (json_holds(v, s)) return true;
  return false;
}

static void parses(const char *dir, const char *name, const char *s) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  json_error_t je;
  json_t *j = json_load_file(path, 0, &je);
  CHECK(j != NULL, "%s does not parse: %s", path, je.text);
  if (j) CHECK(json_holds(j, s), "%s lost the string '%s'", name, s);
  json_decref(j);
}

int main(void) {
  char tmpl[] = "/tmp/gs_escape_XXXXXX";
  const char *dir = mkdtemp(tmpl);
  REQUIRE(dir != NULL);
  char *argv[] = {"bench", "--model", "mlp:8-4-2", "--world", "2", "--steps", "6", NULL};
  gs_opts o;
  bool help = false;
  gs_err e = {0};
  REQUIRE(gs_opts_parse(7, argv, &o, &help, &e) == 0, "%s", e.msg);
  o.train.model = o.models[0];
  o.train.batch = o.batches[0];
  o.train.bucket_mb = o.bucket_mbs[0];
  gs_run_info info = gs_run_info_of(&o, GS_MODE_ALLREDUCE, 2);
  info.wall_start = 1000.0;
  gs_rank_result ranks[2];
  memset(ranks, 0, sizeof ranks);
  for (int r = 0; r < 2; r++) {
    ranks[r].rank = r;
    snprintf(ranks[r].host, sizeof ranks[r].host, "%s", HOST);
    ranks[r].link_host = -1;
    ranks[r].nrows = 6;
    ranks[r].rows = calloc(6, sizeof(gs_step_row));
    ranks[r].nspans = 12;
    ranks[r].spans = calloc(12, sizeof(gs_span));
    for (int s = 0; s < 6; s++) {
      gs_step_row *x = &ranks[r].rows[s];
      x->rank = r;
      x->step = s;
      x->t_start = 1000.0 + s * 0.01;
      x->step_s = 0.01;
      x->forward_s = 0.004;
      x->wait_s = 0.004;
      x->samples = 8;
      for (int k = 0; k < 2; k++) {
        gs_span *sp = &ranks[r].spans[2 * s + k];
        sp->t0 = x->t_start + 0.001 + k * 0.004;
        sp->t1 = sp->t0 + 0.003;
        sp->track = k; /* the backend's (1) are drawn in the timeline */
        sp->bucket = -1;
        snprintf(sp->name, sizeof sp->name, "%s", k ? NAME : NAME2);
      }
    }
  }
  gs_summary s;
  CHECK_OK(gs_summarize(&info, ranks, &s, &e), &e);
  CHECK_OK(gs_results_write_run(dir, &s, &info, ranks, &e), &e);
  CHECK_OK(gs_report_write(dir, &o, &s, 1, NULL, false, &e), &e);

  char sub[600], tl[600];
  snprintf(sub, sizeof sub, "runs/%s/run.json", s.id);
  parses(dir, sub, HOST);
  snprintf(sub, sizeof sub, "runs/%s/trace.json", s.id);
  parses(dir, sub, NAME);
  parses(dir, sub, NAME2);
  parses(dir, "report.json", HOST);
  snprintf(tl, sizeof tl, "timeline-%s.svg", s.id);
  clean(dir, tl, true);
  clean(dir, "report.html", true);
  clean(dir, "memory.svg", false);

  /* the gather refuses a span name that is no printable ASCII */
  gs_rank_result bad = {.rank = 1, .nspans = 1, .spans = calloc(1, sizeof(gs_span))};
  memcpy(bad.spans[0].name, "a\x01\xff", 3);
  uint8_t buf[4096];
  size_t row = 0, span = 0, len = 0;
  CHECK_OK(gs_measurements_pack_part(&bad, &row, &span, buf, sizeof buf, &len, &e), &e);
  Gradsync__Stats st = GRADSYNC__STATS__INIT;
  st.spans = 1;
  st.last = true;
  gs_rank_result x = {.rank = 1};
  gs_gather_limits lim = {.rows = 10, .spans = 10};
  CHECK(gs_gather_take(&st, buf, len, &lim, &x, &e) == 1 && x.failed &&
        strstr(x.error, "printable"), "a name with control bytes: %s", x.error);
  free(bad.spans);

  gs_summary_free(&s);
  for (int r = 0; r < 2; r++) gs_rank_result_free(&ranks[r]);
  gs_opts_free(&o);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_done("test_escape");
}
