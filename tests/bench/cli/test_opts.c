/* test_opts.c: bench's one flag table.
 *
 *  - the defaults bench applies (the table's, through its parsers) agree
 *    with worker's gs_train_opts_default on every training setting, and
 *    are what --help shows;
 *  - every flag --help lists parses, and every numeric flag refuses values
 *    outside its range with an error naming the flag (no value wraps: a
 *    timeout over INT_MAX ms, a seed over 2^64, a size over the limit);
 *  - --host is gone (--bind replaces it) and --bind refuses "*". */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "tests/check.h"

static int parse(gs_opts *o, gs_err *e, ...) {
  char *argv[32] = {"bench"};
  int argc = 1;
  va_list ap;
  va_start(ap, e);
  for (char *a; (a = va_arg(ap, char *)) && argc < 31;) argv[argc++] = a;
  va_end(ap);
  bool help;
  return gs_opts_parse(argc, argv, o, &help, e);
}

static void defaults_agree(void) {
  gs_opts o;
  gs_err e = {0};
  CHECK_OK(parse(&o, &e, NULL), &e);
  gs_train_opts w;
  gs_train_opts_default(&w);
  const gs_train_opts *t = &o.train;
  CHECK(t->seed == w.seed, "seed: bench %llu, worker %llu", (unsigned long long)t->seed,
         (unsigned long long)w.seed);
  CHECK(t->compute_ms == w.compute_ms, "compute_ms: bench %g, worker %g", t->compute_ms,
         w.compute_ms);
  CHECK(t->synthetic_samples == w.synthetic_samples, "synthetic samples: bench %lld, worker %lld",
         (long long)t->synthetic_samples, (long long)w.synthetic_samples);
  CHECK(t->steps == w.steps && t->lr == w.lr && t->momentum == w.momentum &&
        t->weight_decay == w.weight_decay && t->shuffle == w.shuffle &&
        t->drop_last == w.drop_last && t->precision == w.precision &&
        t->first_bucket_mb == w.first_bucket_mb && !strcmp(t->data, w.data));
  /* the per-run axes: the first value of each list */
  CHECK(!strcmp(o.models[0], w.model) && o.nmodels == 1);
  CHECK(o.batches[0] == w.batch && o.nbatches == 1);
  CHECK(o.bucket_mbs[0] == w.bucket_mb && o.nbucket_mbs == 1);
  /* fp32: a fixed scale of 1, what the trainer's "precision default" means */
  CHECK(t->loss_scale == 1.0f && !t->dynamic_scale && w.loss_scale <= 0);
  CHECK(o.nmodes == 2 && o.modes[0] == GS_MODE_PS && o.modes[1] == GS_MODE_ALLREDUCE);
  CHECK(o.nworlds == 3 && o.worlds[2] == 4 && !o.world_given && !o.mode_given);
  CHECK(o.timeout_s == 60 && o.warmup == 5 && o.overlap == -1 && !strcmp(o.device, "auto"));
  CHECK(o.min_bytes == 8 && o.max_bytes == 256u << 20 && o.factor == 2 && o.iters == 20 &&
        o.warmup_iters == 5 && o.check);
  CHECK(!o.bind && !o.out && !o.collective && !o.report && o.threads == 0);
  gs_opts_free(&o);
}

