/* test_group.c: the shm part on its own (shm/shm.h), as the
 * host-aggregated ps uses it: members are forked processes with a plain
 * configuration and no communicator; member 0 creates the segment and the
 * others attach by the spec it hands them (here through a shared page, as
 * the ps does through its endpoint). Members are ranks 100.. of the job, so
 * every message must name those numbers.
 *
 *   test_group sums      3 members: fp32 sums of 1 to 70001 elements with
 *                        slots of 4 KiB (rounds; one wait, two, and two
 *                        with a change of each member's part between
 *                        them), fp64 sums and int32 max: the bits of the
 *                        member-order result on every member, src untouched
 *                        out of place; the creator holds its descriptor
 *                        until the first wait every member passed, then
 *                        none does
 *   test_group absent    member 2 never attaches (as a rank that cannot):
 *                        the others' first all-reduce ends at their timeout,
 *                        naming rank 102
 *   test_group told      member 1 tells its reason: the others end with it,
 *                        naming rank 101
 *   test_group exited    member 1's process exits after it joined: the
 *                        others end long before their timeout, naming rank
 *                        101 and its pid
 *   test_group attach    what attach refuses: no spec, a file that is not a
 *                        descriptor under /proc, a descriptor that is not
 *                        open, another job's nonce, another group's size */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/shm.h"
#include "tests/check.h"

#define MAXW 4
#define MAXN 70001u

/* what the members share outside the segment: the spec, and each one's
 * verdict */
typedef struct page {
  char spec[GS_SHM_SPEC_MAX];
  volatile int ready;
  int joined, ended;          /* members that joined, that ended their wait
                                 (fault cases) */
  int code[MAXW];
  double secs[MAXW];
  char msg[MAXW][1024];
} page;

static page *P;
static gs_kernels *K;
static const int RANKS[MAXW] = {100, 101, 102, 103};

/* this process's descriptors of a segment (memfd "gradsync-shm") */
static int open_segments(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent *de; d && (de = readdir(d));) {
    char p[300], to[256];
    snprintf(p, sizeof p, "/proc/self/fd/%s", de->d_name);
    ssize_t len = readlink(p, to, sizeof to - 1);
    if (len > 0) {
      to[len] = '\0';
      n += strstr(to, "memfd:gradsync-shm") != NULL;
    }
  }
  if (d) closedir(d);
  return n;
}

/* member me of N in the gen-th group: made or attached, and joined (NULL:
 * it could not) */
static gs_shm *member(int me, int N, int gen, int timeout_ms, gs_dtype t, gs_err *e) {
  gs_shm *s = NULL;
  if (me == 0) {
    char spec[GS_SHM_SPEC_MAX];
    if (gs_shm_create(RANKS[0], N, MAXN * 8, GS_SHM_CHUNK_DEFAULT, GS_SHM_WHOLE_DEFAULT, &s,
                      spec, e) < 0 || !s)
      return NULL;
    memcpy(P->spec, spec, sizeof spec);
    __atomic_store_n(&P->ready, gen, __ATOMIC_RELEASE);
  } else {
    while (__atomic_load_n(&P->ready, __ATOMIC_ACQUIRE) != gen) usleep(1000);
    char why[256] = "";
    if (!gs_shm_attach(N, P->spec, &s, why, sizeof why)) {
      GS_FAIL(e, GS_EIO, "attach: %s", why);
      return NULL;
    }
  }
  gs_shm_cfg c = {.me = me, .size = N, .rank = RANKS[me], .ranks = RANKS,
                  .timeout_ms = timeout_ms, .k = K, .dtype = t, .local_ranks = N};
  gs_shm_join(s, &c);
  return s;
}

static float val(int member, size_t i, int salt) {
  uint32_t x = (uint32_t)member * 7919u + (uint32_t)i * 104729u + (uint32_t)salt * 15485863u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return (float)(x % 20001u) / 7.0f - 1428.0f;
}

/* each member's part, changed between the sum and the copy out */
static int add_one(void *ctx, void *part, size_t n, gs_err *e) {
  (void)e;
  float *x = part;
  for (size_t i = 0; i < n; i++) x[i] += 1.0f;
  *(size_t *)ctx += n;
  return GS_OK;
}

