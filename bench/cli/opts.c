/* opts.c: bench's flags.
 *
 * Every flag is one row of FLAGS: its name (and nccl-tests' short letter),
 * the argument it takes, its default, its help and its parser. The defaults
 * are spelled as a user would type them and applied by the same parsers
 * before argv, so --help, the parser, the defaults and the range checks
 * cannot drift apart. worker's gs_train_opts_default must agree with the
 * training defaults here; tests/bench/cli/test_opts.c checks that it does.
 *
 * A wrong flag or value is GS_EINVAL with a message naming the flag and
 * what it takes; the caller prints it and exits 2. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/allreduce.h"
#include "bench/cli/cli.h"
#include "bench/coll/coll.h"
#include "bench/job/job.h"
#include "bench/report/report.h"
#include "ps/ps.h"

typedef struct flag flag;
typedef int (*flag_fn)(gs_opts *o, const flag *f, const char *arg, gs_err *e);

struct flag {
  const char *name;   /* --name */
  char letter;        /* -x as well, or 0 */
  const char *arg;    /* what the value is, for --help; NULL: a switch */
  const char *def;    /* the default as the value would be typed, applied
                         at start by parse; NULL: none */
  const char *show;   /* --help's [default] when def cannot say it */
  const char *help;
  flag_fn parse;
  size_t off;         /* the gs_opts member the parser writes */
  size_t width;       /* its size, where parsers serve more than one type */
  size_t count_off;   /* lists: the member counting their items */
  double lo, hi;      /* numbers: the accepted range (switches: the value set) */
};

#define AT(o, f, type) ((type *)((char *)(o) + (f)->off))
#define M(member) offsetof(gs_opts, member)
#define W(member) sizeof(((gs_opts *)0)->member)

/* ---- errors ---- */

/* "--batch", or "-b (--minbytes)": the way the user may have typed it */
static const char *flag_name(const flag *f, char *buf, size_t cap) {
  if (f->letter) snprintf(buf, cap, "-%c (--%s)", f->letter, f->name);
  else snprintf(buf, cap, "--%s", f->name);
  return buf;
}

static int bad(gs_err *e, const flag *f, const char *val, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(gs_err *e, const flag *f, const char *val, const char *fmt, ...) {
  char what[256], name[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return GS_FAIL(e, GS_EINVAL, "%s %s: %s", flag_name(f, name, sizeof name), val ? val : "",
                 what);
}

/* ---- numbers ---- */

static int parse_long(const char *s, double lo, double hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || (double)v < lo || (double)v > hi) return -1;
  *out = v;
  return 0;
}

/* whole numbers into an int or an int64_t member, by its width */
static int p_whole(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  long v;
  if (parse_long(a, f->lo, f->hi, &v))
    return bad(e, f, a, "a whole number in %.0f..%.0f", f->lo, f->hi);
  if (f->width == sizeof(int)) *AT(o, f, int) = (int)v;
  else *AT(o, f, int64_t) = v;
  return GS_OK;
}

static int p_u64(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(a, &end, 10);
  if (errno || end == a || *end || *a == '-' || *a == '+' || isspace((unsigned char)*a))
    return bad(e, f, a, "a whole number in 0..18446744073709551615");
  *AT(o, f, uint64_t) = v;
  return GS_OK;
}

/* numbers into a float or a double member, by its width */
static int p_real(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  double v;
  if (gs_parse_real(a, f->lo, f->hi, &v))
    return bad(e, f, a, "a number in [%g, %g]", f->lo, f->hi);
  if (f->width == sizeof(float)) *AT(o, f, float) = (float)v;
  else *AT(o, f, double) = v;
  return GS_OK;
}

/* "8", "64K", "256M", "1G": nccl-tests' sizes (powers of 1024). */
static int p_size(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  char *end;
  errno = 0;
  double v = strtod(a, &end), mul = 1;
  bool ok = !errno && end != a && isfinite(v) && v >= 0;
  if (ok && *end) {
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; break;
    case 'M': mul = 1024.0 * 1024; break;
    case 'G': mul = 1024.0 * 1024 * 1024; break;
    default: ok = false;
    }
    end++;
    if (ok && (*end == 'B' || *end == 'b')) end++;
    ok = ok && !*end;
  }
  if (!ok || v * mul < f->lo || v * mul > f->hi)
    return bad(e, f, a, "a size like 8, 64K, 256M, from %.0f bytes to %.0fG", f->lo,
               f->hi / (1024.0 * 1024 * 1024));
  *AT(o, f, size_t) = (size_t)(v * mul);
  return GS_OK;
}

/* ---- words, switches, lists ---- */

static int p_str(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  if (!*a || strlen(a) > 4000) return bad(e, f, a, "a non-empty %s", f->arg);
  *AT(o, f, const char *) = a;
  return GS_OK;
}

/* switches set their member to lo (a bool or an int) */
static int p_bool(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  (void)a;
  (void)e;
  *AT(o, f, bool) = f->lo != 0;
  return GS_OK;
}

static int p_set_int(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  (void)a;
  (void)e;
  *AT(o, f, int) = (int)f->lo;
  return GS_OK;
}

