/* shm_seg.c: one shared-memory segment among the ranks of one host
 * (shm_seg.h), under the shared-memory all-reduce (shm.c) and the
 * hierarchical one (hier.c).
 *
 * The group's first rank creates an anonymous segment (memfd: no name in
 * /dev/shm, so nothing outlives the job, however it ends); its path under
 * /proc/<pid>/fd (which only the same user may open) and a nonce travel in
 * the ring's handshake, the others map it and check its header, and once
 * every member has mapped it the creator closes its descriptor (the
 * mappings keep the memory).
 *
 * Barriers count arrivals in one shared word: spin briefly (yielding the
 * core when ranks outnumber cores), then sleep on the word with futex.
 * Every wait ends: at the ring's timeout (naming the ranks that did not
 * arrive), when a member's process is gone, or when a failing member
 * writes its reason into the segment (gs_shm_tell), which every waiter
 * reports. */
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

#include "allreduce/shm_seg.h"

#define SHM_MAGIC 0x67737368u /* "gssh" */
/* Poll this long before sleeping on a barrier. A rank that yields the core
 * while it polls costs the others little, and a futex wake-up costs a
 * sleeping rank its turn on a shared core. */
#define DEFAULT_SHM_SPIN_US 1000
#define LINE GS_SHM_LINE

struct gs_shm_head {
  uint32_t magic, world;
  uint64_t nonce;                     /* also in the handshake: the right object */
  uint64_t chunk;                     /* slot bytes */
  uint64_t whole;                     /* up to this many bytes: one barrier */
  _Alignas(LINE) _Atomic uint32_t arrived; /* barriers: arrivals so far (futex word) */
  _Alignas(LINE) _Atomic uint32_t sleepers;
  _Alignas(LINE) _Atomic uint32_t abort_by; /* 0, or the first failing member + 1 */
};

/* per member, on lines of its own: its pid, the barriers it has reached,
 * and why it stopped (written once, by it alone, before it claims
 * abort_by) */
struct gs_shm_rank {
  _Alignas(LINE) _Atomic int32_t pid;
  _Atomic uint32_t reached;
  char why[248];
};

typedef struct gs_shm_head head;
typedef struct gs_shm_rank rank_line;

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

