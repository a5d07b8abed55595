/* test_base.c: base/base.h, the part below every other, called directly.
 *
 *  - errors: GS_FAIL fills the record (code, message, file:line) and
 *    returns the code; the first error wins; a NULL record is allowed;
 *    gs_err_prefix puts context in front, and cuts at the record's size;
 *    gs_err_clear empties it; GS_TRY passes a failing code up unchanged and
 *    goes on after a success; every code has its own words;
 *  - clocks: gs_now never goes back and measures a sleep, gs_wall is the
 *    epoch's seconds;
 *  - the hash: the same bytes give the same bits on every machine (a
 *    value pinned here), hashing in pieces is hashing the whole, order
 *    counts;
 *  - gs_read_line: a line, a line cut at cap - 1, end of file, a deadline
 *    that passes, the interrupt flag;
 *  - gs_alloc: 64-byte aligned and zeroed at every size, and a size no
 *    machine has is an error in the record, not a crash. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "tests/check.h"

#if defined(__SANITIZE_ADDRESS__)
/* ASan aborts on an allocation it cannot serve unless told to return NULL,
 * as the C library does: the out-of-memory check needs that. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

static int fails(gs_err *e) { return GS_FAIL(e, GS_EPEER, "rank 1: peer gone"); }
static int succeeds(gs_err *e) { return 0; }

static int tries(int (*call)(gs_err *), gs_err *e, int *reached) {
  *reached = 0;
  GS_TRY(call(e));
  *reached = 1;
  return 0;
}

static void errors(void) {
  gs_err e = {0};
  int line = __LINE__ + 1;
  int rc = GS_FAIL(&e, GS_EIO, "rank %d, peer %d, %s", 2, 3, "send");
  CHECK(rc == GS_EIO && e.code == GS_EIO, "GS_FAIL returned %d, recorded %d", rc, e.code);
  CHECK(!strcmp(e.msg, "rank 2, peer 3, send"), "message '%s'", e.msg);
  CHECK(e.file && strstr(e.file, "test_base.c") && e.line == line, "at %s:%d, not line %d",
        e.file ? e.file : "(null)", e.line, line);
  rc = GS_FAIL(&e, GS_ETIMEOUT, "a consequence");
  CHECK(rc == GS_ETIMEOUT && e.code == GS_EIO && !strcmp(e.msg, "rank 2, peer 3, send") &&
            e.line == line, "a second GS_FAIL replaced the first: %d '%s'", e.code, e.msg);
  CHECK(GS_FAIL(NULL, GS_EINVAL, "nobody listens") == GS_EINVAL);

  gs_err_prefix(&e, "step %d: ", 14);
  CHECK(!strcmp(e.msg, "step 14: rank 2, peer 3, send") && e.code == GS_EIO, "prefixed: '%s'",
        e.msg);
  gs_err_prefix(NULL, "nothing %d", 1);
  gs_err full = {0};
  memset(full.msg, 'x', sizeof full.msg - 1);
  full.code = GS_EPROTO;
  gs_err_prefix(&full, "rank 0: ");
  CHECK(strlen(full.msg) == sizeof full.msg - 1 && !strncmp(full.msg, "rank 0: xxx", 11),
        "prefix on a full record: %zu bytes, '%.16s...'", strlen(full.msg), full.msg);
  gs_err_clear(&e);
  CHECK(e.code == 0 && e.msg[0] == 0 && !e.file && e.line == 0, "cleared: %d '%s'", e.code,
        e.msg);
  gs_err_clear(NULL);

  int reached = -1;
  rc = tries(fails, &e, &reached);
  CHECK(rc == GS_EPEER && !reached && e.code == GS_EPEER, "GS_TRY on a failure: %d, went on %d",
        rc, reached);
  gs_err_clear(&e);
  rc = tries(succeeds, &e, &reached);
  CHECK(rc == 0 && reached == 1 && e.code == 0, "GS_TRY on a success: %d, went on %d", rc,
        reached);

  const int codes[] = {GS_OK,    GS_EINVAL, GS_EIO,    GS_ETIMEOUT, GS_EPROTO,
                       GS_ENOMEM, GS_EPEER,  GS_EDEVICE, GS_EINTR,   GS_EMISMATCH};
  const int n = (int)(sizeof codes / sizeof codes[0]);
  const char *unknown = gs_strerror(-1000);
  CHECK(unknown && *unknown);
  for (int i = 0; i < n; i++) {
    const char *w = gs_strerror(codes[i]);
    CHECK(w && *w && strcmp(w, unknown), "code %d: '%s'", codes[i], w ? w : "(null)");
    for (int j = 0; j < i; j++)
      CHECK(strcmp(w, gs_strerror(codes[j])), "codes %d and %d share the words '%s'", codes[i],
            codes[j], w);
  }
}

static void clocks(void) {
  double prev = gs_now();
  for (int i = 0; i < 100000; i++) {
    double t = gs_now();
    if (t < prev) {
      CHECK(t >= prev, "gs_now went back from %.9f to %.9f", prev, t);
      break;
    }
    prev = t;
  }
  double t0 = gs_now();
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  double took = gs_now() - t0;
  CHECK(took >= 0.05 && took < 5, "a 50 ms sleep measured %.4f s", took);
  double wall = gs_wall(), epoch = (double)time(NULL);
  CHECK(fabs(wall - epoch) < 2, "gs_wall %.3f, time() %.0f", wall, epoch);
}

static void hash(void) {
  const char *s = "gradsync";
  uint64_t h = gs_hash_bytes(GS_HASH_INIT, s, 8);
  /* FNV-1a's step from GS_HASH_INIT, computed outside this program: the
   * ranks' agreement checks and the apply log compare these across
   * processes and machines */
  CHECK(h == 0x3636c5db799a9ad8ull, "hash of \"gradsync\": %016llx", (unsigned long long)h);
  CHECK(gs_hash_bytes(GS_HASH_INIT, s, 0) == GS_HASH_INIT, "no bytes change the hash");
  CHECK(gs_hash_bytes(gs_hash_bytes(GS_HASH_INIT, s, 3), s + 3, 5) == h,
        "hashing in pieces differs from the whole");
  CHECK(gs_hash_bytes(GS_HASH_INIT, "ab", 2) != gs_hash_bytes(GS_HASH_INIT, "ba", 2),
        "the order of the bytes does not count");
}

