/* test_backends.c: the table of backends (bench/job/backends.c) and the one
 * check of a combination (worker/caps.c).
 *
 *  - every mode picks its row: world 1 of training the single process, ps
 *    the ps, ring the CPU all-reduce or NCCL by device, the collective
 *    benchmark its mode's backend at every world;
 *  - the flags fill each row's options of its own;
 *  - every combination the command line used to refuse in several places
 *    is refused once, by the table, with a message naming the flags; the
 *    defaults of every row pass;
 *  - a backend's prepare() refuses the same combination with the same
 *    words for the backend's part (what it runs, as its flags chose it):
 *    one place decides, whichever side asks;
 *  - gs_caps_check's two kinds of refusal, on declarations made up here:
 *    a value the backend does not run, a value whose need is not met. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/job/job.h"
#include "tests/check.h"

static int parse(gs_opts *o, gs_err *e, const char *args) {
  char buf[512], *argv[32] = {"bench"};
  int argc = 1;
  snprintf(buf, sizeof buf, "%s", args);
  for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " ")) argv[argc++] = t;
  bool help;
  return gs_opts_parse(argc, argv, o, &help, e);
}

static void rows(void) {
  gs_opts o;
  gs_err e = {0};
  REQUIRE(parse(&o, &e, "--mode ps,ring --ps-servers 2 --ps-sync ssp:1 --ring-period 3 "
                        "--no-resend --algo hier") == GS_OK, "%s", e.msg);
  gs_run_backend b;
  CHECK_OK(gs_backends_pick(&o, GS_MODE_PS, 1, GS_DEV_CPU, &b, &e), &e);
  CHECK(b.backend == &gs_single_backend && b.mode == GS_MODE_SINGLE && !b.opts,
        "training at world 1 runs the single process");
  CHECK_OK(gs_backends_pick(&o, GS_MODE_PS, 4, GS_DEV_CPU, &b, &e), &e);
  CHECK(b.backend == &gs_ps_backend && b.opts == &b.ps && b.ps.servers == 2 &&
        b.ps.sync.model == GS_PS_SSP && b.ps.sync.staleness == 1 && !b.ps.dedicated);
  CHECK_OK(gs_backends_pick(&o, GS_MODE_ALLREDUCE, 4, GS_DEV_CPU, &b, &e), &e);
  CHECK(b.backend == &gs_allreduce_backend && b.opts == &b.allreduce &&
        b.allreduce.period == 3 && b.allreduce.no_resend && b.allreduce.algo == GS_ALGO_HIER);
  CHECK_OK(gs_backends_pick(&o, GS_MODE_ALLREDUCE, 4, GS_DEV_CUDA, &b, &e), &e);
  CHECK(b.backend == &gs_nccl_backend && b.allreduce.period == 3,
        "NCCL takes the all-reduce family's options");
  gs_opts_free(&o);
  REQUIRE(parse(&o, &e, "--mode ring --collective allreduce") == GS_OK, "%s", e.msg);
  CHECK_OK(gs_backends_pick(&o, GS_MODE_ALLREDUCE, 1, GS_DEV_CPU, &b, &e), &e);
  CHECK(b.backend == &gs_allreduce_backend, "the collective benchmark runs its mode at world 1");
  gs_opts_free(&o);
}

/* args must parse and be refused with every word of the list */
static void refused(const char *args, const char *w1, const char *w2) {
  gs_opts o;
  gs_err e = {0};
  int rc = parse(&o, &e, args);
  CHECK(rc == GS_EINVAL && strstr(e.msg, w1) && (!w2 || strstr(e.msg, w2)),
        "bench %s: %d '%s' (want '%s'%s%s)", args, rc, e.msg, w1, w2 ? ", " : "", w2 ? w2 : "");
  gs_opts_free(&o); /* what the parse made, refused or not (bench's main frees it too) */
}

static void accepted(const char *args) {
  gs_opts o;
  gs_err e = {0};
  int rc = parse(&o, &e, args);
  CHECK(rc == GS_OK, "bench %s: %s", args, e.msg);
  gs_opts_free(&o);
}