static void help_shows_the_defaults(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  gs_opts_usage(f);
  fclose(f);
  const char *want[] = {"--seed N", "[1]", "--compute-ms MS", "[20]", "--synthetic-samples N",
                        "[60000]", "--timeout SEC", "[60]", "--bind ADDR", "-b, --minbytes SIZE",
                        "[256M]", "-c, --check 0|1", "--report DIR", "[ps,ring]", "[1,2,4]"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    CHECK(strstr(text, want[i]) != NULL, "--help lacks \"%s\"", want[i]);
  CHECK(strstr(text, "--host ") == NULL); /* an old flag; --hosts K is the emulated hosts' */
  free(text);
}

/* argv must be refused with an error naming name */
static void refused(const char *name, const char *flag, const char *value) {
  gs_opts o;
  gs_err e = {0};
  int rc = parse(&o, &e, flag, value, NULL);
  CHECK(rc == GS_EINVAL && strstr(e.msg, name), "%s %s: rc %d, \"%s\"", flag,
         value ? value : "", rc, e.msg);
  gs_opts_free(&o);
}

static void ranges(void) {
  refused("--timeout", "--timeout", "3000000");  /* 3e9 ms does not fit an int */
  refused("--timeout", "--timeout", "0.01");
  refused("--timeout", "--timeout", "inf");
  refused("--seed", "--seed", "18446744073709551616");
  refused("--seed", "--seed", "-1");
  refused("--steps", "--steps", "100000001");
  refused("--steps", "--steps", "9223372036854775808");
  refused("--warmup", "--warmup", "2147483648");
  refused("--batch", "--batch", "1048577");
  refused("--batch", "--batch", "4294967297");
  refused("--world", "--world", "1,2,1025");
  refused("--threads", "--threads", "0");
  refused("--log-every", "--log-every", "0");
  refused("--synthetic-samples", "--synthetic-samples", "0");
  refused("--lr", "--lr", "nan");
  refused("--compute-ms", "--compute-ms", "1e300");
  refused("--bucket-mb", "--bucket-mb", "25,-1");
  refused("--bucket-mb", "--bucket-mb", "25,4097");
  refused("--first-bucket-mb", "--first-bucket-mb", "-0.5");
  refused("-b", "-b", "65G");
  refused("-e", "-e", "1T");
  refused("-n", "-n", "1000001");
  refused("-w", "-w", "-1");
  refused("-f", "-f", "1");
  refused("-c", "-c", "2");
  refused("--bind", "--bind", "*");
  refused("--bind", "--bind", "");
  refused("--host", "--host", "127.0.0.1");
  refused("--loss-scale", "--loss-scale", "-2");
  /* the edges themselves are fine */
  gs_opts o;
  gs_err e = {0};
  CHECK_OK(parse(&o, &e, "--timeout", "86400", "--seed", "18446744073709551615", "--steps",
                 "100000000", "--world", "1024", NULL), &e);
  CHECK(o.train.seed == UINT64_MAX && o.timeout_s == 86400);
  gs_opts_free(&o);
  CHECK_OK(parse(&o, &e, "--collective", "allreduce", "--mode", "ring", "-e", "64G", NULL), &e);
  CHECK(o.max_bytes == 64ull << 30);
  gs_opts_free(&o);
  /* a collective flag without --collective names it, wherever it comes */
  CHECK(parse(&o, &e, "-n", "5", NULL) == GS_EINVAL && strstr(e.msg, "--collective"), "%s", e.msg);
  gs_opts_free(&o);
  gs_err_clear(&e);
  CHECK_OK(parse(&o, &e, "--bind", "0.0.0.0", "--precision", "fp16", NULL), &e);
  CHECK(!strcmp(o.bind, "0.0.0.0") && o.train.loss_scale == 65536.0f && o.train.dynamic_scale);
  gs_opts_free(&o);
  /* a switch with a value, a value without its flag */
  refused("--quiet", "--quiet=1", NULL);
  refused("--batch", "--batch", NULL);
}

/* emulated hosts: the flags that need --link, a world the hosts do not
 * divide, a rate or delay that is not one */
static void hosts(void) {
  gs_opts o;
  gs_err e = {0};
  const char *bad[][6] = {
      {"--hosts", "2", NULL, NULL, NULL, "--link"},
      {"--latency", "1ms", NULL, NULL, NULL, "--link"},
      {"--link", "fast", NULL, NULL, NULL, "link rate"},
      {"--link", "1gbit", "--latency", "5", NULL, "--latency"},
      {"--link", "1gbit", "--latency", "20s", NULL, "--latency"},
      {"--link", "1gbit", "--hosts", "3", "--world=4", "split evenly"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = parse(&o, &e, bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4], NULL);
    CHECK(rc == GS_EINVAL && strstr(e.msg, bad[i][5]), "%s %s %s: rc %d, \"%s\"", bad[i][0],
          bad[i][1], bad[i][2] ? bad[i][2] : "", rc, e.msg);
    gs_opts_free(&o);
    gs_err_clear(&e);
  }
  CHECK_OK(parse(&o, &e, "--link", "2.5gbit", "--latency", "100us", "--hosts", "2", NULL), &e);
  CHECK(o.link_bps == 2500000000ull && fabs(o.latency_s - 100e-6) < 1e-15 && o.nworlds == 1 &&
        o.worlds[0] == 2, "%llu %g %d", (unsigned long long)o.link_bps, o.latency_s, o.nworlds);
  gs_opts_free(&o);
  CHECK_OK(parse(&o, &e, "--link", "100mbit", "--world", "2,4,8", NULL), &e);
  CHECK(o.link_bps == 100000000ull && o.nworlds == 3 && o.hosts == 0 &&
        o.link_choice == GS_LINK_GIVEN);
  gs_opts_free(&o);
  /* the default link is auto (the launcher picks), none is loopback; the
   * later flag wins */
  CHECK_OK(parse(&o, &e, NULL), &e);
  CHECK(o.link_choice == GS_LINK_AUTO && !o.link_arg && !o.link_bps && !o.link_none);
  gs_opts_free(&o);
  CHECK_OK(parse(&o, &e, "--link", "1gbit", "--link", "none", NULL), &e);
  CHECK(o.link_choice == GS_LINK_NONE && !o.link_arg && !o.link_bps && o.link_none);
  gs_opts_free(&o);
  CHECK_OK(parse(&o, &e, "--link", "none", "--link", "auto", NULL), &e);
  CHECK(o.link_choice == GS_LINK_AUTO && !o.link_none);
  gs_opts_free(&o);
  CHECK(parse(&o, &e, "--link", "none", "--hosts", "2", NULL) == GS_EINVAL &&
        strstr(e.msg, "--link RATE"), "--link none --hosts 2: \"%s\"", e.msg);
  gs_opts_free(&o);
  gs_err_clear(&e);
  /* --repeat: 3 by default, once with --save-params */
  CHECK_OK(parse(&o, &e, NULL), &e);
  CHECK(o.repeats == 3, "--repeat default %d", o.repeats);
  gs_opts_free(&o);
  CHECK_OK(parse(&o, &e, "--mode", "ps", "--world", "2", "--save-params", "p", NULL), &e);
  CHECK(o.repeats == 1, "--save-params repeats %d", o.repeats);
  gs_opts_free(&o);
  CHECK_OK(parse(&o, &e, "--mode", "local", NULL), &e);
  CHECK(o.repeats == 1, "--mode local repeats %d", o.repeats);
  gs_opts_free(&o);
  CHECK_OK(parse(&o, &e, "--mode", "local", "--repeat", "3", NULL), &e);
  CHECK(o.repeats == 3, "--mode local --repeat 3: %d", o.repeats);
  gs_opts_free(&o);
  refused("--repeat", "--repeat", "0");
}

/* --calibrate and --project start no rank: worlds past 1024 are theirs,
 * the network is parsed without emulated hosts, and a flag they ignore, or
 * a --project flag elsewhere, is an error naming it */
static void model_commands(void) {
  gs_opts o;
  gs_err e = {0};
  CHECK_OK(parse(&o, &e, "--project", "--world", "8,4096", "--hosts-per", "8", "--link",
                 "100gbit", "--latency", "5us", NULL), &e);
  CHECK(o.project && o.nworlds == 2 && o.worlds[1] == 4096 && o.hosts_per == 8 &&
        o.link_bps == 100000000000ull && fabs(o.latency_s - 5e-6) < 1e-12 && o.hosts == 0,
        "--project flags: worlds %d, per host %d, link %llu, latency %g", o.nworlds,
        o.hosts_per, (unsigned long long)o.link_bps, o.latency_s);
  gs_opts_free(&o);
  CHECK_OK(parse(&o, &e, "--calibrate", "--threads", "2", NULL), &e);
  CHECK(o.calibrate && o.threads == 2 && o.link_bps == 0, "--calibrate --threads 2");
  gs_opts_free(&o);
  refused("--world", "--world", "4096");
  refused("--hosts-per", "--hosts-per", "8");
  refused("--calibration", "--calibration", "c.json");
  CHECK(parse(&o, &e, "--project", "--world", "8", "--link", "1gbit", "--steps", "3", NULL) ==
            GS_EINVAL && strstr(e.msg, "--steps") && strstr(e.msg, "--project"),
        "--project --steps: %s", e.msg);
  gs_opts_free(&o);
  e = (gs_err){0};
  CHECK(parse(&o, &e, "--calibrate", "--project", NULL) == GS_EINVAL &&
            strstr(e.msg, "--calibrate") && strstr(e.msg, "--project"),
        "--calibrate --project: %s", e.msg);
  gs_opts_free(&o);
  e = (gs_err){0};
  CHECK(parse(&o, &e, "--project", "--world", "8", "--minbytes", "8", "--link", "1gbit",
              NULL) == GS_EINVAL && strstr(e.msg, "--minbytes") && strstr(e.msg, "--project"),
        "--project --minbytes: %s", e.msg);
  gs_opts_free(&o);
}

int main(void) {
  defaults_agree();
  hosts();
  help_shows_the_defaults();
  ranges();
  model_commands();
  return check_done("test_opts");
}
