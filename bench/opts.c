/* opts.c: bench's flags: parsing, defaults, validation and --help.
 *
 * Every flag is in one table (name, argument, default, help) so that
 * --help, the parser and the usage errors cannot drift apart. A wrong flag
 * or value is GS_EINVAL with a message naming the flag and what it takes;
 * the caller prints it and exits 2. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

enum {
  O_MODE = 256, O_WORLD, O_MODEL, O_BATCH, O_BUCKET, O_FIRST_BUCKET, O_STRONG, O_STEPS,
  O_WARMUP, O_DATA, O_LR, O_MOMENTUM, O_WD, O_SEED, O_NO_SHUFFLE, O_DROP_LAST, O_PRECISION,
  O_LOSS_SCALE, O_COMPUTE_MS, O_OVERLAP, O_NO_OVERLAP, O_DEDICATED, O_TIMEOUT, O_DEVICE,
  O_HOST, O_THREADS, O_OUT, O_SAVE, O_LOAD, O_QUIET, O_JSON, O_VERIFY, O_EVAL, O_COLLECTIVE,
  O_SAMPLES, O_LOG_EVERY, O_HELP,
};

typedef struct flag {
  const char *name;
  int has_arg;
  int id;
  char short_name;
  const char *arg, *def, *help;
} flag;

static const flag FLAGS[] = {
  {"mode", 1, O_MODE, 0, "LIST", "ps,ring",
   "ps (DataParallel-style parameter server), ring (DDP-style all-reduce), local (one "
   "process, no communication); a list runs each"},
  {"world", 1, O_WORLD, 0, "LIST", "1,2,4", "ranks per run, e.g. 1,2,4,8 (a sweep)"},
  {"model", 1, O_MODEL, 0, "LIST", "mlp:784-2048-2048-10",
   "mlp:IN-H1-..-OUT, lenet, or a profile: resnet50, vgg16, bert-base"},
  {"batch", 1, O_BATCH, 0, "LIST", "64", "per-rank batch (weak scaling; see --strong)"},
  {"bucket-mb", 1, O_BUCKET, 0, "LIST", "25", "gradient bucket size in MiB (DDP's 25)"},
  {"first-bucket-mb", 1, O_FIRST_BUCKET, 0, "MB", "1", "size of the first bucket (DDP's 1)"},
  {"strong", 0, O_STRONG, 0, NULL, "off",
   "strong scaling: keep the global batch at batch x first world, split over the ranks"},
  {"steps", 1, O_STEPS, 0, "N", "100", "optimizer steps per run"},
  {"warmup", 1, O_WARMUP, 0, "N", "5", "first steps left out of the summaries"},
  {"data", 1, O_DATA, 0, "SPEC", "synthetic",
   "synthetic | idx:IMAGES,LABELS (MNIST family) | cifar10:FILE[,FILE...]"},
  {"synthetic-samples", 1, O_SAMPLES, 0, "N", "60000", "size of the synthetic dataset"},
  {"lr", 1, O_LR, 0, "X", "0.01", "SGD learning rate"},
  {"momentum", 1, O_MOMENTUM, 0, "X", "0.9", "SGD momentum"},
  {"weight-decay", 1, O_WD, 0, "X", "0", "SGD weight decay"},
  {"seed", 1, O_SEED, 0, "N", "1", "seed of initialization, data and shuffling"},
  {"no-shuffle", 0, O_NO_SHUFFLE, 0, NULL, "shuffle",
   "DistributedSampler(shuffle=False): rank r takes samples r, r+N, ..."},
  {"drop-last", 0, O_DROP_LAST, 0, NULL, "off", "DistributedSampler(drop_last=True)"},
  {"precision", 1, O_PRECISION, 0, "P", "fp32",
   "fp32 | fp16 | bf16: compute and gradient traffic (FP32 master weights)"},
  {"loss-scale", 1, O_LOSS_SCALE, 0, "S", "dynamic for fp16, 1 otherwise",
   "dynamic (GradScaler: 2^16, x2 per 2000 clean steps, x0.5 on inf/NaN) or a fixed number"},
  {"compute-ms", 1, O_COMPUTE_MS, 0, "MS", "20", "profiles: emulated compute per step"},
  {"overlap", 0, O_OVERLAP, 0, NULL, "ring: on, ps: off",
   "send each bucket as soon as backward fills it"},
  {"no-overlap", 0, O_NO_OVERLAP, 0, NULL, NULL, "send after backward"},
  {"ps-dedicated", 0, O_DEDICATED, 0, NULL, "off",
   "run the parameter server as its own process instead of inside rank 0"},
  {"timeout", 1, O_TIMEOUT, 0, "SEC", "60", "longest wait for any peer before failing"},
  {"device", 1, O_DEVICE, 0, "D", "auto", "cpu | cuda | auto (cuda when a GPU is present)"},
  {"host", 1, O_HOST, 0, "ADDR", "127.0.0.1",
   "address ranks bind for their peers (multi-node: this host's address)"},
  {"threads", 1, O_THREADS, 0, "N", "cores / local ranks", "BLAS threads per rank"},
  {"out", 1, O_OUT, 0, "DIR", "results/<timestamp>", "where reports are written"},
  {"save-params", 1, O_SAVE, 0, "DIR", NULL, "save the final parameters (.npy per tensor)"},
  {"load-params", 1, O_LOAD, 0, "DIR", NULL, "start from these parameters (.npy per tensor)"},
  {"quiet", 0, O_QUIET, 'q', NULL, NULL, "no progress lines (the tables still print)"},
  {"log-every", 1, O_LOG_EVERY, 0, "N", "a tenth of the steps",
   "progress line every N steps when stdout is not a terminal"},
  {"json", 0, O_JSON, 0, NULL, NULL, "collective: also write the table as JSON"},
  {"verify", 0, O_VERIFY, 0, NULL, NULL,
   "hash the parameters on every rank after every step (steps.csv param_hash)"},
  {"eval", 0, O_EVAL, 0, NULL, NULL, "report training-set accuracy at the end"},
  {"collective", 1, O_COLLECTIVE, 0, "OP", NULL,
   "allreduce: benchmark the backend alone, as nccl-tests (-b -e -f -n -w -c)"},
  {"help", 0, O_HELP, 'h', NULL, NULL, "this text"},
};
#define NFLAGS (sizeof FLAGS / sizeof FLAGS[0])

static const char *SHORT_HELP =
    "  -b SIZE  smallest collective size (default 8)      -e SIZE  largest (default 256M)\n"
    "  -f X     size factor (default 2)                    -n N     timed iterations (default 20)\n"
    "  -w N     warmup iterations (default 5)              -c 0|1   check results (default 1)\n";

void gs_opts_usage(FILE *f) {
  fprintf(f,
          "usage: bench [flags]\n"
          "Measure a DataParallel-style parameter server (ps) against DDP-style ring\n"
          "all-reduce (ring) on the same model, data and machine.\n\n");
  for (size_t i = 0; i < NFLAGS; i++) {
    const flag *x = &FLAGS[i];
    char left[64], text[512];
    snprintf(left, sizeof left, "--%s%s%s", x->name, x->arg ? " " : "", x->arg ? x->arg : "");
    snprintf(text, sizeof text, "%s%s%s%s", x->help, x->def ? " [" : "", x->def ? x->def : "",
             x->def ? "]" : "");
    /* wrap the text at 72 columns after the flag column */
    const char *p = text;
    bool first = true;
    while (*p) {
      size_t n = strlen(p);
      if (n > 72) {
        n = 72;
        while (n > 0 && p[n] != ' ') n--;
        if (n == 0) n = 72;
      }
      fprintf(f, "  %-24s %.*s\n", first ? left : "", (int)n, p);
      p += n;
      while (*p == ' ') p++;
      first = false;
    }
  }
  fprintf(f, "Collective benchmark:\n%s", SHORT_HELP);
  fprintf(f,
          "\nExamples:\n"
          "  bench                                  ps vs ring, default model, worlds 1, 2, 4\n"
          "  bench --mode=ps --world 1,2,4          scaling of the parameter server\n"
          "  bench --mode=ring --collective allreduce -b 8 -e 256M -f 2 --world 2\n"
          "  bench --mode=local --model lenet --data cifar10:data_batch_1.bin --save-params p\n"
          "Launch conventions: with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set (torchrun),\n"
          "or Slurm / Open MPI rank variables plus MASTER_ADDR/MASTER_PORT, bench joins as\n"
          "that one rank instead of spawning ranks.\n");
}

