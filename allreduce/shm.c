/* shm.c: the all-reduce through shared memory, for a job whose ranks all
 * run on one host (allreduce.h gs_algo "shm"): no socket, no I/O thread,
 * no wake-up per hop, which is what a ZeroMQ hop costs on one machine.
 *
 * Rank 0 creates an anonymous segment (memfd: no name in /dev/shm, so
 * nothing outlives the job, however it ends) in prepare; its path under
 * /proc/<pid>/fd (which only the same user may open) and every rank's host
 * key (boot id and the network, IPC, PID and mount namespaces: an emulated
 * host is a namespace, and its traffic must cross its link) travel in the
 * ring's handshake (this row's hello / heard). When every key is the same,
 * every rank maps the segment, the ranks agree over the ring algorithm
 * that all of them did, and rank 0 closes its descriptor (the mappings
 * keep the memory).
 *
 * The buffer goes through in rounds of at most `chunk` bytes per rank, over
 * two sets of N slots (rounds alternate sets):
 *
 *   round k, set k%2      rank 0        rank 1       ...   rank N-1
 *   copy in               slot 0 = v0   slot 1 = v1        slot N-1
 *   barrier
 *   reduce (split)        part 0 of slot 0 = ((v0 + v1) + v2) + ... (rank r
 *                         sums part r of every slot, in rank order)
 *   barrier
 *   copy out              dst = slot 0 (every rank)
 *
 * With one barrier ("whole"), every rank sums all of the round itself, in
 * the same order, and copies out its own result: half the waits, N times
 * the reads; it wins at small sizes and with two ranks. Either way every
 * rank ends with the same bits, run after run.
 *
 * Two sets make one barrier enough between rounds: a rank writes set s
 * again in round k+2 only after passing round k+1's barrier, which every
 * rank reaches after it has read set s in round k.
 *
 * Barriers count arrivals in one shared word: spin briefly (yielding the
 * core when ranks outnumber cores), then sleep on the word with futex.
 * Every wait ends: at the ring's timeout (naming the ranks that did not
 * arrive), when a rank's process is gone, or when a failing rank writes its
 * reason into the segment (shm_tell), which every waiter reports. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "allreduce/comm.h"

#define SHM_MAGIC 0x67737368u /* "gssh" */
#define DEFAULT_SHM_CHUNK ((size_t)256 << 10)
#define DEFAULT_SHM_WHOLE ((size_t)64 << 10)
/* Poll this long before sleeping on a barrier. A rank that yields the core
 * while it polls costs the others little, and a futex wake-up costs a
 * sleeping rank its turn on a shared core. */
#define DEFAULT_SHM_SPIN_US 1000
#define LINE 64

typedef struct head {
  uint32_t magic, world;
  uint64_t nonce;                     /* also in the handshake: the right object */
  uint64_t chunk;                     /* slot bytes */
  uint64_t whole;                     /* up to this many bytes: one barrier */
  _Alignas(LINE) _Atomic uint32_t arrived; /* barriers: arrivals so far (futex word) */
  _Alignas(LINE) _Atomic uint32_t sleepers;
  _Alignas(LINE) _Atomic uint32_t abort_by; /* 0, or the first failing rank + 1 */
} head;

/* per rank, on lines of its own: its pid, the barriers it has reached, and
 * why it stopped (written once, by it alone, before it claims abort_by) */
typedef struct rank_line {
  _Alignas(LINE) _Atomic int32_t pid;
  _Atomic uint32_t reached;
  char why[248];
} rank_line;

typedef struct gs_shm {
  void *base;
  size_t bytes;
  head *h;
  rank_line *ranks;
  char *slots;                        /* 2 sets x N slots of chunk bytes */
  size_t chunk;                       /* read from the header once, when attached */
  size_t whole;
  double spin;                        /* seconds to poll before sleeping */
  uint32_t barriers;                  /* passed by this rank */
  uint64_t rounds;                    /* done by this rank: picks the set */
  bool yield;                         /* more ranks than cores */
  int fd;                             /* rank 0's until every rank mapped it, else -1 */
  bool on;                            /* every rank mapped it (the vote) */
  bool told;                          /* this rank wrote its reason */
  atomic_int stop;                    /* shm_interrupt */
  char name[64];                      /* /proc/<pid>/fd/<fd> */
} gs_shm;