void gs_shm_host_key(char *buf, size_t cap, const char *tag) {
  char boot[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  size_t len = (size_t)snprintf(buf, cap, "%s", boot);
  /* not the mount namespace: an emulated host's ranks each have one of
   * their own, and the segment is reached through /proc/<pid>/fd of the
   * shared PID namespace (a rank that cannot open it votes no) */
  static const char *ns[] = {"net", "ipc", "pid"};
  for (size_t i = 0; i < sizeof ns / sizeof *ns && len < cap; i++) {
    char p[32];
    struct stat st;
    snprintf(p, sizeof p, "/proc/self/ns/%s", ns[i]);
    unsigned long long ino = stat(p, &st) == 0 ? (unsigned long long)st.st_ino : 0;
    len += (size_t)snprintf(buf + len, cap - len, ":%llx", ino);
  }
  if (tag && *tag && len < cap) snprintf(buf + len, cap - len, ":%s", tag);
}

bool gs_shm_may_use(const gs_comm *r) {
  return r->o.world > 1 && r->o.k->device == GS_DEV_CPU && !gs_dtype_lp(r->o.wire) &&
         !(getenv("GS_SHM") && !strcmp(getenv("GS_SHM"), "0"));
}

static int map(gs_comm *r, gs_shm *s, int fd, int N, gs_err *e) {
  s->base = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (s->base == MAP_FAILED) {
    s->base = NULL;
    return GS_FAIL(e, GS_EIO, "rank %d: mapping shared memory %s (%zu bytes): %s", r->o.rank,
                   s->name, s->bytes, strerror(errno));
  }
  s->h = s->base;
  s->ranks = (rank_line *)((char *)s->base + sizeof(head));
  s->slots = (char *)s->base + head_bytes(N);
  return GS_OK;
}

void gs_shm_close(gs_shm *s) {
  if (!s) return;
  if (s->base) munmap(s->base, s->bytes);
  if (s->fd >= 0) close(s->fd);
  free(s);
}

int gs_shm_create(gs_comm *r, int N, size_t chunk, size_t whole, gs_shm **out,
                  char spec[GS_SHM_SPEC_MAX], gs_err *e) {
  *out = NULL;
  spec[0] = '\0';
  gs_shm *s = calloc(1, sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for shared memory", r->o.rank);
  s->chunk = gs_comm_env_size("GS_SHM_CHUNK", chunk);
  if (s->chunk > ((size_t)1 << 30)) s->chunk = (size_t)1 << 30;
  size_t most = r->o.max_count * gs_comm_es(r); /* no round is larger */
  if (s->chunk > most) s->chunk = most;
  s->chunk = (s->chunk + LINE - 1) & ~(size_t)(LINE - 1);
  if (s->chunk < LINE) s->chunk = LINE;
  if (!segment_bytes(N, s->chunk, &s->bytes)) {
    size_t c = s->chunk;
    free(s);
    return GS_FAIL(e, GS_EINVAL, "rank %d: shared memory for %d ranks of %zu bytes each does "
                   "not fit in memory", r->o.rank, N, c);
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
    rc = GS_FAIL(e, GS_EIO, "rank %d: sizing shared memory to %zu bytes: %s", r->o.rank,
                 s->bytes, strerror(errno));
  if (rc == GS_OK) rc = map(r, s, fd, N, e);
  if (rc < 0) {
    gs_shm_close(s);
    return rc;
  }
  s->whole = gs_comm_env_size("GS_SHM_WHOLE", whole);
  gs_shm_header_write(s->base, N, nonce, s->chunk, s->whole);
  snprintf(spec, GS_SHM_SPEC_MAX, "%s:%016" PRIx64, s->name, nonce);
  *out = s;
  return GS_OK;
}

bool gs_shm_attach(gs_comm *r, int N, const char *spec, gs_shm **out, char *why, size_t cap) {
  *out = NULL;
  gs_shm *s = calloc(1, sizeof *s);
  if (!s) return snprintf(why, cap, "out of memory"), false;
  s->fd = -1;
  const char *colon = strrchr(spec, ':');
  size_t nl = colon ? (size_t)(colon - spec) : 0;
  if (!colon || nl >= sizeof s->name) {
    free(s);
    return snprintf(why, cap, "no shared memory was named"), false;
  }
  memcpy(s->name, spec, nl);
  uint64_t nonce = strtoull(colon + 1, NULL, 16);
  /* only a descriptor of the creator's, never another file it might name */
  int pid, dfd, end = 0;
  if (sscanf(s->name, "/proc/%d/fd/%d%n", &pid, &dfd, &end) != 2 || s->name[end] != '\0') {
    snprintf(why, cap, "'%s' was named, not a descriptor under /proc", s->name);
    free(s);
    return false;
  }
  int fd = open(s->name, O_RDWR | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size < (off_t)head_bytes(N)) {
    snprintf(why, cap, "opening %s: %s", s->name, fd < 0 ? strerror(errno) : "too small");
    if (fd >= 0) close(fd);
    free(s);
    return false;
  }
  s->bytes = (size_t)sb.st_size;
  gs_err e;
  int rc = map(r, s, fd, N, &e);
  close(fd);
  if (rc < 0 || !gs_shm_header_check(s->base, s->bytes, N, nonce, &s->chunk, &s->whole)) {
    snprintf(why, cap, "%s is not this job's", s->name);
    gs_shm_close(s);
    return false;
  }
  *out = s;
  return true;
}

void gs_shm_join(gs_comm *r, gs_shm *s, int me, int N, const int *global) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  s->N = N;
  s->me = me;
  s->global = global;
  s->yield = cores > 0 && r->o.local_ranks > cores;
  s->spin = (double)gs_comm_env_size("GS_SHM_SPIN_US", DEFAULT_SHM_SPIN_US) * 1e-6;
  atomic_store(&s->ranks[me].pid, (int32_t)getpid());
}

static void mapped(gs_shm *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  s->on = true;
}

static int vote(gs_comm *r, bool ok, bool *all, gs_err *e) {
  union { float f; double d; int32_t i; } v;
  if (r->o.wire == GS_F64) v.d = ok;
  else if (r->o.wire == GS_I32) v.i = ok;
  else v.f = ok;
  /* over recursive doubling's mesh, which the table prepares wherever it
   * prepares shm or hier (a collective of one element runs there under
   * auto and shm) */
  int rc = gs_comm_run(r, gs_algo_parse("rd"), GS_REDOP_MIN, &v, &v, 1, 0, 0, NULL, e);
  if (rc < 0) return rc;
  *all = r->o.wire == GS_F64 ? v.d > 0 : r->o.wire == GS_I32 ? v.i > 0 : v.f > 0;
  return GS_OK;
}

int gs_shm_settle(gs_comm *r, gs_shm **m, bool ok, const char *why, bool want, const char *algo,
                  const char *whose, const char *fallback, gs_err *e) {
  bool all = false;
  GS_TRY(vote(r, ok, &all, e));
  if (all) {
    mapped(*m);
    return GS_OK;
  }
  gs_shm_close(*m);
  *m = NULL;
  if (want)
    return GS_FAIL(e, GS_EINVAL, "rank %d: --algo %s: not every rank could map %s shared "
                   "memory%s%s%s; use --algo %s", r->o.rank, algo, whose,
                   why[0] ? " (here: " : "", why, why[0] ? ")" : "", fallback);
  if (why[0]) fprintf(stderr, "rank %d: no shared memory (%s): the all-reduce uses sockets\n",
                      r->o.rank, why);
  return GS_OK;
}

char *gs_shm_next_set(gs_shm *s) {
  return s->slots + (size_t)(s->rounds++ & 1) * (size_t)s->N * s->chunk;
}

static int ring_rank(const gs_shm *s, int i) { return s->global ? s->global[i] : i; }

void gs_shm_tell(gs_shm *s, const char *msg) {
  if (!s || !s->on || s->told) return;
  s->told = true;
  snprintf(s->ranks[s->me].why, sizeof s->ranks[s->me].why, "%s", msg ? msg : "");
  uint32_t none = 0; /* the first rank to stop is the one named */
  atomic_compare_exchange_strong(&s->h->abort_by, &none, (uint32_t)s->me + 1);
  syscall(SYS_futex, &s->h->arrived, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void gs_shm_interrupt(gs_shm *s) {
  if (s) atomic_store(&s->stop, 1);
}

/* What the rounds are, for errors. */
static int wait_error(gs_comm *r, gs_shm *s, uint32_t target, int code, const char *what,
                      gs_err *e) {
  uint32_t by = atomic_load(&s->h->abort_by);
  if (by) { /* its reason, terminated here whatever the object holds */
    char why[sizeof s->ranks[0].why + 1] = "";
    if (by <= (uint32_t)s->N) memcpy(why, s->ranks[by - 1].why, sizeof why - 1);
    why[sizeof why - 1] = 0;
    int who = by <= (uint32_t)s->N ? ring_rank(s, (int)by - 1) : (int)by - 1;
    return GS_FAIL(e, GS_EPEER, "rank %d: rank %d stopped the shared-memory all-reduce (bucket "
                   "%d, step %" PRId64 "): %s", r->o.rank, who, r->cur_bucket, r->cur_step,
                   why);
  }
  char late[256] = "";
  size_t len = 0;
  for (int i = 0; i < s->N && len < sizeof late - 16; i++)
    if ((int32_t)(atomic_load(&s->ranks[i].reached) - target) < 0)
      len += (size_t)snprintf(late + len, sizeof late - len, "%s%d", len ? ", " : "",
                              ring_rank(s, i));
  return GS_FAIL(e, code, "rank %d: shared-memory all-reduce of bucket %d, step %" PRId64
                 ": rank(s) %s %s", r->o.rank, r->cur_bucket, r->cur_step, late, what);
}

/* 1: every rank reached the barrier whose arrivals end at target; -1:
 * a rank gave up (wait_error says who and why); 0: not yet. */
static int reached(const gs_shm *s, uint32_t target) {
  if (atomic_load(&s->h->abort_by)) return -1;
  return (int32_t)(atomic_load(&s->h->arrived) - target) >= 0;
}

int gs_shm_barrier(gs_comm *r, gs_shm *s, gs_err *e) {
  const uint32_t N = (uint32_t)s->N;
  const uint32_t b = ++s->barriers;
  const uint32_t target = b * N;
  atomic_store(&s->ranks[s->me].reached, b);
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
      snprintf(what, sizeof what, "did not arrive within %d ms (the job's --timeout)",
               r->o.timeout_ms);
      rc = wait_error(r, s, b, GS_ETIMEOUT, what, e);
      break;
    }
    if (now > next_check) { /* a rank whose process is gone never arrives */
      next_check = now + 0.1;
      for (uint32_t i = 0; i < N; i++) {
        int32_t pid = atomic_load(&s->ranks[i].pid);
        if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
          rc = GS_FAIL(e, GS_EPEER, "rank %d: rank %d (pid %d) exited during the shared-memory "
                       "all-reduce of bucket %d, step %" PRId64, r->o.rank,
                       ring_rank(s, (int)i), (int)pid, r->cur_bucket, r->cur_step);
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

/* blocks small enough to stay in the first-level cache across the N - 1
 * adds */
void gs_shm_sum(gs_comm *r, const gs_shm *s, char *set, size_t off, size_t n, void *dst) {
  const size_t es = gs_comm_es(r), blk = 4096 / es;
  for (size_t b = 0; b < n; b += blk) {
    size_t m = n - b < blk ? n - b : blk;
    char *out = (char *)dst + b * es;
    const size_t at = (off + b) * es;
    if (out != set + at) memcpy(out, set + at, m * es);
    for (int i = 1; i < s->N; i++) gs_comm_combine(r, m, out, set + (size_t)i * s->chunk + at);
  }
}