static int p_bool01(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  long v;
  if (parse_long(a, 0, 1, &v)) return bad(e, f, a, "0 or 1");
  *AT(o, f, bool) = v != 0;
  return GS_OK;
}

static int p_help(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  (void)o;
  (void)f;
  (void)a;
  (void)e;
  return 1; /* the caller prints --help */
}

/* Split a comma list into items, in place on a private copy that lives as
 * long as o (gs_opts_free). */
static int split(gs_opts *o, const flag *f, const char *arg, char **items, int max, gs_err *e) {
  if (o->nowned == (int)(sizeof o->owned / sizeof o->owned[0]))
    return bad(e, f, arg, "given too many times");
  char *copy = strdup(arg), *save = NULL;
  if (!copy) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  o->owned[o->nowned++] = copy;
  int n = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n == max) return bad(e, f, arg, "too many values (%d at most)", max);
    items[n++] = tok;
  }
  if (n == 0) return bad(e, f, arg, "expected at least one value");
  return n;
}

static int p_int_list(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  char *items[GS_LIST_MAX];
  int n = split(o, f, a, items, GS_LIST_MAX, e);
  if (n < 0) return n;
  for (int i = 0; i < n; i++) {
    long v;
    if (parse_long(items[i], f->lo, f->hi, &v))
      return bad(e, f, a, "each value a whole number in %.0f..%.0f", f->lo, f->hi);
    AT(o, f, int)[i] = (int)v;
  }
  *(int *)((char *)o + f->count_off) = n;
  return GS_OK;
}

static int p_double_list(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  char *items[GS_LIST_MAX];
  int n = split(o, f, a, items, GS_LIST_MAX, e);
  if (n < 0) return n;
  for (int i = 0; i < n; i++) {
    double v;
    if (gs_parse_real(items[i], f->lo, f->hi, &v))
      return bad(e, f, a, "each value a number in [%g, %g]", f->lo, f->hi);
    AT(o, f, double)[i] = v;
  }
  *(int *)((char *)o + f->count_off) = n;
  return GS_OK;
}

static int p_str_list(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  char *items[GS_LIST_MAX];
  int n = split(o, f, a, items, GS_LIST_MAX, e);
  if (n < 0) return n;
  for (int i = 0; i < n; i++) AT(o, f, const char *)[i] = items[i];
  *(int *)((char *)o + f->count_off) = n;
  return GS_OK;
}

static int p_modes(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  char *items[3];
  int n = split(o, f, a, items, 3, e);
  if (n < 0) return n;
  for (int i = 0; i < n; i++) {
    int m = gs_mode_parse(items[i]);
    if (m < 0) return bad(e, f, a, "each mode is ps, ring or local");
    o->modes[i] = (gs_mode)m;
  }
  o->nmodes = n;
  o->mode_given = true;
  return GS_OK;
}

static int p_worlds(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  GS_TRY(p_int_list(o, f, a, e));
  o->world_given = true;
  return GS_OK;
}

static int p_precision(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  int t = gs_dtype_parse(a);
  if (t < 0) return bad(e, f, a, "fp32, fp16 or bf16");
  o->train.precision = (gs_dtype)t;
  return GS_OK;
}

static int p_compress(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  (void)f;
  return gs_compress_parse(a, &o->train.compress, e);
}

static int p_device(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  if (strcmp(a, "cpu") && strcmp(a, "cuda") && strcmp(a, "auto"))
    return bad(e, f, a, "cpu, cuda or auto");
  o->device = a;
  return GS_OK;
}

/* a word with one value so far: the one its help begins with ("word: ...") */
static int p_one(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  int n = (int)strcspn(f->help, ":");
  if ((int)strlen(a) != n || strncmp(a, f->help, (size_t)n))
    return bad(e, f, a, "the one value so far is %.*s", n, f->help);
  *AT(o, f, const char *) = a;
  return GS_OK;
}

static int p_algo(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  int v = gs_algo_parse(a);
  char names[128];
  gs_algo_names(names, sizeof names);
  if (v < 0) return bad(e, f, a, "%s", names);
  o->algo = v;
  return GS_OK;
}

static int p_transport(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  if (strcmp(a, "tcp") && strcmp(a, "ipc") && strcmp(a, "shm"))
    return bad(e, f, a, "tcp, ipc or shm");
  o->transport = a;
  return GS_OK;
}

/* --link RATE, none (loopback), or auto (the default: the launcher picks) */
static int p_link(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  if (!*a || strlen(a) > 64) return bad(e, f, a, "a rate such as 1gbit or 100mbit, none or auto");
  o->link_none = !strcmp(a, "none");
  o->link_arg = o->link_none || !strcmp(a, "auto") ? NULL : a;
  return GS_OK;
}

static int p_link_host(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  (void)f;
  GS_TRY(gs_host_rates_parse(a, &o->link_host, e));
  o->link_host_arg = a;
  return GS_OK;
}

static int p_repeat(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  GS_TRY(p_whole(o, f, a, e));
  o->repeat_given = true; /* the defaults' parse is forgotten after them */
  return GS_OK;
}