#define KEY_MAX 160
/* The row's state: every rank's host key and rank 0's segment, as the
 * handshake brought them, and this rank's mapping once connected. */
typedef struct shm_state {
  int rank, world;
  char (*keys)[KEY_MAX];              /* world entries; equal keys share memory */
  char spec[96];                      /* rank 0's segment ("" none) */
  gs_shm *m;
} shm_state;

static size_t head_bytes(int N) {
  size_t b = sizeof(head) + (size_t)N * sizeof(rank_line);
  return (b + 4095) & ~(size_t)4095;
}

/* The object's size for N ranks and slots of chunk bytes; false when it
 * does not fit a size_t (a header no rank 0 of ours wrote). */
static bool segment_bytes(int N, uint64_t chunk, size_t *out) {
  size_t slots;
  return !__builtin_mul_overflow((size_t)2 * (size_t)N, chunk, &slots) &&
         !__builtin_add_overflow(head_bytes(N), slots, out);
}

void gs_shm_header_write(void *seg, int world, uint64_t nonce, uint64_t chunk, uint64_t whole) {
  head *h = seg;
  h->magic = SHM_MAGIC;
  h->world = (uint32_t)world;
  h->nonce = nonce;
  h->chunk = chunk;
  h->whole = whole;
}

size_t gs_shm_header_bytes(int world) { return head_bytes(world); }

bool gs_shm_header_check(const void *seg, size_t bytes, int world, uint64_t nonce,
                         size_t *chunk, size_t *whole) {
  /* the header's fields, read once: what is checked is what is used, even
   * if someone writes the object meanwhile */
  head snap;
  size_t want = 0;
  if (bytes < head_bytes(world)) return false;
  memcpy(&snap, seg, offsetof(head, arrived));
  if (snap.magic != SHM_MAGIC || snap.nonce != nonce || snap.world != (uint32_t)world ||
      snap.chunk < LINE || snap.chunk % LINE || snap.chunk > ((uint64_t)1 << 30) ||
      !segment_bytes(world, snap.chunk, &want) || bytes != want)
    return false;
  *chunk = (size_t)snap.chunk;
  *whole = (size_t)snap.whole;
  return true;
}

/* boot id and namespaces: equal only for processes that share memory and
 * whose traffic would not cross an (emulated) link */
