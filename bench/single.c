/* single.c: `bench` as a single-process trainer: the flags of issue 2,
 * one gs_trainer on the local backend, progress lines and a final line
 * with the measured throughput.
 *
 * Throughput is samples / wall time over the steps after --warmup (the
 * first steps pay page faults and BLAS thread start-up), measured from the
 * end of the last warm-up step to the end of the last step, the same way
 * bench/peers/torch_single.py measures PyTorch. */
#include "bench/single.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "worker/worker.h"

typedef struct cli {
  gs_train_opts o;
  const char *save_params;
  const char *device;
  int threads;
  bool eval, quiet;
  int64_t log_every;  /* 0: about ten lines per run */
  int64_t warmup;
} cli;

static void usage(FILE *f, const char *prog) {
  gs_train_opts d;
  gs_train_opts_default(&d);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  fprintf(f,
          "Usage: %s [options]\n"
          "Train one model in this process and report loss and throughput.\n\n"
          "Model and data:\n"
          "  --model SPEC            mlp:IN-H1-...-OUT, lenet, resnet50, vgg16, bert-base\n"
          "                          (default %s); the last three are gradient-shape\n"
          "                          profiles with emulated compute and a dummy loss of 0\n"
          "  --data SPEC             synthetic, idx:IMAGES,LABELS, cifar10:FILE[,FILE...]\n"
          "                          (default %s)\n"
          "  --synthetic-samples N   size of the synthetic dataset (default %lld)\n"
          "  --compute-ms X          profiles: emulated compute per step (default %g)\n"
          "Training:\n"
          "  --batch B               batch size (default %d)\n"
          "  --steps S               optimizer steps; epochs roll over (default %lld)\n"
          "  --lr X                  learning rate (default %g)\n"
          "  --momentum X            SGD momentum (default %g)\n"
          "  --weight-decay X        L2 weight decay (default %g)\n"
          "  --seed N                initialization, synthetic data, shuffling (default %llu)\n"
          "  --no-shuffle            samples in dataset order (DistributedSampler shuffle=False)\n"
          "  --drop-last             DistributedSampler drop_last=True\n"
          "  --precision P           fp32, fp16 or bf16 (default fp32)\n"
          "  --loss-scale S          dynamic or a fixed number (default: dynamic from 65536\n"
          "                          for fp16, 1 for bf16 and fp32)\n"
          "  --bucket-mb X           gradient bucket size in MiB (default %g)\n"
          "  --first-bucket-mb X     first bucket's size in MiB (default %g)\n"
          "  --load-params DIR       start from a directory of .npy files (one per tensor)\n"
          "  --save-params DIR       save the final parameters there (atomically)\n"
          "Run:\n"
          "  --device D              cpu or cuda (default cpu)\n"
          "  --threads N             BLAS threads (default: all %ld cores)\n"
          "  --eval                  after training, accuracy and loss over the dataset\n"
          "  --log-every N           a progress line every N steps (default: steps/10)\n"
          "  --warmup N              steps left out of the throughput (default 3)\n"
          "  --quiet                 only the final line\n"
          "  -h, --help              this text\n",
          prog, d.model, d.data, (long long)d.synthetic_samples, d.compute_ms, d.batch,
          (long long)d.steps, d.lr, d.momentum, d.weight_decay, (unsigned long long)d.seed,
          d.bucket_mb, d.first_bucket_mb, ncpu);
}

static int bad(const char *prog, const char *flag, const char *val, const char *what) {
  fprintf(stderr, "%s: %s '%s': %s\nTry '%s --help'.\n", prog, flag, val, what, prog);
  return 2;
}

static int parse_i64(const char *prog, const char *flag, const char *s, int64_t lo, int64_t hi,
                     int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno) return bad(prog, flag, s, "not an integer");
  if (v < lo || v > hi) {
    char msg[96];
    snprintf(msg, sizeof msg, "must be between %lld and %lld", (long long)lo, (long long)hi);
    return bad(prog, flag, s, msg);
  }
  *out = v;
  return 0;
}

static int parse_f64(const char *prog, const char *flag, const char *s, double lo, double hi,
                     double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(v)) return bad(prog, flag, s, "not a finite number");
  if (v < lo || v > hi) {
    char msg[96];
    snprintf(msg, sizeof msg, "must be between %g and %g", lo, hi);
    return bad(prog, flag, s, msg);
  }
  *out = v;
  return 0;
}