void gs_opts_free(gs_opts *o) {
  for (int i = 0; i < o->nowned; i++) free(o->owned[i]);
  o->nowned = 0;
}

const char *gs_mode_name(gs_mode m) {
  switch (m) {
  case GS_MODE_PS: return "ps";
  case GS_MODE_RING: return "ring";
  default: return "local";
  }
}

static const flag *flag_of(int id) {
  for (size_t i = 0; i < NFLAGS; i++)
    if (FLAGS[i].id == id) return &FLAGS[i];
  return NULL;
}

static int bad(gs_err *e, int id, const char *val, const char *what) {
  const flag *f = flag_of(id);
  if (f) return GS_FAIL(e, GS_EINVAL, "--%s %s: %s", f->name, val ? val : "", what);
  return GS_FAIL(e, GS_EINVAL, "-%c %s: %s", (char)id, val ? val : "", what);
}

static int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/* "8", "64K", "256M", "1G": nccl-tests' sizes (powers of 1024). */
static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) return -1;
  double mul = 1;
  if (*end) {
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; break;
    case 'M': mul = 1024.0 * 1024; break;
    case 'G': mul = 1024.0 * 1024 * 1024; break;
    default: return -1;
    }
    end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
  }
  double b = v * mul;
  if (!(b <= 64.0 * 1024 * 1024 * 1024)) return -1;  /* NaN too */
  *out = (size_t)b;
  return 0;
}