static void host_key(char *buf, size_t cap) {
  char boot[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  size_t len = (size_t)snprintf(buf, cap, "%s", boot);
  static const char *ns[] = {"net", "ipc", "pid", "mnt"};
  for (size_t i = 0; i < sizeof ns / sizeof *ns && len < cap; i++) {
    char p[32];
    struct stat st;
    snprintf(p, sizeof p, "/proc/self/ns/%s", ns[i]);
    unsigned long long ino = stat(p, &st) == 0 ? (unsigned long long)st.st_ino : 0;
    len += (size_t)snprintf(buf + len, cap - len, ":%llx", ino);
  }
}

static bool may_use(const gs_ring *r) {
  return (r->o.algo == GS_ALGO_AUTO || r->o.algo == GS_ALGO_SHM) && r->o.world > 1 &&
         r->o.k->device == GS_DEV_CPU && !gs_dtype_lp(r->o.wire) &&
         !(getenv("GS_SHM") && !strcmp(getenv("GS_SHM"), "0"));
}

static int map(gs_ring *r, gs_shm *s, int fd, gs_err *e) {
  s->base = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (s->base == MAP_FAILED) {
    s->base = NULL;
    return GS_FAIL(e, GS_EIO, "rank %d: mapping shared memory %s (%zu bytes): %s", r->o.rank,
                   s->name, s->bytes, strerror(errno));
  }
  s->h = s->base;
  s->ranks = (rank_line *)((char *)s->base + sizeof(head));
  s->slots = (char *)s->base + head_bytes(r->o.world);
  return GS_OK;
}

static void shm_close(gs_shm *s) {
  if (!s) return;
  if (s->base) munmap(s->base, s->bytes);
  if (s->fd >= 0) close(s->fd);
  free(s);
}

static int shm_prepare(gs_ring *r, void **state, gs_err *e) {
  shm_state *st = calloc(1, sizeof *st);
  if (!st) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for shared memory", r->o.rank);
  *state = st;
  st->rank = r->o.rank;
  st->world = r->o.world;
  st->keys = calloc((size_t)r->o.world, sizeof *st->keys);
  if (!st->keys) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for shared memory", r->o.rank);
  host_key(st->keys[st->rank], KEY_MAX);
  if (r->o.rank != 0 || !may_use(r)) return GS_OK;
  gs_shm *s = calloc(1, sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "rank 0: out of memory for shared memory");
  int N = r->o.world;
  s->chunk = gs_ring_env_size("GS_SHM_CHUNK", DEFAULT_SHM_CHUNK);
  if (s->chunk > ((size_t)1 << 30)) s->chunk = (size_t)1 << 30;
  size_t most = r->o.max_count * gs_ring_es(r); /* no round is larger */
  if (s->chunk > most) s->chunk = most;
  s->chunk = (s->chunk + LINE - 1) & ~(size_t)(LINE - 1);
  if (s->chunk < LINE) s->chunk = LINE;
  if (!segment_bytes(N, s->chunk, &s->bytes)) {
    size_t chunk = s->chunk;
    free(s);
    return GS_FAIL(e, GS_EINVAL, "rank 0: shared memory for %d ranks of %zu bytes each does not "
                   "fit in memory", N, chunk);
  }
  uint64_t nonce;
  randombytes_buf(&nonce, sizeof nonce);
  int fd = memfd_create("gradsync-shm", MFD_CLOEXEC);
  if (fd < 0) {
    /* no memfd here: the job runs without it, as on several hosts */
    free(s);
    return GS_OK;
  }
  s->fd = fd;
  snprintf(s->name, sizeof s->name, "/proc/%d/fd/%d", (int)getpid(), fd);
  int rc = GS_OK;
  if (ftruncate(fd, (off_t)s->bytes) != 0)
    rc = GS_FAIL(e, GS_EIO, "rank 0: sizing shared memory to %zu bytes: %s", s->bytes,
                 strerror(errno));
  if (rc == GS_OK) rc = map(r, s, fd, e);
  if (rc < 0) {
    shm_close(s);
    return rc;
  }
  s->whole = gs_ring_env_size("GS_SHM_WHOLE", DEFAULT_SHM_WHOLE);
  gs_shm_header_write(s->base, N, nonce, s->chunk, s->whole);
  st->m = s;
  snprintf(st->spec, sizeof st->spec, "%s:%016" PRIx64, s->name, nonce);
  return GS_OK;
}

static void shm_hello(const void *state, int origin, Gradsync__RingHello *h) {
  const shm_state *st = state;
  h->host = (char *)st->keys[origin];
  h->shm_name = (char *)(origin == 0 ? st->spec : "");
}

static void shm_heard(void *state, int origin, const Gradsync__RingHello *h) {
  shm_state *st = state;
  snprintf(st->keys[origin], KEY_MAX, "%s", h->host ? h->host : "");
  if (origin == 0) snprintf(st->spec, sizeof st->spec, "%s", h->shm_name ? h->shm_name : "");
}

/* A rank > 0 maps rank 0's object; false (and why) when it cannot. */
static bool attach(gs_ring *r, shm_state *to, const char *spec, char *why, size_t cap) {
  gs_shm *s = calloc(1, sizeof *s);
  if (!s) return snprintf(why, cap, "out of memory"), false;
  s->fd = -1;
  const char *colon = strrchr(spec, ':');
  size_t nl = colon ? (size_t)(colon - spec) : 0;
  if (!colon || nl >= sizeof s->name) {
    free(s);
    return snprintf(why, cap, "rank 0 named no shared memory"), false;
  }
  memcpy(s->name, spec, nl);
  uint64_t nonce = strtoull(colon + 1, NULL, 16);
  /* only a descriptor of rank 0's, never another file it might name */
  int pid, dfd, end = 0;
  if (sscanf(s->name, "/proc/%d/fd/%d%n", &pid, &dfd, &end) != 2 || s->name[end] != '\0') {
    snprintf(why, cap, "rank 0 named '%s', not a descriptor under /proc", s->name);
    free(s);
    return false;
  }
  int fd = open(s->name, O_RDWR | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size < (off_t)head_bytes(r->o.world)) {
    snprintf(why, cap, "opening %s: %s", s->name, fd < 0 ? strerror(errno) : "too small");
    if (fd >= 0) close(fd);
    free(s);
    return false;
  }
  s->bytes = (size_t)sb.st_size;
  gs_err e;
  int rc = map(r, s, fd, &e);
  close(fd);
  if (rc < 0 || !gs_shm_header_check(s->base, s->bytes, r->o.world, nonce, &s->chunk,
                                      &s->whole)) {
    snprintf(why, cap, "%s is not this job's", s->name);
    shm_close(s);
    return false;
  }
  to->m = s;
  return true;
}

static int shm_connect(gs_ring *r, void *state, const char *const *endpoints, gs_err *e) {
  shm_state *st = state;
  int N = r->o.world;
  bool one_host = true;
  int other = -1;
  for (int i = 1; i < N && one_host; i++)
    if (strcmp(st->keys[i], st->keys[0])) one_host = false, other = i;
  bool want = r->o.algo == GS_ALGO_SHM;
  /* from the handshake alone, so every rank decides alike */
  bool try_it = one_host && st->spec[0] &&
                (r->o.algo == GS_ALGO_AUTO || r->o.algo == GS_ALGO_SHM);
  if (!try_it) {
    shm_close(st->m);
    st->m = NULL;
    if (!want) return GS_OK;
    if (!one_host)
      return GS_FAIL(e, GS_EINVAL, "rank %d: --algo shm needs every rank on one host, and rank "
                     "%d is on another than rank 0 (or in another network namespace); use "
                     "--algo auto", r->o.rank, other);
    return GS_FAIL(e, GS_EINVAL, "rank %d: --algo shm: rank 0 made no shared memory (it needs "
                   "/dev/shm, host buffers and an fp32, fp64 or int32 wire; GS_SHM=0 turns it "
                   "off); use --algo auto", r->o.rank);
  }
  char why[256] = "";
  bool ok = false;
  if (!may_use(r))
    snprintf(why, sizeof why, "GS_SHM=0, device buffers or a 16-bit wire on this rank");
  else if (r->o.rank == 0)
    ok = st->m != NULL;
  else
    ok = attach(r, st, st->spec, why, sizeof why);
  if (ok) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    st->m->yield = cores > 0 && r->o.local_ranks > cores;
    st->m->spin = (double)gs_ring_env_size("GS_SHM_SPIN_US", DEFAULT_SHM_SPIN_US) * 1e-6;
    atomic_store(&st->m->ranks[r->o.rank].pid, (int32_t)getpid());
  }
  /* Every rank learns whether all mapped it (the minimum of the votes),
   * over the ring: the shared memory is not yet trusted. */
  union { float f; double d; int32_t i; } v;
  if (r->o.wire == GS_F64) v.d = ok;
  else if (r->o.wire == GS_I32) v.i = ok;
  else v.f = ok;
  /* the vote runs as a collective of one element would without shared
   * memory (under auto: recursive doubling, which connects the mesh) */
  int rc = gs_ring_run(r, gs_algo_pick(r->o.algo, 1, r->o.world), GS_REDOP_MIN, &v, &v, 1, 0, 0,
                       NULL, e);
  if (rc < 0) return rc;
  bool all = r->o.wire == GS_F64 ? v.d > 0 : r->o.wire == GS_I32 ? v.i > 0 : v.f > 0;
  if (all && st->m && st->m->fd >= 0) {
    close(st->m->fd); /* every rank has it mapped */
    st->m->fd = -1;
  }
  if (all) st->m->on = true;
  else {
    shm_close(st->m);
    st->m = NULL;
    if (want)
      return GS_FAIL(e, GS_EINVAL, "rank %d: --algo shm: not every rank could map rank 0's "
                     "shared memory%s%s%s; use --algo auto", r->o.rank, why[0] ? " (here: " : "",
                     why, why[0] ? ")" : "");
    if (why[0]) fprintf(stderr, "rank %d: no shared memory (%s): the all-reduce uses sockets\n",
                        r->o.rank, why);
  }
  return GS_OK;
}