static int p_slow(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  (void)f;
  return gs_straggle_parse(a, &o->train.straggle, e);
}

static int p_ps_sync(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  (void)f;
  return gs_ps_sync_parse(a, &o->ps_sync, e);
}

static int p_ps_backup(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  GS_TRY(p_whole(o, f, a, e));
  o->ps_sync.backup_on = true;
  return GS_OK;
}

static int p_bind(gs_opts *o, const flag *f, const char *a, gs_err *e) {
  if (!*a || strlen(a) > 200 || !strcmp(a, "*"))
    return bad(e, f, a, "an IPv4 address of this host (0.0.0.0 for every interface)");
  o->bind = a;
  return GS_OK;
}

/* ---- the table ---- */

#define NUM(name, letter, arg, def, help, fn, member, lo, hi) \
  {name, letter, arg, def, NULL, help, fn, M(member), W(member), 0, lo, hi}
#define LIST(name, arg, def, help, fn, member, count, lo, hi) \
  {name, 0, arg, def, NULL, help, fn, M(member), 0, M(count), lo, hi}
#define SWITCH(name, letter, show, help, member, value) \
  {name, letter, NULL, NULL, show, help, p_bool, M(member), W(member), 0, value, value}
#define WORD(name, arg, def, show, help, fn, member) \
  {name, 0, arg, def, show, help, fn, M(member), W(member), 0, 0, 0}