static int body_sums(int me, int N) {
  gs_err e = {0};
  setenv("GS_SHM_CHUNK", "4K", 1); /* the creator's: rounds of 1024 floats */
  gs_shm *s = member(me, N, 1, 20000, GS_F32, &e);
  if (!s) return fprintf(stderr, "member %d: %s\n", me, e.msg), 1;
  int bad = 0;
  if (open_segments() != (me == 0)) {
    fprintf(stderr, "member %d holds %d descriptors of the segment before the first wait\n", me,
            open_segments());
    bad++;
  }
  static float src[MAXN], dst[MAXN];
  const size_t lens[] = {1, 3, 1000, 1024, 5000, MAXN};
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
    for (int how = 0; how < 3; how++) { /* in place, out of place, with the part changed */
      size_t n = lens[li], parted = 0;
      int salt = (int)li * 3 + how;
      for (size_t i = 0; i < n; i++) src[i] = val(me, i, salt);
      float *out = how == 0 ? src : dst;
      gs_shm_run run = {.op = GS_REDOP_SUM, .step = salt, .bucket = 0,
                        .part = how == 2 ? add_one : NULL, .ctx = &parted};
      if (gs_shm_allreduce(s, &run, src, out, n, &e) < 0)
        return fprintf(stderr, "member %d: %s\n", me, e.msg), 1;
      size_t wrong = 0;
      for (size_t i = 0; i < n; i++) {
        float want = val(0, i, salt);
        for (int q = 1; q < N; q++) want += val(q, i, salt);
        if (how == 2) want += 1.0f;
        if (memcmp(&out[i], &want, sizeof want)) wrong++;
        if (how && src[i] != val(me, i, salt)) wrong++;
      }
      size_t mine = 0; /* this member's parts, round by round (1024 floats) */
      for (size_t off = 0; off < n; off += 1024) {
        size_t po, pl;
        gs_part_range(n - off < 1024 ? n - off : 1024, N, me, &po, &pl);
        mine += pl;
      }
      /* copied in: all of it, but for its own parts when the rounds are
       * split without a change (over the 64 KiB of one wait) */
      size_t sent = n * sizeof(float);
      if (how != 2 && sent > GS_SHM_WHOLE_DEFAULT) sent -= mine * sizeof(float);
      if (how != 2) mine = 0;
      if (wrong || parted != mine || run.sent != sent) {
        fprintf(stderr, "member %d, %zu floats, case %d: %zu wrong, %zu parted, %llu sent\n",
                me, n, how, wrong, parted, (unsigned long long)run.sent);
        bad++;
      }
    }
  if (open_segments()) {
    fprintf(stderr, "member %d holds a descriptor of the segment after every member waited\n",
            me);
    bad++;
  }
  gs_shm_close(s);
  /* fp64 sums and int32 max, in the creator's default slots */
  unsetenv("GS_SHM_CHUNK");
  for (int t = 0; t < 2 && !bad; t++) {
    gs_dtype dt = t == 0 ? GS_F64 : GS_I32;
    s = member(me, N, 2 + t, 20000, dt, &e);
    if (!s) return fprintf(stderr, "member %d: %s\n", me, e.msg), 1;
    static double d[MAXN];
    static int32_t v[MAXN];
    for (size_t i = 0; i < MAXN; i++) {
      d[i] = (double)val(me, i, 77) / 3.0;
      v[i] = (int32_t)(i % 1000) - me * 5000;
    }
    gs_shm_run run = {.op = t == 0 ? GS_REDOP_SUM : GS_REDOP_MAX, .step = 1};
    if (gs_shm_allreduce(s, &run, t == 0 ? (void *)d : (void *)v, t == 0 ? (void *)d : (void *)v,
                         MAXN, &e) < 0)
      return fprintf(stderr, "member %d: %s\n", me, e.msg), 1;
    for (size_t i = 0; i < MAXN; i++) {
      double want = (double)val(0, i, 77) / 3.0;
      for (int q = 1; q < N; q++) want += (double)val(q, i, 77) / 3.0;
      if (t == 0 ? d[i] != want : v[i] != (int32_t)(i % 1000)) {
        fprintf(stderr, "member %d: %s [%zu] differs\n", me, t == 0 ? "fp64 sum" : "int32 max",
                i);
        bad++;
        break;
      }
    }
    gs_shm_close(s);
  }
  return bad;
}

/* member fail (2: never attaches; 1: tells, or exits) */
static int body_fault(int me, int N, int fail, const char *how) {
  gs_err e = {0};
  if (me == fail && !strcmp(how, "absent")) return 0;
  gs_shm *s = member(me, N, 1, 1500, GS_F32, &e);
  if (!s) return fprintf(stderr, "member %d: %s\n", me, e.msg), 1;
  /* every member that will has attached before one fails (a creator that
   * leaves takes its descriptor with it) */
  __atomic_add_fetch(&P->joined, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&P->joined, __ATOMIC_ACQUIRE) < N - !strcmp(how, "absent"))
    usleep(1000);
  if (me == fail && !strcmp(how, "told")) {
    gs_shm_tell(s, "member 1 gives up, as the test says");
    gs_shm_close(s);
    return 0;
  }
  if (me == fail) _exit(0); /* exited: its pid is in the segment */
  float buf[64] = {0};
  gs_shm_run run = {.op = GS_REDOP_SUM, .step = 7, .bucket = 3};
  double t0 = gs_now();
  int rc = gs_shm_allreduce(s, &run, buf, buf, 64, &e);
  P->code[me] = rc;
  P->secs[me] = gs_now() - t0;
  snprintf(P->msg[me], sizeof P->msg[me], "%s", e.msg);
  /* no one leaves before every other survivor has ended its wait: a
   * process gone would be another one to name */
  __atomic_add_fetch(&P->ended, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&P->ended, __ATOMIC_ACQUIRE) < N - 1) usleep(1000);
  gs_shm_close(s);
  return 0;
}