/* Split a comma list into items (in place on a private copy that lives as
 * long as the process: options are parsed once). */
static int split(char *s, char **items, int max) {
  int n = 0;
  for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
    if (n == max) return -1;
    items[n++] = tok;
  }
  return n;
}

static int parse_list(gs_opts *o, int id, const char *arg, int max, char **items, gs_err *e) {
  if (o->nowned == GS_LIST_MAX) return bad(e, id, arg, "too many list flags");
  char *copy = strdup(arg);
  if (!copy) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  o->owned[o->nowned++] = copy;
  int n = split(copy, items, max);
  if (n < 0) return bad(e, id, arg, "too many values (16 at most)");
  if (n == 0) return bad(e, id, arg, "expected at least one value");
  return n;
}

static void defaults(gs_opts *o) {
  memset(o, 0, sizeof *o);
  gs_train_opts_default(&o->train);
  o->modes[0] = GS_MODE_PS;
  o->modes[1] = GS_MODE_RING;
  o->nmodes = 2;
  o->worlds[0] = 1;
  o->worlds[1] = 2;
  o->worlds[2] = 4;
  o->nworlds = 3;
  o->models[0] = "mlp:784-2048-2048-10";
  o->nmodels = 1;
  o->batches[0] = 64;
  o->nbatches = 1;
  o->bucket_mbs[0] = 25;
  o->nbucket_mbs = 1;
  o->train.first_bucket_mb = 1;
  o->train.steps = 100;
  o->train.lr = 0.01f;
  o->train.momentum = 0.9f;
  o->train.weight_decay = 0.0f;
  o->train.seed = 1;
  o->train.shuffle = true;
  o->train.drop_last = false;
  o->train.precision = GS_F32;
  o->train.loss_scale = 1.0f;
  o->train.dynamic_scale = false;
  o->train.compute_ms = 20;
  o->train.data = "synthetic";
  o->train.synthetic_samples = 60000;
  o->warmup = 5;
  o->overlap = -1;
  o->timeout_s = 60;
  o->device = "auto";
  o->host = NULL;
  o->min_bytes = 8;
  o->max_bytes = 256u << 20;
  o->factor = 2;
  o->iters = 20;
  o->warmup_iters = 5;
  o->check = true;
}