static const flag FLAGS[] = {
  LIST("mode", "LIST", "ps,ring", "ps (DataParallel-style parameter server), ring (DDP-style "
       "all-reduce), local (one process, no communication); a list runs each", p_modes, modes,
       nmodes, 0, 0),
  LIST("world", "LIST", "1,2,4", "ranks per run, e.g. 1,2,4,8 (a sweep; up to 1024, or "
       "1048576 with --project)", p_worlds, worlds, nworlds, 1, 1 << 20),
  LIST("model", "LIST", "mlp:784-1024-1024-10",
       "mlp:IN-H1-..-OUT, lenet, or a profile: resnet50, vgg16, bert-base, vgg11, profile:FILE "
       "(a network tools/profile_model.py measured)", p_str_list, models,
       nmodels, 0, 0),
  LIST("batch", "LIST", "128", "per-rank batch (weak scaling; see --strong)", p_int_list,
       batches, nbatches, 1, 1 << 20),
  LIST("bucket-mb", "LIST", "25", "gradient bucket size in MiB (DDP's 25); 0: a bucket per "
       "parameter, the first too (one all-reduce each)", p_double_list, bucket_mbs, nbucket_mbs,
       0, 4096),
  NUM("first-bucket-mb", 0, "MB", "1", "size of the first bucket (DDP's 1); 0: none of its "
      "own, it closes as the others (4096 with this: one bucket for the model)", p_real,
      train.first_bucket_mb, 0, 4096),
  WORD("freeze", "LAYERS", NULL, "none", "layers that do not train (requires_grad=False), "
       "e.g. fc1 or fc1,fc2: their gradients never travel and they keep their initial values",
       p_str, train.freeze),
  SWITCH("strong", 0, "off",
         "strong scaling: keep the global batch at batch x first world, split over the ranks",
         strong, 1),
  NUM("steps", 0, "N", "30", "optimizer steps per run", p_whole, train.steps, 0, 1e8),
  {"repeat", 0, "K", "3", "3; 1 for --mode local alone", "run each configuration K times, "
   "interleaved (every one once, then again), and report the median with the min-max "
   "(training; once with --save-params; --peer runs once)", p_repeat, M(repeats), W(repeats), 0,
   1, 1000},
  NUM("warmup", 0, "N", "5", "first steps left out of the summaries", p_whole, warmup, 0, 1e8),
  WORD("data", "SPEC", "synthetic", NULL,
       "synthetic | idx:IMAGES,LABELS (MNIST family) | cifar10:FILE[,FILE...]", p_str,
       train.data),
  NUM("synthetic-samples", 0, "N", "60000", "size of the synthetic dataset", p_whole,
      train.synthetic_samples, 1, 1e12),
  NUM("lr", 0, "X", "0.01", "SGD learning rate", p_real, train.lr, 0, 1e6),
  NUM("momentum", 0, "X", "0.9", "SGD momentum", p_real, train.momentum, 0, 1e6),
  NUM("weight-decay", 0, "X", "0", "SGD weight decay", p_real, train.weight_decay, 0, 1e6),
  NUM("seed", 0, "N", "1", "seed of initialization, data and shuffling", p_u64, train.seed, 0,
      0),
  SWITCH("no-shuffle", 0, "shuffle",
         "DistributedSampler(shuffle=False): rank r takes samples r, r+N, ...", train.shuffle,
         0),
  SWITCH("drop-last", 0, "off", "DistributedSampler(drop_last=True)", train.drop_last, 1),
  WORD("precision", "P", "fp32", NULL,
       "fp32 | fp16 | bf16: compute and gradient traffic (FP32 master weights)", p_precision,
       train.precision),
  WORD("compress", "C", "none", NULL,
       "none | fp16 | bf16 | powersgd:R | topk:FRACTION: what gradients travel as (DDP's "
       "communication hooks): fp32 compute with 16-bit traffic, PowerSGD's rank-R approximation "
       "with error feedback (ring, world 1 and a flat ps), or each bucket's largest FRACTION "
       "with error feedback, pushed sparse (ps; docs/compression.md)", p_compress,
       train.compress),
  NUM("powersgd-start", 0, "N", "2", "powersgd: plain all-reduce before step N "
      "(start_powerSGD_iter; PyTorch's constructor default is 1000)", p_whole,
      train.compress.start, 0, 1e12),
  WORD("loss-scale", "S", NULL, "dynamic for fp16, 1 otherwise",
       "dynamic (GradScaler: 2^16, x2 per 2000 clean steps, x0.5 on inf/NaN), dynamic:INIT "
       "(starting at INIT, as GradScaler(init_scale=INIT)) or a fixed number",
       p_str, loss_scale_arg),
  WORD("slow", "RANKS:X", NULL, "none", "stragglers: those ranks (e.g. 3 or 1,3) compute X "
       "times as long, with real arithmetic (not sleep)", p_slow, train.straggle),
  NUM("jitter", 0, "CV", "0", "seeded compute noise on every rank: each step's compute x (1 + "
      "CV x |z|), z standard normal from (seed, rank, step)", p_real, train.straggle.jitter_cv,
      0, 10),
  NUM("compute-ms", 0, "MS", "20", "profiles: emulated compute per step, split over the layers "
      "as the profile measured them", p_real, train.compute_ms, 0, 1e6),
  {"compute-scale", 0, "X", NULL, "off: --compute-ms", "profiles: each layer's measured time x "
   "X, at --batch (from the profile's batch): 1 emulates the device profiled; with --project, "
   "the profile's compute x X", p_real, M(train.compute_scale), W(train.compute_scale), 0,
   1e-6, 1e6},
  {"overlap", 0, NULL, NULL, "ring: on, ps: off", "send each bucket as soon as backward fills it",
   p_set_int, M(overlap), W(overlap), 0, 1, 1},
  {"no-overlap", 0, NULL, NULL, NULL, "send after backward", p_set_int, M(overlap), W(overlap),
   0, 0, 0},
  {"resend", 0, NULL, NULL, "training: on, --collective: off", "ring: keep what each link sent "
   "until it is known received, and send it again when a connection drops and comes back",
   p_set_int, M(resend), W(resend), 0, 1, 1},
  {"no-resend", 0, NULL, NULL, NULL, "ring: keep nothing (a connection reset then stops the "
   "job; saves a copy of 1/N of what is sent)", p_set_int, M(resend), W(resend), 0, 0, 0},
  SWITCH("ps-dedicated", 0, "off",
         "run the parameter server as its own process instead of inside rank 0", dedicated, 1),
  NUM("ps-servers", 0, "K", "1", "ps: K servers share the parameters by key range (sharded "
      "ps, as BytePS), server k a thread of rank k*world/K: one per host when K = --hosts",
      p_whole, ps_servers, 1, 1024),
  {"ps-local-reduce", 0, NULL, NULL, "on emulated hosts of several ranks each",
   "ps: each host sums its ranks' gradients in shared memory and pushes once, and shares the "
   "parameters it gets back (BytePS' local reduce; ranks host-major, hosts of equal size)",
   p_set_int, M(ps_hostagg), W(ps_hostagg), 0, 1, 1},
  {"no-ps-local-reduce", 0, NULL, NULL, NULL, "ps: every rank pushes (DataParallel)", p_set_int,
   M(ps_hostagg), W(ps_hostagg), 0, 0, 0},
  SWITCH("ps-server-hosts", 0, "off", "ps: the --ps-servers run as processes of their own, on "
         "emulated hosts (--link) each on a host of its own beyond the ranks' (BytePS' spare "
         "machines)", ps_server_hosts, 1),
  LIST("ps-spare-hosts", "LIST", NULL, "ps: BytePS' summation servers: K spare hosts' servers "
       "beside the workers' hosts, which serve the rest, in BytePS' split; they only sum, every "
       "rank runs the optimizer; a list (0,1,2,4) runs each (docs/byteps.md)", p_int_list,
       ps_spares, nps_spares, 0, 64),
  NUM("ps-partition-mb", 0, "MB", NULL, "--ps-spare-hosts: each bucket pushed in partitions of "
      "at most MB MiB, earliest layer first [BytePS' 4, or a 32nd of a smaller model's "
      "gradients]", p_real, ps_partition_mb, 1e-3, 4096),
  NUM("ps-spare-share", 0, "X", NULL, "--ps-spare-hosts K: each spare host's server sums this "
      "share of the parameters (at most 1/K), the workers' hosts the rest evenly [BytePS' "
      "2(n-1)/(n^2+Kn-2K)]", p_real, ps_spare_share, 1e-6, 1),
  NUM("ps-credit-mb", 0, "MB", NULL, "--ps-spare-hosts: at most MB MiB of pushes below the "
      "scheduler (ByteScheduler's credit), so that earlier layers' partitions overtake later "
      "ones and the pieces of a partition leave together [two partitions]", p_real,
      ps_credit_mb, 1e-3, 4096),
  WORD("ps-sync", "MODEL", "bsp", NULL, "ps: bsp (every update waits for every rank), ssp:K (a "
       "worker may run on parameters at most K updates old) or async (each gradient applied "
       "on arrival)", p_ps_sync, ps_sync),
  {"ps-backup", 0, "B", NULL, "off", "ps backup workers: each update uses the first world-B "
   "gradients to arrive, later ones are dropped (0: the machinery with every gradient)",
   p_ps_backup, M(ps_sync.backup), W(ps_sync.backup), 0, 0, 1023},
  NUM("ring-period", 0, "H", "1", "ring: post-local SGD: ranks step on their own gradients "
      "and average their parameters after every H-th step (PyTorch's PostLocalSGDOptimizer + "
      "PeriodicModelAverager); 1: gradients all-reduced every step (DDP)", p_whole, ring_period,
      1, 1e6),
  {"target-loss", 0, "X", NULL, "1.10 x the synchronous run's final smoothed loss", "the "
   "training loss whose wall-clock time to reach the comparison reports for every run",
   p_real, M(target_loss), W(target_loss), 0, 1e-12, 1e12},
  NUM("timeout", 0, "SEC", "60", "longest wait for any peer before failing", p_real,
      timeout_s, 0.05, 86400),
  WORD("device", "D", "auto", NULL, "cpu | cuda | auto (cuda when a GPU is present)", p_device,
       device),
  WORD("bind", "ADDR", NULL, "loopback for a local job, else this host's address toward "
       "MASTER_ADDR", "address this rank's sockets listen on; 0.0.0.0: every interface",
       p_bind, bind),
  WORD("transport", "T", "tcp", NULL, "tcp | ipc | shm: the data sockets; ipc (Unix sockets) "
       "joins ranks of one machine only; shm: ranks of one machine train through shared memory "
       "(ring: --algo hier, ps: --ps-local-reduce), sockets ipc", p_transport, transport),
  WORD("secret-file", "F", NULL, "GS_JOB_SECRET; a fresh one for a local job",
       "the job secret every rank proves (a file of mode 0600, the same on every node)", p_str,
       secret_file),
  SWITCH("encrypt", 0, "off", "encrypt every data connection (ZeroMQ CURVE, keys from the job "
         "secret)", encrypt, 1),
  {"hosts", 0, "K", NULL, "--link alone: one host per rank", "emulated hosts (network "
   "namespaces, needs root): ranks spread host-major over K hosts", p_whole, M(hosts), W(hosts),
   0, 1, 250},
  WORD("link", "RATE", NULL, "auto: 1gbit where this process may build emulated hosts "
       "(root), else none", "emulated hosts' links, each direction (tc units: 100mbit, 1gbit); "
       "none: this machine's loopback", p_link, link_arg),
  WORD("link-host", "H=RATE[,...]", NULL, "none", "emulated hosts: host H's link runs at "
       "RATE instead of --link's (a slow uplink: --link 1gbit --link-host 3=100mbit)",
       p_link_host, link_host_arg),
  NUM("host-cpus", 0, "CORES", "0", "emulated hosts: cores each host may use, as separate "
      "machines would (a CPU quota per host, as Mininet's CPULimitedHost; 0.5: half a core); 0: "
      "the hosts share this machine's cores", p_real, host_cpus, 0, 4096),
  WORD("latency", "D", NULL, "0", "emulated links' one-way host-to-host delay (100us, 2ms)",
       p_str, latency_arg),
  {"threads", 0, "N", NULL, "cores / local ranks", "BLAS threads per rank", p_whole, M(threads),
   W(threads), 0, 1, 1024},
  NUM("nnodes", 0, "N", NULL, "multi-node without another launcher: run this command on each "
      "of N machines (with --node-rank, --master-addr, --master-port), as torchrun", p_whole,
      nnodes, 1, 65536),
  NUM("node-rank", 0, "R", "0", "--nnodes: this machine's index, 0..N-1 (node 0 hosts rank 0)",
      p_whole, node_rank, 0, 65535),
  NUM("nproc-per-node", 0, "K", "1", "--nnodes: ranks this machine starts (global ranks R*K .. "
      "R*K+K-1)", p_whole, nproc_per_node, 1, 4096),
  WORD("master-addr", "ADDR", NULL, "$MASTER_ADDR", "--nnodes: node 0's address, where rank 0 "
       "hosts the rendezvous", p_str, master_addr),
  {"master-port", 0, "PORT", NULL, "$MASTER_PORT", "--nnodes: the rendezvous' port on node 0 "
   "(free on that machine)", p_whole, M(master_port), W(master_port), 0, 1, 65535},
  WORD("out", "DIR", NULL, "results/<timestamp>[-<launcher>]", "where reports are written (--calibrate: the calibration file)",
       p_str, out),
  WORD("save-params", "DIR", NULL, NULL, "save the final parameters (.npy per tensor)", p_str,
       save_params),
  WORD("replay", "FILE", NULL, NULL, "with --mode local: replay a ps run's apply-order log "
       "(runs/<id>/apply_order.txt of ssp, async, backup; of K servers, any one of their "
       "apply_order-shard<k>.txt) in one process and check its bits",
       p_str, replay),
  WORD("load-params", "DIR", NULL, NULL, "start from these parameters (.npy per tensor)", p_str,
       train.load_params),
  SWITCH("quiet", 'q', NULL, "no progress lines (the tables still print)", quiet, 1),
  SWITCH("version", 0, NULL, "print the version, git revision, build type, CPU code path and "
         "library versions, and stop", version, 1),
  {"log-every", 0, "N", NULL, "a tenth of the steps",
   "progress line every N steps when stdout is not a terminal", p_whole, M(log_every),
   W(log_every), 0, 1, 1e12},
  SWITCH("json", 0, NULL, "collective: print where the table's JSON is written (always, in "
         "--out)", json, 1),
  SWITCH("verify", 0, NULL, "hash the parameters on every rank after every step (steps.csv "
         "param_hash)", verify, 1),
  SWITCH("eval", 0, NULL, "report training-set accuracy at the end", eval, 1),
  WORD("eval-data", "SPEC", NULL, NULL, "report accuracy and loss on this held-out data at the "
       "end (a --data spec, e.g. idx:test-images.idx,test-labels.idx)", p_str, eval_data),
  {"eval-every", 0, "N", NULL, "a twentieth of the steps",
   "--eval-data: also the held-out accuracy after every N steps (rank 0 copies its "
   "parameters there and evaluates the copies after training; report.json heldout_curve, "
   "accuracy.svg)", p_whole, M(eval_every), W(eval_every), 0, 1, 1e12},
  WORD("report", "DIR", NULL, NULL, "no training: print the tables of DIR/report.json and draw "
       "its charts again", p_str, report),
  WORD("compare", "DIRS", NULL, NULL, "no training: the runs of several results directories "
       "(a comma list) side by side: time to the target loss (--target-loss, else from a "
       "synchronous run among them), loss.svg and compare.json into --out", p_str, compare),
  WORD("peer", "NAME", NULL, NULL, "torch: also train PyTorch DDP (gloo) on the same model, "
       "batch, data and worlds, a row beside ps and ring", p_one, peer),
  WORD("collective", "OP", NULL, NULL, "benchmark the backend alone, as nccl-tests (-b -e -f -n "
       "-w -c below): all_reduce (or allreduce), reduce_scatter, all_gather, broadcast, reduce",
       p_str, collective),
  NUM("root", 'r', "RANK", "0", "collective: broadcast's and reduce's root", p_whole, root, 0,
      1e6),
  NUM("minbytes", 'b', "SIZE", "8", "collective: smallest size", p_size, min_bytes, 0,
      64.0 * 1024 * 1024 * 1024),
  NUM("maxbytes", 'e', "SIZE", "256M", "collective: largest size", p_size, max_bytes, 0,
      64.0 * 1024 * 1024 * 1024),
  NUM("stepfactor", 'f', "X", "2", "collective: size factor", p_real, factor, 1.0001, 1024),
  NUM("iters", 'n', "N", "20", "collective: timed iterations", p_whole, iters, 1, 1e6),
  NUM("warmup-iters", 'w', "N", "5", "collective: warmup iterations", p_whole, warmup_iters, 0,
      1e6),
  NUM("check", 'c', "0|1", "1", "collective: check every result against the exact sum",
      p_bool01, check, 0, 1),
  WORD("algo", "A", "auto", NULL, "the ring's all-reduce: ring, rd (recursive "
       "doubling), direct (every rank to every rank), shm (shared memory, every rank on one "
       "host), hier (inside each host through shared memory, a ring between hosts; training "
       "too), or auto (shm on one host, hier on several hosts of several ranks; elsewhere rd "
       "for small sizes, ring above); training runs ring or hier (auto: hier on several hosts "
       "of several ranks)",
       p_algo, algo),
  NUM("op", 'o', "OP", "sum", "collective: the reduction: sum, avg (the sum / N), prod, min "
      "or max (prod, min, max: --mode ring, on the CPU or NCCL)", p_str, redop_arg, 0, 0),
  NUM("datatype", 'd', "TYPE", "float", "collective: the wire's dtype: float, half, bfloat16, "
      "double or int32 (size = count x 4, 2, 2, 8 or 4 bytes; double and int32: --mode ring, "
      "on the CPU or NCCL)", p_str, dtype_arg, 0, 0),
  SWITCH("calibrate", 0, NULL, "no training: measure this machine for the cost model "
         "(transport, kernels, optimizer, --model's compute at --batch) and write a calibration "
         "to --out FILE [results/calibration-<timestamp>.json]; --link/--latency add a what-if "
         "network. Edit the file by hand for a GPU (docs/model.md)", calibrate, 1),
  SWITCH("project", 0, NULL, "no training: predict ps, ring and sharded ps at --world sizes "
         "over --link/--latency from a calibration: table, projection.json, projection.svg in "
         "--out DIR [results/<timestamp>-projection]", project, 1),
  WORD("calibration", "F", NULL, "a fresh calibration of this machine", "project: the "
       "calibration to predict from (bench --calibrate's file, or edited)", p_str, calibration),
  NUM("hosts-per", 0, "N", "1", "project: ranks per host", p_whole, hosts_per, 1, 1 << 20),
  NUM("step-compute-ms", 0, "MS", NULL, "project: forward and backward of one step at --batch "
      "on the hardware projected, instead of the calibration's (e.g. a GPU's; any --model; a "
      "profile splits it as it measured forward and backward)",
      p_real, step_compute_ms, 1e-6, 1e7),
  WORD("ready-by", "HOW", "layers", NULL, "project: when backward has a bucket's gradients "
       "ready: layers (per tensor, as the calibration timed it, or as a profile measured its "
       "layers) "
       "or bytes (in proportion to them)", p_str, ready_by),
  {"help", 'h', NULL, NULL, NULL, "this text", p_help, 0, 0, 0, 0, 0},
};
#define NFLAGS (sizeof FLAGS / sizeof FLAGS[0])