/* N forked members running what; 0 when every one returned 0 */
static int run(int N, const char *what) {
  memset(P, 0, sizeof *P);
  pid_t pid[MAXW];
  for (int m = 0; m < N; m++) {
    pid[m] = fork();
    if (pid[m] == 0) {
      alarm(60);
      int r = !strcmp(what, "sums") ? body_sums(m, N)
              : body_fault(m, N, !strcmp(what, "absent") ? 2 : 1, what);
      _exit(r);
    }
  }
  /* reaped as they end: a member's process that is gone must be gone
   * (not a zombie) for the others to see it */
  int bad = 0;
  for (int m = 0; m < N; m++) {
    int st = 0;
    pid_t p = waitpid(-1, &st, 0);
    bad += p < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  (void)pid;
  return bad;
}

static void attach_refusals(void) {
  gs_err e = {0};
  gs_shm *s = NULL, *a = NULL;
  char spec[GS_SHM_SPEC_MAX], why[256], bad[GS_SHM_SPEC_MAX + 32];
  REQUIRE(gs_shm_create(0, 3, 4096, 1024, 0, &s, spec, &e) == 0 && s, "create: %s", e.msg);
  CHECK(gs_shm_attach(3, spec, &a, why, sizeof why) && a, "rank 0's own spec refused: %s", why);
  gs_shm_close(a);
  const char *colon = strrchr(spec, ':');
  REQUIRE(colon, "a spec without its nonce: %s", spec);
  struct {
    const char *spec, *words;
    int members;
  } cases[] = {
    {"", "no shared memory was named", 3},
    {"/etc/passwd:0123", "not a descriptor under /proc", 3},
    {"/proc/1/fd/1/../../environ:0123", "not a descriptor under /proc", 3},
    {NULL, "opening", 3},            /* a descriptor not open */
    {NULL, "is not this job's", 3},  /* another nonce */
    {spec, "is not this job's", 2},  /* made for 3 members, not 2 */
  };
  char closed[GS_SHM_SPEC_MAX + 32], other[GS_SHM_SPEC_MAX + 32];
  snprintf(closed, sizeof closed, "/proc/%d/fd/999999%s", (int)getpid(), colon);
  snprintf(other, sizeof other, "%.*s:%016llx", (int)(colon - spec), spec,
           strtoull(colon + 1, NULL, 16) ^ 1);
  cases[3].spec = closed;
  cases[4].spec = other;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(bad, sizeof bad, "%s", cases[i].spec);
    why[0] = '\0';
    a = NULL;
    bool ok = gs_shm_attach(cases[i].members, bad, &a, why, sizeof why);
    CHECK(!ok && !a && strstr(why, cases[i].words), "attach '%s' (%d members): %s, '%s'", bad,
          cases[i].members, ok ? "accepted" : "refused", why);
    gs_shm_close(a);
  }
  gs_shm_close(s);
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "sums";
  signal(SIGPIPE, SIG_IGN);
  if (!strcmp(what, "attach")) {
    attach_refusals();
    return check_done(what);
  }
  gs_err e = {0};
  K = gs_kernels_cpu(1, &e);
  REQUIRE(K, "kernels: %s", e.msg);
  P = mmap(NULL, sizeof *P, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(P != MAP_FAILED, "a shared page");
  if (!strcmp(what, "sums")) {
    CHECK(run(3, "sums") == 0, "sums: a member failed");
  } else {
    CHECK(run(3, what) == 0, "%s: a member crashed", what);
    int fail = !strcmp(what, "absent") ? 2 : 1;
    char words[160];
    if (!strcmp(what, "absent"))
      snprintf(words, sizeof words, "rank(s) 102 did not arrive within 1500 ms");
    else if (!strcmp(what, "told"))
      snprintf(words, sizeof words, "rank 101 stopped the shared-memory all-reduce (bucket 3, "
               "step 7): member 1 gives up, as the test says");
    else snprintf(words, sizeof words, "rank 101 (pid ");
    for (int m = 0; m < 3; m++) {
      if (m == fail) continue;
      printf("member %d (%.2f s): %s\n", m, P->secs[m], P->msg[m]);
      char mine[16];
      snprintf(mine, sizeof mine, "rank %d: ", RANKS[m]);
      CHECK(P->code[m] == (!strcmp(what, "absent") ? GS_ETIMEOUT : GS_EPEER) &&
            strstr(P->msg[m], words) && !strncmp(P->msg[m], mine, strlen(mine)),
            "member %d: code %d, '%s' (wanted '%s')", m, P->code[m], P->msg[m], words);
      CHECK(!strcmp(what, "absent") ? P->secs[m] >= 1.4 && P->secs[m] < 5.0 : P->secs[m] < 1.0,
            "member %d ended after %.2f s on a 1.5 s timeout", m, P->secs[m]);
    }
  }
  K->destroy(K);
  return check_done(what);
}