static void command_line(void) {
  /* what a backend does not run, named with the flags that chose it */
  refused("--mode ps --world 2 --compress topk:0.1 --ps-servers 2", "--compress topk:0.1",
          "sharded ps of 2 servers (--ps-servers 2)");
  refused("--mode ps --world 2 --compress fp16 --ps-servers 2", "--compress fp16",
          "--ps-servers 2");
  refused("--mode ps --world 2 --precision bf16 --ps-servers 2", "--precision bf16",
          "runs --precision fp32 only");
  refused("--mode ps --world 2 --ps-servers 2 --collective allreduce", "--collective allreduce",
          "--ps-servers 2");
  refused("--mode ps --world 2 --ps-servers 2 --ps-server-hosts --transport ipc",
          "--transport ipc", "--ps-server-hosts");
  refused("--mode local --compress topk:0.1", "--compress topk:0.1", "--mode local");
  refused("--mode ps --world 1,2 --compress topk:0.1", "--compress topk:0.1", "world 1");
  refused("--mode ring --world 2 --compress topk:0.1 --algo hier", "--compress topk:0.1",
          "--algo hier");
  refused("--mode ring --world 2 --compress topk:0.1 --ring-period 2", "--compress topk:0.1",
          "--ring-period 2");
  refused("--mode ring --world 2 --ring-period 4 --device cuda", "--ring-period 4", "NCCL");
  refused("--mode ps --world 2 --compress topk:0.1 --ps-local-reduce", "--compress topk:0.1",
          "--ps-local-reduce");
  /* what a value needs, wherever it runs */
  refused("--mode ps --world 2 --compress powersgd:2 --ps-sync ssp:1", "--compress powersgd:2",
          "needs every step synchronous (--ps-sync bsp");
  refused("--mode ps --world 2 --compress powersgd:2 --loss-scale 8", "--compress powersgd:2",
          "not --loss-scale 8");
  refused("--mode ring --world 2 --compress powersgd:2 --precision fp16", "--compress powersgd:2",
          "needs --precision fp32, not --precision fp16");
  refused("--mode ps --world 2 --compress topk:0.1 --device cuda", "--compress topk:0.1",
          "not --device cuda");
  refused("--mode ring --world 2 --compress powersgd:2 --ring-period 4", "--compress powersgd:2",
          "not --ring-period 4");
  refused("--mode ps --world 2 --ps-sync ssp:1 --overlap", "--ps-sync ssp:1", "not --overlap");
  refused("--mode ring --world 2 --ring-period 2 --precision bf16", "--ring-period 2",
          "--precision fp32");
  refused("--mode ring --world 2 --collective allreduce --ring-period 2", "--ring-period 2",
          "--collective");
  refused("--mode ring --world 2 --collective allreduce --compress fp16", "--compress fp16",
          "--collective");
  /* flags only one mode's backend takes */
  refused("--mode ring --ps-servers 2", "--ps-servers 2", "needs --mode ps");
  refused("--mode ps --ring-period 3", "--ring-period 3", "needs --mode ring");
  refused("--mode ps --no-resend", "--no-resend", "--mode ring");
  refused("--mode ps --world 2 --algo hier", "--algo hier", "needs --mode ring");
  /* ... and none at world 1 alone, where training is one process */
  refused("--mode ps --world 1 --ps-spare-hosts 2", "--ps-spare-hosts 2", "--world of 2");
  refused("--mode ring --world 1 --ring-period 3", "--ring-period 3", "--world of 2");
  accepted("--mode ps --world 1,2 --ps-servers 2");
  accepted("--mode ring --world 1,4 --ring-period 3");
  /* every row's defaults, and combinations that run */
  accepted("--mode ps,ring,local --world 1");
  accepted("--mode ps,ring --world 1,2,4");
  accepted("--mode ps --world 2 --compress topk:0.1");
  accepted("--mode ring --world 2 --compress topk:0.1");
  accepted("--mode ps,ring --world 2 --compress powersgd:2");
  accepted("--mode ps --world 2 --ps-servers 2 --ps-sync async");
  accepted("--mode ps --world 2 --ps-sync bsp --ps-backup 1");
  accepted("--mode ring --world 2 --ring-period 4");
  accepted("--mode ps,ring --world 2 --precision fp16");
  accepted("--mode ps --world 2 --ps-dedicated --collective allreduce");
  accepted("--mode ring --world 2 --device cuda --precision bf16");
}