/* ---- --help ---- */

/* ---- --help: the table printed (each flag's letter, name, argument, help
 * and default, wrapped at 66 columns), then examples and the launch
 * conventions ---- */

static void print_help(FILE *f, const flag *flags, size_t nflags) {
  fprintf(f,
          "usage: bench [flags]\n"
          "Measure a DataParallel-style parameter server (ps) against DDP-style ring\n"
          "all-reduce (ring) on the same model, data and machine.\n\n");
  for (size_t i = 0; i < nflags; i++) {
    const flag *x = &flags[i];
    char left[64], text[600];
    const char *def = x->show ? x->show : x->def;
    snprintf(left, sizeof left, "%s%c%s--%s%s%s", x->letter ? "-" : "", x->letter ? x->letter : ' ',
             x->letter ? ", " : "   ", x->name, x->arg ? " " : "", x->arg ? x->arg : "");
    snprintf(text, sizeof text, "%s%s%s%s", x->help, def ? " [" : "", def ? def : "",
             def ? "]" : "");
    /* wrap the text at 66 columns after the flag column */
    const char *p = text;
    bool first = true;
    while (*p) {
      size_t n = strlen(p);
      if (n > 66) {
        n = 66;
        while (n > 0 && p[n] != ' ') n--;
        if (n == 0) n = 66;
      }
      fprintf(f, "  %-28s %.*s\n", first ? left : "", (int)n, p);
      p += n;
      while (*p == ' ') p++;
      first = false;
    }
  }
  fprintf(f,
          "\nExamples:\n"
          "  bench                                  ps vs ring, default model, worlds 1, 2, 4, on\n"
          "        emulated 1 Gbit/s links where root (else loopback, saying why), 3 times each\n"
          "  bench --mode=ps --world 1,2,4          scaling of the parameter server\n"
          "  bench --mode=ring --collective allreduce -b 8 -e 256M -f 2 --world 2\n"
          "  bench --mode=local --model lenet --data cifar10:data_batch_1.bin --save-params p\n"
          "  bench --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 10.0.0.1 \\\n"
          "        --master-port 29500 --mode ring   (and --node-rank 1 on the other machine)\n"
          "  bench --calibrate --model resnet50      this machine's constants for the cost model\n"
          "  bench --project --world 8,64,512,4096 --hosts-per 8 --link 100gbit --latency 5us \\\n"
          "        --model resnet50 --calibration F  the cost model's prediction (no rank starts)\n"
          "  bench --hosts 2 --link 1gbit -- python3 train.py   a program of your own, a rank per\n"
          "        host of 2 emulated ones, with torchrun's variables (RANK, MASTER_ADDR, ...)\n"
          "Launch conventions: started by torchrun (RANK, WORLD_SIZE), Open MPI mpirun\n"
          "(OMPI_COMM_WORLD_*), MPICH mpiexec (PMI_RANK, PMI_SIZE) or Slurm srun\n"
          "(SLURM_PROCID, SLURM_NTASKS), bench joins as that one rank, with MASTER_ADDR /\n"
          "MASTER_PORT naming rank 0's rendezvous (README.md: Launching on several machines).\n");
}