static bool shm_ready(const void *state) {
  const shm_state *st = state;
  return st->m && st->m->on;
}

static void shm_tell(void *state, const char *msg) {
  shm_state *st = state;
  if (!shm_ready(st)) return;
  gs_shm *s = st->m;
  if (s->told) return;
  s->told = true;
  snprintf(s->ranks[st->rank].why, sizeof s->ranks[st->rank].why, "%s", msg ? msg : "");
  uint32_t none = 0; /* the first rank to stop is the one named */
  atomic_compare_exchange_strong(&s->h->abort_by, &none, (uint32_t)st->rank + 1);
  syscall(SYS_futex, &s->h->arrived, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void shm_interrupt(void *state) {
  shm_state *st = state;
  if (st->m) atomic_store(&st->m->stop, 1);
}

static void shm_free(gs_ring *r, void *state, bool abort) {
  shm_state *st = state;
  shm_close(st->m);
  free(st->keys);
  free(st);
}

/* What the rounds are, for errors. */
static int wait_error(gs_ring *r, gs_shm *s, uint32_t target, int code, const char *what,
                      gs_err *e) {
  uint32_t by = atomic_load(&s->h->abort_by);
  if (by) { /* its reason, terminated here whatever the object holds */
    char why[sizeof s->ranks[0].why + 1] = "";
    if (by <= (uint32_t)r->o.world) memcpy(why, s->ranks[by - 1].why, sizeof why - 1);
    why[sizeof why - 1] = 0;
    return GS_FAIL(e, GS_EPEER, "rank %d: rank %u stopped the shared-memory all-reduce (bucket "
                   "%d, step %" PRId64 "): %s", r->o.rank, by - 1, r->cur_bucket, r->cur_step,
                   why);
  }
  char late[256] = "";
  size_t len = 0;
  for (int i = 0; i < r->o.world && len < sizeof late - 16; i++)
    if ((int32_t)(atomic_load(&s->ranks[i].reached) - target) < 0)
      len += (size_t)snprintf(late + len, sizeof late - len, "%s%d", len ? ", " : "", i);
  return GS_FAIL(e, code, "rank %d: shared-memory all-reduce of bucket %d, step %" PRId64
                 ": rank(s) %s %s", r->o.rank, r->cur_bucket, r->cur_step, late, what);
}

/* 1: every rank reached the barrier whose arrivals end at target; -1:
 * a rank gave up (wait_error says who and why); 0: not yet. */
static int reached(const gs_shm *s, uint32_t target) {
  if (atomic_load(&s->h->abort_by)) return -1;
  return (int32_t)(atomic_load(&s->h->arrived) - target) >= 0;
}

/* Arrive at the next barrier and wait for every rank. */
static int barrier(gs_ring *r, gs_shm *s, gs_err *e) {
  const uint32_t N = (uint32_t)r->o.world;
  const uint32_t b = ++s->barriers;
  const uint32_t target = b * N;
  atomic_store(&s->ranks[r->o.rank].reached, b);
  uint32_t v = atomic_fetch_add(&s->h->arrived, 1) + 1;
  if (v == target) {
    if (atomic_load(&s->h->sleepers))
      syscall(SYS_futex, &s->h->arrived, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    /* the last to arrive, after the others gave up */
    return atomic_load(&s->h->abort_by) ? wait_error(r, s, b, GS_EPEER, "", e) : GS_OK;
  }
  const double t0 = gs_now(), spin = s->spin;
  const double deadline = t0 + r->o.timeout_ms * 1e-3;
  for (unsigned i = 0;; i++) {
    int got = reached(s, target);
    if (got) return got > 0 ? GS_OK : wait_error(r, s, b, GS_EPEER, "", e);
    if ((i & 63) == 0 && gs_now() - t0 > spin) break;
    if (s->yield) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else __builtin_ia32_pause();
#endif
  }
  atomic_fetch_add(&s->h->sleepers, 1);
  int rc = GS_OK;
  double next_check = gs_now() + 0.1;
  for (;;) {
    v = atomic_load(&s->h->arrived); /* before the test: the futex sleeps only if unchanged */
    int got = reached(s, target);
    if (got) {
      if (got < 0) rc = wait_error(r, s, b, GS_EPEER, "", e);
      break;
    }
    if (gs_interrupted || atomic_load(&s->stop)) {
      rc = GS_FAIL(e, GS_EINTR, "rank %d: interrupted in the shared-memory all-reduce of bucket "
                   "%d, step %" PRId64, r->o.rank, r->cur_bucket, r->cur_step);
      break;
    }
    double now = gs_now();
    if (now > deadline) {
      char what[96];
      snprintf(what, sizeof what, "did not arrive within %d ms (the job's --timeout)", r->o.timeout_ms);
      rc = wait_error(r, s, b, GS_ETIMEOUT, what, e);
      break;
    }
    if (now > next_check) { /* a rank whose process is gone never arrives */
      next_check = now + 0.1;
      for (uint32_t i = 0; i < N; i++) {
        int32_t pid = atomic_load(&s->ranks[i].pid);
        if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
          rc = GS_FAIL(e, GS_EPEER, "rank %d: rank %u (pid %d) exited during the shared-memory "
                       "all-reduce of bucket %d, step %" PRId64, r->o.rank, i, (int)pid,
                       r->cur_bucket, r->cur_step);
          break;
        }
      }
      if (rc < 0) break;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    syscall(SYS_futex, &s->h->arrived, FUTEX_WAIT, v, &ts, NULL, 0);
  }
  atomic_fetch_sub(&s->h->sleepers, 1);
  return rc;
}

/* dst (n elements) = the sum, in rank order, of the n elements at off in
 * every slot of a set, op being the collective's; blocks small enough to
 * stay in the first-level cache across the N - 1 adds. */
static void sum_slots(gs_ring *r, const gs_shm *s, char *set, size_t off, size_t n, void *dst) {
  const size_t es = gs_ring_es(r), blk = 4096 / es;
  const int N = r->o.world;
  for (size_t b = 0; b < n; b += blk) {
    size_t m = n - b < blk ? n - b : blk;
    char *out = (char *)dst + b * es;
    const size_t at = (off + b) * es;
    if (out != set + at) memcpy(out, set + at, m * es);
    for (int i = 1; i < N; i++) gs_ring_combine(r, m, out, set + (size_t)i * s->chunk + at);
  }
}

static int shm_allreduce(gs_ring *r, void *state, const void *src, void *dst, size_t n,
                         gs_ring_stats *st, gs_err *e) {
  gs_shm *s = ((shm_state *)state)->m;
  const int N = r->o.world, me = r->o.rank;
  const size_t es = gs_ring_es(r), per = s->chunk / es;
  /* the same on every rank: they all pass the same n, and rank 0 set the
   * threshold in the header */
  const bool whole = N == 2 || n * es <= s->whole;
  double red = 0;
  for (size_t off = 0; off < n; off += per) {
    size_t len = n - off < per ? n - off : per;
    char *set = s->slots + (size_t)(s->rounds++ & 1) * (size_t)N * s->chunk;
    char *mine = set + (size_t)me * s->chunk;
    memcpy(mine, (const char *)src + off * es, len * es);
    GS_TRY(barrier(r, s, e));
    double a = gs_now();
    if (whole) {
      sum_slots(r, s, set, 0, len, (char *)dst + off * es);
    } else {
      size_t po, pl;
      gs_ring_seg_range(len, N, me, &po, &pl);
      sum_slots(r, s, set, po, pl, set + po * es);
    }
    red += gs_now() - a;
    if (!whole) {
      GS_TRY(barrier(r, s, e));
      memcpy((char *)dst + off * es, set, len * es);
    }
    st->bytes_sent += len * es;
    st->bytes_recv += len * es * (size_t)(whole ? N - 1 : 1);
  }
  st->reduce_s += red;
  return GS_OK;
}

static bool shm_used(const gs_ring_opts *o) {
  return o->algo == GS_ALGO_AUTO || o->algo == GS_ALGO_SHM;
}

const gs_algo_ops gs_algo_shm = {
  .used = shm_used,
  .prepare = shm_prepare,
  .hello = shm_hello,
  .heard = shm_heard,
  .connect = shm_connect,
  .ready = shm_ready,
  .allreduce = shm_allreduce,
  .tell = shm_tell,
  .interrupt = shm_interrupt,
  .close = shm_free,
};
