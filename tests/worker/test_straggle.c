/* test_straggle.c: stragglers on demand (worker/straggle.c):
 *  - --slow's spec: good ones parse (sorted, round trip through the text),
 *    bad ones are refused with a message naming the part that is wrong;
 *  - the factor of listed and unlisted ranks;
 *  - the noise is a function of (seed, rank, step): the same every time,
 *    different across ranks and seeds, only ever adding work, with the
 *    half-normal's mean CV * sqrt(2/pi) over many steps;
 *  - the busy work really uses the CPU (process CPU time ~ wall time),
 *    which a sleep would not;
 *  - a slowed rank's trainer does at least (factor - 1) x its compute of
 *    extra work every step (from its spans), with the same parameters. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "tests/check.h"
#include "worker/worker.h"

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void parse_cases(void) {
  gs_err e = {0};
  gs_straggle s = {0};
  CHECK_OK(gs_straggle_parse("3,1:2.5", &s, &e), &e);
  CHECK(s.nslow == 2 && s.slow[0] == 1 && s.slow[1] == 3 && s.factor == 2.5);
  char buf[64];
  gs_straggle_text(&s, buf, sizeof buf);
  CHECK(!strcmp(buf, "1,3:2.5"), "text %s", buf);
  CHECK(gs_straggle_factor(&s, 3) == 2.5 && gs_straggle_factor(&s, 1) == 2.5);
  CHECK(gs_straggle_factor(&s, 0) == 1 && gs_straggle_factor(&s, 2) == 1);
  gs_straggle none = {0};
  gs_straggle_text(&none, buf, sizeof buf);
  CHECK(!strcmp(buf, ""), "no stragglers: '%s'", buf);
  CHECK(gs_straggle_multiplier(&none, 1, 0, 5) == 1.0);

  static const struct { const char *spec, *says; } bad[] = {
    {"3", "RANK[,RANK...]:FACTOR"}, {":2", "RANK[,RANK...]:FACTOR"},
    {"3:", "RANK[,RANK...]:FACTOR"}, {"a:2", "whole numbers"}, {"-1:2", "whole numbers"},
    {"1:0.5", "[1, 1000]"}, {"1:nan", "[1, 1000]"}, {"1:2x", "[1, 1000]"},
    {"1,1:2", "listed twice"}, {"1,:2", "missing"}, {"1 :2", "whole numbers"},
    {"1:2000", "[1, 1000]"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gs_err be = {0};
    gs_straggle t = s;
    int rc = gs_straggle_parse(bad[i].spec, &t, &be);
    CHECK(rc == GS_EINVAL && strstr(be.msg, bad[i].says) && strstr(be.msg, "--slow"),
          "'%s' gave %d: %s", bad[i].spec, rc, be.msg);
    CHECK(t.nslow == s.nslow && t.factor == s.factor, "'%s' changed the spec", bad[i].spec);
  }
}

static void noise(void) {
  gs_straggle s = {.jitter_cv = 0.2};
  CHECK(gs_straggle_multiplier(&s, 7, 1, 42) == gs_straggle_multiplier(&s, 7, 1, 42));
  int differ_rank = 0, differ_seed = 0;
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; i++) {
    double m = gs_straggle_multiplier(&s, 7, 1, i);
    CHECK(m >= 1.0, "step %d: multiplier %g below 1", i, m);
    sum += m - 1;
    differ_rank += m != gs_straggle_multiplier(&s, 7, 2, i);
    differ_seed += m != gs_straggle_multiplier(&s, 8, 1, i);
  }
  double mean = sum / n, want = 0.2 * sqrt(2.0 / M_PI);
  CHECK(fabs(mean - want) < 0.05 * want, "mean noise %g, half-normal's %g", mean, want);
  CHECK(differ_rank > n * 0.99 && differ_seed > n * 0.99, "%d %d", differ_rank, differ_seed);
  gs_straggle both = {.nslow = 1, .slow = {2}, .factor = 3, .jitter_cv = 0.2};
  CHECK(gs_straggle_multiplier(&both, 7, 2, 9) == 3 * gs_straggle_multiplier(&s, 7, 2, 9));
}

static void busy(void) {
  double w0 = gs_now(), c0 = cpu_now();
  gs_busy_work(0.2);
  double w = gs_now() - w0, c = cpu_now() - c0;
  CHECK(w >= 0.2, "busy %.3f s of wall time, asked 0.2", w);
  /* a sleep would leave the CPU time near 0; the machine may be shared
   * with other busy processes, which take their share of the core */
  CHECK(c >= 0.1 * w, "busy work used %.3f s of CPU in %.3f s", c, w);
}