enum {
  OPT_MODEL = 256, OPT_DATA, OPT_SYN, OPT_COMPUTE, OPT_BATCH, OPT_STEPS, OPT_LR, OPT_MOMENTUM,
  OPT_WD, OPT_SEED, OPT_NOSHUFFLE, OPT_DROPLAST, OPT_PRECISION, OPT_LOSSSCALE, OPT_BUCKET,
  OPT_FIRSTBUCKET, OPT_LOAD, OPT_SAVE, OPT_DEVICE, OPT_THREADS, OPT_EVAL, OPT_LOGEVERY,
  OPT_WARMUP, OPT_QUIET,
};

static const struct option longopts[] = {
    {"model", required_argument, 0, OPT_MODEL},
    {"data", required_argument, 0, OPT_DATA},
    {"synthetic-samples", required_argument, 0, OPT_SYN},
    {"compute-ms", required_argument, 0, OPT_COMPUTE},
    {"batch", required_argument, 0, OPT_BATCH},
    {"steps", required_argument, 0, OPT_STEPS},
    {"lr", required_argument, 0, OPT_LR},
    {"momentum", required_argument, 0, OPT_MOMENTUM},
    {"weight-decay", required_argument, 0, OPT_WD},
    {"seed", required_argument, 0, OPT_SEED},
    {"no-shuffle", no_argument, 0, OPT_NOSHUFFLE},
    {"drop-last", no_argument, 0, OPT_DROPLAST},
    {"precision", required_argument, 0, OPT_PRECISION},
    {"loss-scale", required_argument, 0, OPT_LOSSSCALE},
    {"bucket-mb", required_argument, 0, OPT_BUCKET},
    {"first-bucket-mb", required_argument, 0, OPT_FIRSTBUCKET},
    {"load-params", required_argument, 0, OPT_LOAD},
    {"save-params", required_argument, 0, OPT_SAVE},
    {"device", required_argument, 0, OPT_DEVICE},
    {"threads", required_argument, 0, OPT_THREADS},
    {"eval", no_argument, 0, OPT_EVAL},
    {"log-every", required_argument, 0, OPT_LOGEVERY},
    {"warmup", required_argument, 0, OPT_WARMUP},
    {"quiet", no_argument, 0, OPT_QUIET},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* 0 ok, 2 usage error (printed), -1 --help printed */
static int parse(int argc, char **argv, cli *c) {
  const char *prog = argv[0] ? argv[0] : "bench";
  gs_train_opts_default(&c->o);
  c->device = "cpu";
  c->threads = 0;
  c->warmup = 3;
  opterr = 0;
  optind = 1;
  int ch, idx;
  while ((ch = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
    const char *flag = ch >= 256 ? argv[optind - 1] : "";
    char fl[64];
    if (ch >= 256) {  /* "--batch=3" or "--batch 3": name the flag without its value */
      snprintf(fl, sizeof fl, "--%s", longopts[idx].name);
      flag = fl;
    }
    int64_t i = 0;
    double d = 0;
    int rc = 0;
    switch (ch) {
    case 'h':
      usage(stdout, prog);
      return -1;
    case '?':
      fprintf(stderr, "%s: unknown option '%s'\nTry '%s --help'.\n", prog, argv[optind - 1], prog);
      return 2;
    case ':':
      fprintf(stderr, "%s: option '%s' needs a value\nTry '%s --help'.\n", prog, argv[optind - 1],
              prog);
      return 2;
    case OPT_MODEL: c->o.model = optarg; break;
    case OPT_DATA: c->o.data = optarg; break;
    case OPT_SYN:
      rc = parse_i64(prog, flag, optarg, 1, (int64_t)1 << 31, &i);
      c->o.synthetic_samples = i;
      break;
    case OPT_COMPUTE:
      rc = parse_f64(prog, flag, optarg, 0, 1e6, &d);
      c->o.compute_ms = d;
      break;
    case OPT_BATCH:
      rc = parse_i64(prog, flag, optarg, 1, 1 << 20, &i);
      c->o.batch = (int)i;
      break;
    case OPT_STEPS:
      rc = parse_i64(prog, flag, optarg, 0, INT64_MAX / 2, &i);
      c->o.steps = i;
      break;
    case OPT_LR:
      rc = parse_f64(prog, flag, optarg, 0, 1e6, &d);
      c->o.lr = (float)d;
      break;
    case OPT_MOMENTUM:
      rc = parse_f64(prog, flag, optarg, 0, 1e3, &d);
      c->o.momentum = (float)d;
      break;
    case OPT_WD:
      rc = parse_f64(prog, flag, optarg, 0, 1e6, &d);
      c->o.weight_decay = (float)d;
      break;
    case OPT_SEED:
      rc = parse_i64(prog, flag, optarg, 0, INT64_MAX, &i);
      c->o.seed = (uint64_t)i;
      break;
    case OPT_NOSHUFFLE: c->o.shuffle = false; break;
    case OPT_DROPLAST: c->o.drop_last = true; break;
    case OPT_PRECISION: {
      int t = gs_dtype_parse(optarg);
      if (t < 0) return bad(prog, flag, optarg, "use fp32, fp16 or bf16");
      c->o.precision = (gs_dtype)t;
      break;
    }
    case OPT_LOSSSCALE:
      if (!strcmp(optarg, "dynamic")) {
        c->o.loss_scale = 65536.0f;
        c->o.dynamic_scale = true;
      } else {
        char *end;
        d = strtod(optarg, &end);
        if (end == optarg || *end || !(d >= 1e-30 && d <= 3e38))
          return bad(prog, flag, optarg, "use 'dynamic' or a positive number (e.g. 128)");
        c->o.loss_scale = (float)d;
        c->o.dynamic_scale = false;
      }
      break;
    case OPT_BUCKET:
      rc = parse_f64(prog, flag, optarg, 0, 1e6, &d);
      c->o.bucket_mb = d;
      break;
    case OPT_FIRSTBUCKET:
      rc = parse_f64(prog, flag, optarg, 0, 1e6, &d);
      c->o.first_bucket_mb = d;
      break;
    case OPT_LOAD: c->o.load_params = optarg; break;
    case OPT_SAVE:
      if (!*optarg) return bad(prog, flag, optarg, "empty directory name");
      c->save_params = optarg;
      break;
    case OPT_DEVICE:
      if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda"))
        return bad(prog, flag, optarg, "use cpu or cuda");
      c->device = optarg;
      break;
    case OPT_THREADS:
      rc = parse_i64(prog, flag, optarg, 1, 1024, &i);
      c->threads = (int)i;
      break;
    case OPT_EVAL: c->eval = true; break;
    case OPT_LOGEVERY:
      rc = parse_i64(prog, flag, optarg, 1, INT64_MAX / 2, &i);
      c->log_every = i;
      break;
    case OPT_WARMUP:
      rc = parse_i64(prog, flag, optarg, 0, INT64_MAX / 2, &i);
      c->warmup = i;
      break;
    case OPT_QUIET: c->quiet = true; break;
    default:
      fprintf(stderr, "%s: unexpected option\n", prog);
      return 2;
    }
    if (rc) return rc;
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\nTry '%s --help'.\n", prog, argv[optind], prog);
    return 2;
  }
  return 0;
}

typedef struct progress {
  const cli *c;
  double cpu_start;    /* process CPU seconds when training started */
  double cpu_warm;     /* ... and when the warm-up steps ended */
  double last_t;       /* t_end of the last printed step */
  int64_t last_samples, samples;
  int64_t correct, seen;  /* since the last line */
  int64_t skipped;
} progress;

/* CPU seconds of the whole process (every thread), user + system */
static double cpu_seconds(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static int on_step(void *ctx, const gs_step_row *r) {
  progress *p = ctx;
  if (r->step + 1 == p->c->warmup) p->cpu_warm = cpu_seconds();
  p->samples += r->samples;
  p->correct += r->correct;
  p->seen += r->samples;
  p->skipped += r->skipped;
  if (p->last_t == 0) p->last_t = r->t_start;
  int64_t every = p->c->log_every;
  if (every <= 0) every = p->c->o.steps >= 10 ? p->c->o.steps / 10 : 1;
  bool last = r->step + 1 == p->c->o.steps;
  if (!p->c->quiet && ((r->step + 1) % every == 0 || last)) {
    double dt = r->t_end - p->last_t;
    printf("step %6lld/%lld  epoch %d  loss %.4f  acc %5.1f%%  scale %g%s  %.0f samples/s\n",
           (long long)r->step + 1, (long long)p->c->o.steps, r->epoch, r->loss,
           p->seen ? 100.0 * (double)p->correct / (double)p->seen : 0.0, r->scale,
           r->skipped ? " (skipped)" : "",
           dt > 0 ? (double)(p->samples - p->last_samples) / dt : 0.0);
    fflush(stdout);
    p->last_t = r->t_end;
    p->last_samples = p->samples;
    p->correct = p->seen = 0;
  }
  return 0;
}

static void on_signal(int sig) {
  (void)sig;
  gs_interrupted = 1;
}

int gs_bench_single_main(int argc, char **argv) {
  const char *prog = argc > 0 && argv[0] ? argv[0] : "bench";
  cli c = {0};
  int prc = parse(argc, argv, &c);
  if (prc < 0) return 0;
  if (prc) return prc;

  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  gs_err e = {0};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = c.threads > 0 ? c.threads : (ncpu > 0 ? (int)ncpu : 1);
  gs_kernels *k = !strcmp(c.device, "cuda") ? gs_kernels_cuda(0, &e) : gs_kernels_cpu(threads, &e);
  if (!k) {
    fprintf(stderr, "%s: %s\n", prog, e.msg);
    return 1;
  }
  k->set_threads(k, threads);
  gs_trainer *t = NULL;
  int rc = gs_trainer_create(&c.o, k, &t, &e);
  if (rc) {
    fprintf(stderr, "%s: %s\n", prog, e.msg);
    k->destroy(k);
    return rc == GS_EINVAL ? 2 : 1;
  }
  if (!c.quiet) {
    printf("bench: %s\n", gs_trainer_describe(t));
    printf("bench: %s, %d thread%s, batch %d, %lld steps, %s, lr %g momentum %g weight decay %g, "
           "seed %llu%s%s\n",
           k->name, threads, threads == 1 ? "" : "s", c.o.batch, (long long)c.o.steps,
           gs_dtype_name(c.o.precision), c.o.lr, c.o.momentum, c.o.weight_decay,
           (unsigned long long)c.o.seed, c.o.shuffle ? "" : ", no shuffle",
           c.o.drop_last ? ", drop last" : "");
    fflush(stdout);
  }
  gs_sync_config sc = {0};
  sc.rank = 0;
  sc.world = 1;
  sc.timeout_ms = 60000;
  gs_trainer_sync_config(t, &sc);
  gs_sync *s = NULL;
  rc = gs_sync_local(&sc, &s, &e);
  progress p = {.c = &c, .cpu_start = cpu_seconds()};
  if (rc == 0) rc = gs_trainer_run(t, s, on_step, &p, &e);
  if (s) s->ops->close(s, rc == 0, rc == 0 ? &e : NULL);
  if (rc == 0) {
    size_t n;
    const gs_step_row *rows = gs_trainer_rows(t, &n);
    int64_t w = (int64_t)n > c.warmup ? c.warmup : 0;
    double t0 = w > 0 ? rows[w - 1].t_end : (n ? rows[0].t_start : 0);
    int64_t samples = 0;
    double sum[5] = {0};
    for (size_t i = (size_t)w; i < n; i++) {
      samples += rows[i].samples;
      sum[0] += rows[i].data_s;
      sum[1] += rows[i].forward_s;
      sum[2] += rows[i].backward_s;
      sum[3] += rows[i].reduce_s + rows[i].wait_s;
      sum[4] += rows[i].update_s;
    }
    double cnt = (double)n - (double)w;
    double dt = n ? rows[n - 1].t_end - t0 : 0;
    double total = n ? rows[n - 1].t_end - rows[0].t_start : 0;
    if (n) {
      double cpu = cpu_seconds() - (w > 0 ? p.cpu_warm : p.cpu_start);
      printf("bench: %zu steps in %.2f s, final loss %.4f, %lld skipped, peak RSS %.1f MiB, "
             "%.0f%% CPU; throughput %.0f samples/s (steps %lld-%zu, after %lld warm-up)\n",
             n, total, rows[n - 1].loss, (long long)p.skipped,
             (double)rows[n - 1].rss_bytes / (1024.0 * 1024.0), dt > 0 ? 100 * cpu / dt : 0.0,
             dt > 0 ? (double)samples / dt : 0.0, (long long)w + 1, n, (long long)w);
      if (!c.quiet && cnt > 0)
        printf("bench: per step: data %.2f ms, forward %.2f ms, backward %.2f ms, "
               "unscale/reduce %.2f ms, optimizer %.2f ms\n",
               1e3 * sum[0] / cnt, 1e3 * sum[1] / cnt, 1e3 * sum[2] / cnt, 1e3 * sum[3] / cnt,
               1e3 * sum[4] / cnt);
    } else {
      printf("bench: 0 steps\n");
    }
    fflush(stdout);
  }
  if (rc == 0 && c.eval) {
    double acc, loss;
    rc = gs_trainer_evaluate(t, 0, &acc, &loss, &e);
    if (rc == 0) printf("bench: eval accuracy %.2f%% loss %.4f over the dataset\n", 100 * acc, loss);
  }
  if (rc == 0 && c.save_params) {
    rc = gs_trainer_save(t, c.save_params, &e);
    if (rc == 0 && !c.quiet) printf("bench: parameters saved to %s\n", c.save_params);
  }
  if (rc) fprintf(stderr, "%s: %s\n", prog, e.msg);
  gs_trainer_destroy(t);
  k->destroy(k);
  return rc == 0 ? 0 : rc == GS_EINVAL ? 2 : 1;
}