/* the clause that names the backend in a refusal: from ": " to " only" */
static void backend_part(const char *msg, char *out, size_t cap) {
  const char *a = strstr(msg, ": the "), *z = strstr(msg, " only;");
  snprintf(out, cap, "%.*s", a && z && z > a ? (int)(z - a) : 0, a ? a : "");
}

/* The sharded ps with 16-bit gradients: refused by the command line and by
 * the ps backend's prepare() with the same words for the backend. */
static void both_places(void) {
  gs_opts o;
  gs_err e = {0};
  REQUIRE(parse(&o, &e, "--mode ps --world 2 --compress fp16") == GS_OK, "%s", e.msg);
  gs_run_backend b;
  CHECK_OK(gs_backends_pick(&o, GS_MODE_PS, 2, GS_DEV_CPU, &b, &e), &e);
  b.ps.servers = 2; /* as --ps-servers 2 would */
  gs_err cli = {0};
  CHECK(gs_backends_check_run(&o, &b, &cli) == GS_EINVAL);
  gs_opts_free(&o);

  gs_kernels *k = gs_kernels_cpu(1, &e);
  REQUIRE(k, "%s", e.msg);
  float p[64] = {0}, g[64] = {0};
  gs_bucket bk = {0, 64};
  gs_sync_config c = {.rank = 0, .world = 2, .timeout_ms = 2000, .host = "127.0.0.1", .k = k,
                      .params = p, .grads = g, .n = 64, .buckets = &bk, .nbuckets = 1,
                      .wire = GS_F16, .compress = {.kind = GS_COMPRESS_FP16}, .opts = &b.ps};
  gs_scaler_init(&c.scaler, 1.0f, false);
  void *state = NULL;
  char ep[GS_ENDPOINT_MAX];
  gs_err be = {0};
  CHECK(gs_ps_backend.prepare(&c, &state, ep, &be) == GS_EINVAL && !state);
  char x[256], y[256];
  backend_part(cli.msg, x, sizeof x);
  backend_part(be.msg, y, sizeof y);
  CHECK(x[0] && !strcmp(x, y), "the command line said '%s', the backend '%s'", cli.msg, be.msg);
  CHECK(strstr(be.msg, "ps rank 0: ") == be.msg, "the backend names its rank: %s", be.msg);
  printf("ok: one refusal, two places:\n  %s\n  %s\n", cli.msg, be.msg);
  k->destroy(k);
}

static void check_itself(void) {
  gs_caps c;
  gs_caps_everything(&c);
  snprintf(c.what, sizeof c.what, "a made-up backend");
  c.runs[GS_AXIS_DEVICE] = GS_CAP(GS_DEV_CPU);
  gs_want w;
  memset(&w, 0, sizeof w);
  gs_err e = {0};
  CHECK_OK(gs_caps_check(&c, &w, NULL, &e), &e);  /* nothing known: nothing refused */
  gs_want_set(&w, GS_AXIS_DEVICE, GS_DEV_CUDA, "--device %s", "cuda");
  CHECK(gs_caps_check(&c, &w, "rank 3: ", &e) == GS_EINVAL &&
        !strcmp(e.msg, "rank 3: --device cuda: a made-up backend runs --device cpu only; drop "
                       "one of them"), "%s", e.msg);
  gs_err_clear(&e);
  gs_want_set(&w, GS_AXIS_DEVICE, GS_DEV_CPU, NULL);
  gs_want_set(&w, GS_AXIS_SYNC, GS_SYNC_PERIODIC, "--ring-period 2");
  gs_want_set(&w, GS_AXIS_SCALING, 1, "--loss-scale 4");
  CHECK(gs_caps_check(&c, &w, NULL, &e) == GS_EINVAL &&
        !strcmp(e.msg, "--ring-period 2 needs no loss scaling, not --loss-scale 4; drop one of "
                       "them"), "%s", e.msg);
  gs_err_clear(&e);
  gs_want_set(&w, GS_AXIS_SCALING, 0, NULL);
  CHECK_OK(gs_caps_check(&c, &w, NULL, &e), &e);
}

int main(void) {
  rows();
  command_line();
  both_places();
  check_itself();
  return check_done("test_backends");
}