int gs_opts_parse(int argc, char **argv, gs_opts *o, bool *help, gs_err *e) {
  defaults(o);
  *help = false;
  struct option longs[NFLAGS + 1];
  for (size_t i = 0; i < NFLAGS; i++)
    longs[i] = (struct option){FLAGS[i].name, FLAGS[i].has_arg ? required_argument : no_argument,
                               NULL, FLAGS[i].id};
  memset(&longs[NFLAGS], 0, sizeof longs[NFLAGS]);
  const char *scale_arg = NULL;
  char *items[GS_LIST_MAX];
  long l;
  double d;
  int c, n;

  optind = 0;  /* 0, not 1: also forgets a half-read "-abc" of an earlier parse */
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":hqb:e:f:n:w:c:", longs, NULL)) != -1) {
    const char *a = optarg;
    switch (c) {
    case O_MODE:
      n = parse_list(o, c, a, 3, items, e);
      if (n < 0) return n;
      o->nmodes = n;
      for (int i = 0; i < n; i++) {
        if (!strcmp(items[i], "ps")) o->modes[i] = GS_MODE_PS;
        else if (!strcmp(items[i], "ring")) o->modes[i] = GS_MODE_RING;
        else if (!strcmp(items[i], "local")) o->modes[i] = GS_MODE_LOCAL;
        else return bad(e, c, a, "each mode is ps, ring or local");
      }
      o->mode_given = true;
      break;
    case O_WORLD:
      n = parse_list(o, c, a, GS_LIST_MAX, items, e);
      if (n < 0) return n;
      for (int i = 0; i < n; i++) {
        if (parse_long(items[i], 1, 1024, &l)) return bad(e, c, a, "each world is 1..1024");
        o->worlds[i] = (int)l;
      }
      o->nworlds = n;
      o->world_given = true;
      break;
    case O_MODEL:
      n = parse_list(o, c, a, GS_LIST_MAX, items, e);
      if (n < 0) return n;
      for (int i = 0; i < n; i++) o->models[i] = items[i];
      o->nmodels = n;
      break;
    case O_BATCH:
      n = parse_list(o, c, a, GS_LIST_MAX, items, e);
      if (n < 0) return n;
      for (int i = 0; i < n; i++) {
        if (parse_long(items[i], 1, 1 << 20, &l)) return bad(e, c, a, "each batch is 1..1048576");
        o->batches[i] = (int)l;
      }
      o->nbatches = n;
      break;
    case O_BUCKET:
      n = parse_list(o, c, a, GS_LIST_MAX, items, e);
      if (n < 0) return n;
      for (int i = 0; i < n; i++) {
        if (parse_double(items[i], 1e-6, 4096, &d))
          return bad(e, c, a, "each bucket size is a number of MiB in (0, 4096]");
        o->bucket_mbs[i] = d;
      }
      o->nbucket_mbs = n;
      break;
    case O_FIRST_BUCKET:
      if (parse_double(a, 1e-6, 4096, &d)) return bad(e, c, a, "a number of MiB in (0, 4096]");
      o->train.first_bucket_mb = d;
      break;
    case O_STRONG: o->strong = true; break;
    case O_STEPS:
      if (parse_long(a, 0, 100000000, &l)) return bad(e, c, a, "a whole number >= 0");
      o->train.steps = l;
      break;
    case O_WARMUP:
      if (parse_long(a, 0, 100000000, &l)) return bad(e, c, a, "a whole number >= 0");
      o->warmup = (int)l;
      break;
    case O_DATA:
      if (!*a) return bad(e, c, a, "synthetic, idx:IMAGES,LABELS or cifar10:FILE[,FILE...]");
      o->train.data = a;
      break;
    case O_SAMPLES:
      if (parse_long(a, 1, 1L << 40, &l)) return bad(e, c, a, "a whole number >= 1");
      o->train.synthetic_samples = l;
      break;
    case O_LR:
      if (parse_double(a, 0, 1e6, &d)) return bad(e, c, a, "a number >= 0");
      o->train.lr = (float)d;
      break;
    case O_MOMENTUM:
      if (parse_double(a, 0, 1e6, &d)) return bad(e, c, a, "a number >= 0");
      o->train.momentum = (float)d;
      break;
    case O_WD:
      if (parse_double(a, 0, 1e6, &d)) return bad(e, c, a, "a number >= 0");
      o->train.weight_decay = (float)d;
      break;
    case O_SEED: {
      char *end;
      errno = 0;
      unsigned long long v = strtoull(a, &end, 10);
      if (errno || end == a || *end || *a == '-') return bad(e, c, a, "a whole number >= 0");
      o->train.seed = v;
      break;
    }
    case O_NO_SHUFFLE: o->train.shuffle = false; break;
    case O_DROP_LAST: o->train.drop_last = true; break;
    case O_PRECISION: {
      int t = gs_dtype_parse(a);
      if (t < 0) return bad(e, c, a, "fp32, fp16 or bf16");
      o->train.precision = (gs_dtype)t;
      break;
    }
    case O_LOSS_SCALE: scale_arg = a; break;
    case O_COMPUTE_MS:
      if (parse_double(a, 0, 1e6, &d)) return bad(e, c, a, "milliseconds >= 0");
      o->train.compute_ms = d;
      break;
    case O_OVERLAP: o->overlap = 1; break;
    case O_NO_OVERLAP: o->overlap = 0; break;
    case O_DEDICATED: o->dedicated = true; break;
    case O_TIMEOUT:
      if (parse_double(a, 0.05, 86400, &d)) return bad(e, c, a, "seconds in [0.05, 86400]");
      o->timeout_s = d;
      break;
    case O_DEVICE:
      if (strcmp(a, "cpu") && strcmp(a, "cuda") && strcmp(a, "auto"))
        return bad(e, c, a, "cpu, cuda or auto");
      o->device = a;
      break;
    case O_HOST:
      if (!*a || strlen(a) > 200) return bad(e, c, a, "an address of this host");
      o->host = a;
      break;
    case O_THREADS:
      if (parse_long(a, 1, 1024, &l)) return bad(e, c, a, "1..1024");
      o->threads = (int)l;
      break;
    case O_OUT:
      if (!*a) return bad(e, c, a, "a directory");
      o->out = a;
      break;
    case O_SAVE:
      if (!*a) return bad(e, c, a, "a directory");
      o->save_params = a;
      break;
    case O_LOAD:
      if (!*a) return bad(e, c, a, "a directory of .npy files");
      o->train.load_params = a;
      break;
    case O_QUIET: case 'q': o->quiet = true; break;
    case O_LOG_EVERY:
      if (parse_long(a, 1, 1L << 40, &l)) return bad(e, c, a, "a whole number >= 1");
      o->log_every = l;
      break;
    case O_JSON: o->json = true; break;
    case O_VERIFY: o->verify = true; break;
    case O_EVAL: o->eval = true; break;
    case O_COLLECTIVE:
      if (strcmp(a, "allreduce")) return bad(e, c, a, "the one collective is allreduce");
      o->collective = a;
      break;
    case 'b':
      if (parse_size(a, &o->min_bytes)) return bad(e, c, a, "a size like 8, 64K, 256M");
      break;
    case 'e':
      if (parse_size(a, &o->max_bytes)) return bad(e, c, a, "a size like 8, 64K, 256M");
      break;
    case 'f':
      if (parse_double(a, 1.0001, 1024, &o->factor)) return bad(e, c, a, "a factor > 1");
      break;
    case 'n':
      if (parse_long(a, 1, 1000000, &l)) return bad(e, c, a, "iterations >= 1");
      o->iters = (int)l;
      break;
    case 'w':
      if (parse_long(a, 0, 1000000, &l)) return bad(e, c, a, "iterations >= 0");
      o->warmup_iters = (int)l;
      break;
    case 'c':
      if (parse_long(a, 0, 1, &l)) return bad(e, c, a, "0 or 1");
      o->check = l != 0;
      break;
    case O_HELP: case 'h': *help = true; return GS_OK;
    case ':':
      if (optopt >= 256 && flag_of(optopt))
        return GS_FAIL(e, GS_EINVAL, "--%s needs a value (%s)", flag_of(optopt)->name,
                       flag_of(optopt)->arg);
      return GS_FAIL(e, GS_EINVAL, "-%c needs a value", optopt);
    default:
      if (optopt >= 256 && flag_of(optopt))
        return GS_FAIL(e, GS_EINVAL, "--%s takes no value", flag_of(optopt)->name);
      if (optopt)
        return GS_FAIL(e, GS_EINVAL, "unknown flag -%c (see bench --help)", optopt);
      return GS_FAIL(e, GS_EINVAL, "unknown flag %s (see bench --help)", argv[optind - 1]);
    }
  }
  if (optind < argc)
    return GS_FAIL(e, GS_EINVAL, "unexpected argument '%s' (flags start with --; see bench "
                   "--help)", argv[optind]);

  /* Without --mode and --world, saving or loading parameters means the
   * single-process reference: one run whose parameters mean something. */
  if (!o->mode_given && !o->world_given && !o->collective &&
      (o->save_params || o->train.load_params)) {
    o->modes[0] = GS_MODE_LOCAL;
    o->nmodes = 1;
    o->worlds[0] = 1;
  }
  /* local is one process: it runs at world 1 (alone, without --world, it
   * means world 1; in a list it joins only the world-1 runs) */
  if (o->nmodes == 1 && o->modes[0] == GS_MODE_LOCAL) {
    if (!o->world_given) {
      o->worlds[0] = 1;
      o->nworlds = 1;
    }
    for (int j = 0; j < o->nworlds; j++)
      if (o->worlds[j] != 1)
        return GS_FAIL(e, GS_EINVAL, "--mode local is one process: it takes --world 1 (got %d)",
                       o->worlds[j]);
  }
  if (o->train.precision == GS_F32) {
    o->train.loss_scale = 1.0f;
    o->train.dynamic_scale = false;
  } else if (o->train.precision == GS_F16) {
    o->train.loss_scale = 65536.0f;
    o->train.dynamic_scale = true;
  } else {
    o->train.loss_scale = 1.0f;
    o->train.dynamic_scale = false;
  }
  if (scale_arg) {
    o->loss_scale_set = true;
    if (!strcmp(scale_arg, "dynamic")) {
      o->train.loss_scale = 65536.0f;
      o->train.dynamic_scale = true;
    } else if (!parse_double(scale_arg, 1e-30, 3.4e38, &d)) {
      o->train.loss_scale = (float)d;
      o->train.dynamic_scale = false;
    } else {
      return bad(e, O_LOSS_SCALE, scale_arg, "'dynamic' or a positive number");
    }
  }
  if (o->min_bytes > o->max_bytes)
    return GS_FAIL(e, GS_EINVAL, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  if (o->collective) {
    for (int i = 0; i < o->nmodes; i++)
      if (o->modes[i] == GS_MODE_LOCAL)
        return GS_FAIL(e, GS_EINVAL, "--collective needs --mode ps or ring");
  }
  if (o->save_params) {
    int runs = o->nmodes * o->nworlds * o->nmodels * o->nbatches * o->nbucket_mbs;
    if (runs != 1)
      return GS_FAIL(e, GS_EINVAL, "--save-params saves one run's parameters, but these flags "
                     "make %d runs; give one --mode, --world, --model, --batch and --bucket-mb",
                     runs);
  }
  return GS_OK;
}