static gs_train_opts opts(int rank) {
  gs_train_opts o;
  gs_train_opts_default(&o);
  o.model = "mlp:784-64-10";
  o.batch = 64;
  o.steps = 8;
  o.synthetic_samples = 1024;
  o.rank = rank;
  return o;
}

/* one rank's run under the local backend: its parameters; with a
 * straggler, every step's extra work checked against its spans: at least
 * (factor - 1) x (this forward + the previous backward), since busy work
 * runs at least as long as asked, whatever the machine's load */
static void train(gs_kernels *k, const gs_straggle *g, float *params) {
  gs_err e = {0};
  gs_train_opts o = opts(0);
  if (g) o.straggle = *g;
  gs_trainer *t = NULL;
  REQUIRE(gs_trainer_create(&o, k, &t, &e) == GS_OK, "%s", e.msg);
  gs_sync_config c;
  memset(&c, 0, sizeof c);
  gs_trainer_sync_config(t, &c);
  c.world = 1;
  gs_sync *s = NULL;
  REQUIRE(gs_sync_single(&c, &s, &e) == GS_OK, "%s", e.msg);
  CHECK_OK(gs_trainer_run(t, s, NULL, NULL, &e), &e);
  s->ops->close(s, true, &e);
  size_t n;
  const gs_span *sp = gs_trainer_spans(t, &n);
  double fwd = 0, bwd = -1;
  int stretched = 0;
  for (size_t i = 0; i < n; i++) {
    double d = sp[i].t1 - sp[i].t0;
    if (!strcmp(sp[i].name, "forward")) fwd = d;
    if (!strcmp(sp[i].name, "backward")) bwd = d;
    if (!strcmp(sp[i].name, "straggle")) {
      double want = (g->factor - 1) * (fwd + (bwd >= 0 ? bwd : 2 * fwd));
      CHECK(d >= want * 0.999, "extra work %.3f ms, want at least %.3f ms", d * 1e3, want * 1e3);
      stretched++;
    }
  }
  CHECK(stretched == (g ? (int)o.steps : 0), "%d of %lld steps stretched", stretched,
        (long long)o.steps);
  CHECK_OK(gs_trainer_copy_params(t, params, &e), &e);
  gs_trainer_destroy(t);
}

static void trainer(void) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  REQUIRE(k, "%s", e.msg);
  float a[784 * 64 + 64 + 64 * 10 + 10], b[sizeof a / sizeof a[0]];
  gs_straggle slow = {.nslow = 1, .slow = {0}, .factor = 5};
  train(k, NULL, a);
  train(k, &slow, b);
  CHECK(!memcmp(a, b, sizeof a), "a straggler changed the parameters");
  /* a rank not listed is not slowed; an invalid struct is refused */
  gs_train_opts o = opts(0);
  o.straggle = (gs_straggle){.nslow = 1, .slow = {0}, .factor = 0.5};
  gs_trainer *t = NULL;
  CHECK(gs_trainer_create(&o, k, &t, &e) == GS_EINVAL && strstr(e.msg, "--slow"), "%s", e.msg);
  o.straggle = (gs_straggle){.jitter_cv = -1};
  e = (gs_err){0};
  CHECK(gs_trainer_create(&o, k, &t, &e) == GS_EINVAL && strstr(e.msg, "--jitter"), "%s", e.msg);
  k->destroy(k);
}

int main(void) {
  parse_cases();
  noise();
  busy();
  trainer();
  return check_done("worker_straggle");
}