void gs_opts_usage(FILE *f) { print_help(f, FLAGS, NFLAGS); }

/* ---- parsing ---- */

void gs_opts_free(gs_opts *o) {
  for (int i = 0; i < o->nowned; i++) free(o->owned[i]);
  o->nowned = 0;
}

/* The table's defaults, through the table's parsers, over the trainer's. */
static int defaults(gs_opts *o, gs_err *e) {
  memset(o, 0, sizeof *o);
  gs_train_opts_default(&o->train);
  for (size_t i = 0; i < NFLAGS; i++)
    if (FLAGS[i].def && FLAGS[i].arg) GS_TRY(FLAGS[i].parse(o, &FLAGS[i], FLAGS[i].def, e));
  o->overlap = -1; /* the mode's own: ring on, ps off */
  o->resend = -1;  /* training on, the collective benchmark off */
  o->ps_hostagg = -1; /* on emulated hosts of several ranks each */
  o->ps_spare = -1;   /* a ps run of --ps-spare-hosts says how many */
  o->world_given = o->mode_given = o->repeat_given = false;
  return GS_OK;
}

/* the lowest-level checks that need several flags */

int gs_opts_parse(int argc, char **argv, gs_opts *o, bool *help, gs_err *e) {
  *help = false;
  GS_TRY(defaults(o, e));
  struct option longs[NFLAGS + 1];
  char shorts[3 * NFLAGS + 2] = ":";
  size_t ns = 1;
  for (size_t i = 0; i < NFLAGS; i++) {
    longs[i] = (struct option){FLAGS[i].name, FLAGS[i].arg ? required_argument : no_argument,
                               NULL, 256 + (int)i};
    if (FLAGS[i].letter) {
      shorts[ns++] = FLAGS[i].letter;
      if (FLAGS[i].arg) shorts[ns++] = ':';
    }
  }
  shorts[ns] = 0;
  memset(&longs[NFLAGS], 0, sizeof longs[NFLAGS]);

  const char *collective_only = NULL, *project_only = NULL;
  char collective_name[64], project_name[64];
  bool given[NFLAGS] = {false};
  optind = 0;  /* 0, not 1: also forgets a half-read "-abc" of an earlier parse */
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
    const flag *f = NULL;
    for (size_t i = 0; i < NFLAGS && !f; i++)
      if (c == 256 + (int)i || (c < 256 && c == FLAGS[i].letter)) f = &FLAGS[i];
    const flag *want = NULL;
    for (size_t i = 0; i < NFLAGS && !want && (c == ':' || c == '?'); i++)
      if (optopt == 256 + (int)i || (optopt > 0 && optopt < 256 && optopt == FLAGS[i].letter))
        want = &FLAGS[i];
    char name[64];
    if (c == ':' && want)
      return GS_FAIL(e, GS_EINVAL, "%s needs a value (%s)", flag_name(want, name, sizeof name),
                     want->arg);
    if (c == '?' && want)
      return GS_FAIL(e, GS_EINVAL, "%s takes no value", flag_name(want, name, sizeof name));
    if (!f) {
      if (optopt > 0 && optopt < 256)
        return GS_FAIL(e, GS_EINVAL, "unknown flag -%c (see bench --help)", optopt);
      return GS_FAIL(e, GS_EINVAL, "unknown flag %s (see bench --help)", argv[optind - 1]);
    }
    int rc = f->parse(o, f, optarg, e);
    if (rc < 0) return rc;
    /* a flag that does nothing without --collective is an error then
     * (checked once every flag is read: --collective may come later) */
    if (!strncmp(f->help, "collective:", 11) && !collective_only)
      collective_only = flag_name(f, collective_name, sizeof collective_name);
    if (!strncmp(f->help, "project:", 8) && !project_only)
      project_only = flag_name(f, project_name, sizeof project_name);
    given[f - FLAGS] = true;
    if (rc > 0) {
      *help = true;
      return GS_OK;
    }
  }
  if (optind < argc && optind > 0 && !strcmp(argv[optind - 1], "--"))
    o->exec = &argv[optind]; /* a command of the user's for the emulated hosts (exec.c) */
  else if (optind < argc)
    return GS_FAIL(e, GS_EINVAL, "unexpected argument '%s' (flags start with --; see bench "
                   "--help)", argv[optind]);
  for (size_t i = 0; i < NFLAGS && o->exec; i++) {
    char name[64];
    if (given[i] && gs_exec_flag_refused(FLAGS[i].name))
      return GS_FAIL(e, GS_EINVAL, "%s %s", flag_name(&FLAGS[i], name, sizeof name),
                     gs_exec_flag_refused(FLAGS[i].name));
  }
  for (size_t i = 0; i < NFLAGS && (o->calibrate || o->project); i++) {
    const char *why = given[i] ? gs_costmodel_flag_refused(o, FLAGS[i].name) : NULL;
    char name[64];
    if (why) return GS_FAIL(e, GS_EINVAL, "%s %s", flag_name(&FLAGS[i], name, sizeof name), why);
  }
  if (!o->collective && o->algo != GS_ALGO_AUTO &&
      o->algo != GS_ALGO_RING && o->algo != GS_ALGO_HIER)
    return GS_FAIL(e, GS_EINVAL, "--algo %s runs in the collective benchmark only: training runs "
                   "ring or hier (or auto); add --collective allreduce, or pick one of those",
                   gs_algo_name((gs_algo)o->algo));
  if (collective_only && !o->collective)
    return GS_FAIL(e, GS_EINVAL, "%s belongs to the collective benchmark and does nothing in a "
                   "training run: add --collective allreduce, or drop it", collective_only);
  if (project_only && !o->project)
    return GS_FAIL(e, GS_EINVAL, "%s belongs to --project and does nothing here: add --project, "
                   "or drop it", project_only);
  return gs_opts_resolve(o, e);
}