size_t gs_opts_settings(const gs_opts *o, gs_mode mode, int world, char *buf, size_t cap) {
  const gs_train_opts *t = &o->train;
  int n = snprintf(buf, cap,
                   "mode=%s\nworld=%d\nmodel=%s\ndata=%s\nbatch=%d\nsteps=%lld\nlr=%.9g\n"
                   "momentum=%.9g\nweight_decay=%.9g\nseed=%llu\nshuffle=%d\ndrop_last=%d\n"
                   "precision=%s\nloss_scale=%.9g\ndynamic_scale=%d\ncompute_ms=%.9g\n"
                   "bucket_mb=%.9g\nfirst_bucket_mb=%.9g\noverlap=%d\nps_dedicated=%d\n"
                   "device=%s\nsamples=%lld\nload_params=%s\nverify=%d\n",
                   gs_mode_name(mode), world, t->model, t->data, t->batch, (long long)t->steps,
                   t->lr, t->momentum, t->weight_decay, (unsigned long long)t->seed, t->shuffle,
                   t->drop_last, gs_dtype_name(t->precision), t->loss_scale, t->dynamic_scale,
                   t->compute_ms, t->bucket_mb, t->first_bucket_mb, o->overlap, o->dedicated,
                   o->device, (long long)t->synthetic_samples,
                   t->load_params ? t->load_params : "", o->verify);
  return n < 0 ? 0 : (size_t)n;
}