static void read_line(void) {
  int fd[2];
  REQUIRE(pipe(fd) == 0, "pipe: %s", strerror(errno));
  const char *in = "first\nsecond and longer\ntail";
  REQUIRE(write(fd[1], in, strlen(in)) == (ssize_t)strlen(in));
  char buf[64];
  int rc = gs_read_line(fd[0], gs_now() + 5, buf, sizeof buf);
  CHECK(rc == 1 && !strcmp(buf, "first"), "first line: %d '%s'", rc, rc == 1 ? buf : "");
  rc = gs_read_line(fd[0], gs_now() + 5, buf, 7);
  CHECK(rc == 1 && !strcmp(buf, "second"), "a line cut at cap - 1: %d '%s'", rc,
        rc == 1 ? buf : "");
  /* the unfinished "tail": no line until the deadline */
  double t0 = gs_now();
  rc = gs_read_line(fd[0], t0 + 0.2, buf, sizeof buf);
  double took = gs_now() - t0;
  CHECK(rc == -1 && took >= 0.2 && took < 3, "a passed deadline: %d after %.3f s", rc, took);
  gs_interrupted = 1;
  t0 = gs_now();
  rc = gs_read_line(fd[0], t0 + 5, buf, sizeof buf);
  gs_interrupted = 0;
  CHECK(rc == -1 && gs_now() - t0 < 1, "with the interrupt flag set: %d", rc);
  close(fd[1]);
  rc = gs_read_line(fd[0], gs_now() + 5, buf, sizeof buf);
  CHECK(rc == 0, "end of file: %d", rc);
  close(fd[0]);
  /* a last line without its '\n', then end of file: 0, and the text kept */
  REQUIRE(pipe(fd) == 0, "pipe: %s", strerror(errno));
  REQUIRE(write(fd[1], "last", 4) == 4);
  close(fd[1]);
  memset(buf, 'x', sizeof buf);
  rc = gs_read_line(fd[0], gs_now() + 5, buf, sizeof buf);
  CHECK(rc == 0 && !strcmp(buf, "last"), "a last line at end of file: %d '%.8s'", rc, buf);
  close(fd[0]);
}

static void alloc(void) {
  const size_t sizes[] = {0, 1, 63, 64, 65, 4096, (1u << 20) + 3};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    gs_err e = {0};
    unsigned char *p = gs_alloc(sizes[i], &e);
    REQUIRE(p, "gs_alloc(%zu): %s", sizes[i], e.msg);
    CHECK((uintptr_t)p % 64 == 0, "gs_alloc(%zu) at %p", sizes[i], (void *)p);
    size_t nonzero = 0;
    for (size_t j = 0; j < sizes[i]; j++) nonzero += p[j] != 0;
    CHECK(nonzero == 0, "gs_alloc(%zu): %zu bytes not zero", sizes[i], nonzero);
    memset(p, 0xa5, sizes[i]);
    gs_free(p);
  }
  gs_free(NULL);
  gs_err e = {0};
  void *p = gs_alloc(SIZE_MAX / 2, &e);
  CHECK(!p && e.code == GS_ENOMEM && strstr(e.msg, "out of memory"),
        "gs_alloc(SIZE_MAX / 2): %p, %d '%s'", p, e.code, e.msg);
  gs_free(p);
  /* a size that rounding up to 64 bytes would wrap to 0 */
  e = (gs_err){0};
  p = gs_alloc(SIZE_MAX - 31, &e);
  CHECK(!p && e.code == GS_ENOMEM, "gs_alloc(SIZE_MAX - 31): %p, %d '%s'", p, e.code, e.msg);
  gs_free(p);
}

int main(void) {
  errors();
  clocks();
  hash();
  read_line();
  alloc();
  return check_done("test_base");
}
