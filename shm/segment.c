/* segment.c: the segment's life (shm.h): the header, the host key, create
 * (the group's first member: an anonymous memfd segment, named to the
 * others by the path of its descriptor under /proc/<pid>/fd and a nonce),
 * attach (another member: only such a path, only a segment whose header
 * carries the nonce and adds up to its size), join, and close. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/shm_internal.h"

#define SHM_MAGIC 0x67737368u /* "gssh" */
/* Poll this long before sleeping on a barrier. A rank that yields the core
 * while it polls costs the others little, and a futex wake-up costs a
 * sleeping rank its turn on a shared core. */
#define DEFAULT_SHM_SPIN_US 1000
#define LINE GS_SHM_LINE

static size_t head_bytes(int N) {
  size_t b = sizeof(shm_head) + (size_t)N * sizeof(shm_member);
  return (b + 4095) & ~(size_t)4095;
}

bool gs_shm_segment_bytes(int N, uint64_t chunk, size_t *out) {
  size_t slots;
  return !__builtin_mul_overflow((size_t)2 * (size_t)N, chunk, &slots) &&
         !__builtin_add_overflow(head_bytes(N), slots, out);
}

void gs_shm_header_write(void *seg, int members, uint64_t nonce, uint64_t chunk,
                         uint64_t whole) {
  shm_head *h = seg;
  h->magic = SHM_MAGIC;
  h->world = (uint32_t)members;
  h->nonce = nonce;
  h->chunk = chunk;
  h->whole = whole;
}

size_t gs_shm_header_bytes(int members) { return head_bytes(members); }

bool gs_shm_header_check(const void *seg, size_t bytes, int members, uint64_t nonce,
                         size_t *chunk, size_t *whole) {
  /* the header's fields, read once: what is checked is what is used, even
   * if someone writes the object meanwhile */
  shm_head snap;
  size_t want = 0;
  if (bytes < head_bytes(members)) return false;
  memcpy(&snap, seg, offsetof(shm_head, arrived));
  if (snap.magic != SHM_MAGIC || snap.nonce != nonce || snap.world != (uint32_t)members ||
      snap.chunk < LINE || snap.chunk % LINE || snap.chunk > ((uint64_t)1 << 30) ||
      !gs_shm_segment_bytes(members, snap.chunk, &want) || bytes != want)
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

bool gs_shm_disabled(void) {
  const char *v = getenv("GS_SHM");
  return v && !strcmp(v, "0");
}

static int map(gs_shm *s, int rank, int fd, int N, gs_err *e) {
  s->base = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (s->base == MAP_FAILED) {
    s->base = NULL;
    return GS_FAIL(e, GS_EIO, "rank %d: mapping shared memory %s (%zu bytes): %s", rank,
                   s->name, s->bytes, strerror(errno));
  }
  s->h = s->base;
  s->members = (shm_member *)((char *)s->base + sizeof(shm_head));
  s->slots = (char *)s->base + head_bytes(N);
  return GS_OK;
}

void gs_shm_close(gs_shm *s) {
  if (!s) return;
  if (s->base) munmap(s->base, s->bytes);
  if (s->fd >= 0) close(s->fd);
  free(s);
}

int gs_shm_create(int rank, int members, size_t max_bytes, size_t chunk, size_t whole,
                  gs_shm **out, char spec[GS_SHM_SPEC_MAX], gs_err *e) {
  *out = NULL;
  spec[0] = '\0';
  const int N = members;
  gs_shm *s = calloc(1, sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for shared memory", rank);
  s->chunk = gs_env_bytes("GS_SHM_CHUNK", chunk);
  if (s->chunk > ((size_t)1 << 30)) s->chunk = (size_t)1 << 30;
  if (s->chunk > max_bytes) s->chunk = max_bytes; /* no round is larger */
  s->chunk = (s->chunk + LINE - 1) & ~(size_t)(LINE - 1);
  if (s->chunk < LINE) s->chunk = LINE;
  if (!gs_shm_segment_bytes(N, s->chunk, &s->bytes)) {
    size_t c = s->chunk;
    free(s);
    return GS_FAIL(e, GS_EINVAL, "rank %d: shared memory for %d ranks of %zu bytes each does "
                   "not fit in memory", rank, N, c);
  }
  uint64_t nonce;
  randombytes_buf(&nonce, sizeof nonce);
  int fd = memfd_create("gradsync-shm", MFD_CLOEXEC);
  if (fd < 0) {
    /* no memfd here: its user goes on without it, or says it cannot */
    free(s);
    return GS_OK;
  }
  s->fd = fd;
  snprintf(s->name, sizeof s->name, "/proc/%d/fd/%d", (int)getpid(), fd);
  int rc = GS_OK;
  if (ftruncate(fd, (off_t)s->bytes) != 0)
    rc = GS_FAIL(e, GS_EIO, "rank %d: sizing shared memory to %zu bytes: %s", rank, s->bytes,
                 strerror(errno));
  if (rc == GS_OK) rc = map(s, rank, fd, N, e);
  if (rc < 0) {
    gs_shm_close(s);
    return rc;
  }
  s->whole = gs_env_bytes("GS_SHM_WHOLE", whole);
  gs_shm_header_write(s->base, N, nonce, s->chunk, s->whole);
  snprintf(spec, GS_SHM_SPEC_MAX, "%s:%016" PRIx64, s->name, nonce);
  *out = s;
  return GS_OK;
}

bool gs_shm_attach(int members, const char *spec, gs_shm **out, char *why, size_t cap) {
  *out = NULL;
  const int N = members;
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
  int rc = map(s, 0, fd, N, &e);
  close(fd);
  if (rc < 0 || !gs_shm_header_check(s->base, s->bytes, N, nonce, &s->chunk, &s->whole)) {
    snprintf(why, cap, "%s is not this job's", s->name);
    gs_shm_close(s);
    return false;
  }
  *out = s;
  return true;
}

void gs_shm_join(gs_shm *s, const gs_shm_cfg *c) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  s->c = *c;
  if (s->c.timeout_ms <= 0) s->c.timeout_ms = 30000;
  s->N = c->size;
  s->me = c->me;
  s->es = gs_dtype_size(c->dtype);
  s->yield = cores > 0 && c->local_ranks > cores;
  s->spin = (double)gs_env_bytes("GS_SHM_SPIN_US", DEFAULT_SHM_SPIN_US) * 1e-6;
  atomic_store(&s->members[c->me].pid, (int32_t)getpid());
  s->joined = true;
}

void gs_shm_mapped(gs_shm *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}
