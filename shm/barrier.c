/* barrier.c: the members' waits (shm_internal.h), and a member's reason
 * for stopping.
 *
 * Barriers count arrivals in one shared word: spin briefly (yielding the
 * core when ranks outnumber cores), then sleep on the word with futex.
 * Every wait ends: at the member's timeout (naming the ranks that did not
 * arrive), when a member's process is gone, or when a failing member
 * writes its reason into the segment (gs_shm_tell), which every waiter
 * reports. The first barrier every member passed proves that each mapped
 * the segment: the creator's descriptor goes then, if it has not. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm/shm_internal.h"

void gs_shm_tell(gs_shm *s, const char *msg) {
  if (!s || !s->joined || s->told) return;
  s->told = true;
  snprintf(s->members[s->me].why, sizeof s->members[s->me].why, "%s", msg ? msg : "");
  uint32_t none = 0; /* the first rank to stop is the one named */
  atomic_compare_exchange_strong(&s->h->abort_by, &none, (uint32_t)s->me + 1);
  syscall(SYS_futex, &s->h->arrived, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void gs_shm_interrupt(gs_shm *s) {
  if (s) atomic_store(&s->stop, 1);
}

/* What the rounds are, for errors. */
static int wait_error(gs_shm *s, uint32_t target, int code, const char *what, gs_err *e) {
  uint32_t by = atomic_load(&s->h->abort_by);
  if (by) { /* its reason, terminated here whatever the object holds */
    char why[sizeof s->members[0].why + 1] = "";
    if (by <= (uint32_t)s->N) memcpy(why, s->members[by - 1].why, sizeof why - 1);
    why[sizeof why - 1] = 0;
    int who = by <= (uint32_t)s->N ? gs_shm_rank_of(s, (int)by - 1) : (int)by - 1;
    return GS_FAIL(e, GS_EPEER, "rank %d: rank %d stopped the shared-memory all-reduce (bucket "
                   "%d, step %" PRId64 "): %s", s->c.rank, who, s->bucket, s->step, why);
  }
  char late[256] = "";
  size_t len = 0;
  for (int i = 0; i < s->N && len < sizeof late - 16; i++)
    if ((int32_t)(atomic_load(&s->members[i].reached) - target) < 0)
      len += (size_t)snprintf(late + len, sizeof late - len, "%s%d", len ? ", " : "",
                              gs_shm_rank_of(s, i));
  return GS_FAIL(e, code, "rank %d: shared-memory all-reduce of bucket %d, step %" PRId64
                 ": rank(s) %s %s", s->c.rank, s->bucket, s->step, late, what);
}

/* 1: every rank reached the barrier whose arrivals end at target; -1:
 * a rank gave up (wait_error says who and why); 0: not yet. */
static int reached(const gs_shm *s, uint32_t target) {
  if (atomic_load(&s->h->abort_by)) return -1;
  return (int32_t)(atomic_load(&s->h->arrived) - target) >= 0;
}

/* Member i's process, or -1 when every member's is there. */
static int gone(const gs_shm *s) {
  for (int i = 0; i < s->N; i++) {
    int32_t pid = atomic_load(&s->members[i].pid);
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) return i;
  }
  return -1;
}

/* Sleep on the word until target, a reason, the timeout, an interrupt, or
 * a member's process gone. */
static int sleep_until(gs_shm *s, uint32_t b, uint32_t target, double t0, gs_err *e) {
  const double deadline = t0 + s->c.timeout_ms * 1e-3;
  atomic_fetch_add(&s->h->sleepers, 1);
  int rc = GS_OK;
  double next_check = gs_now() + 0.1;
  for (;;) {
    /* before the test: the futex sleeps only if it is unchanged */
    uint32_t v = atomic_load(&s->h->arrived);
    int got = reached(s, target);
    if (got) {
      if (got < 0) rc = wait_error(s, b, GS_EPEER, "", e);
      break;
    }
    if (gs_interrupted || atomic_load(&s->stop)) {
      rc = GS_FAIL(e, GS_EINTR, "rank %d: interrupted in the shared-memory all-reduce of bucket "
                   "%d, step %" PRId64, s->c.rank, s->bucket, s->step);
      break;
    }
    double now = gs_now();
    if (now > deadline) {
      char what[96];
      snprintf(what, sizeof what, "did not arrive within %d ms (the job's --timeout)",
               s->c.timeout_ms);
      rc = wait_error(s, b, GS_ETIMEOUT, what, e);
      break;
    }
    if (now > next_check) { /* a rank whose process is gone never arrives */
      next_check = now + 0.1;
      int i = gone(s);
      if (i >= 0) {
        rc = GS_FAIL(e, GS_EPEER, "rank %d: rank %d (pid %d) exited during the shared-memory "
                     "all-reduce of bucket %d, step %" PRId64, s->c.rank, gs_shm_rank_of(s, i),
                     (int)atomic_load(&s->members[i].pid), s->bucket, s->step);
        break;
      }
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    syscall(SYS_futex, &s->h->arrived, FUTEX_WAIT, v, &ts, NULL, 0);
  }
  atomic_fetch_sub(&s->h->sleepers, 1);
  return rc;
}

static int wait_all(gs_shm *s, gs_err *e) {
  const uint32_t N = (uint32_t)s->N;
  const uint32_t b = ++s->barriers;
  const uint32_t target = b * N;
  atomic_store(&s->members[s->me].reached, b);
  uint32_t v = atomic_fetch_add(&s->h->arrived, 1) + 1;
  if (v == target) {
    if (atomic_load(&s->h->sleepers))
      syscall(SYS_futex, &s->h->arrived, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    /* the last to arrive, after the others gave up */
    return atomic_load(&s->h->abort_by) ? wait_error(s, b, GS_EPEER, "", e) : GS_OK;
  }
  const double t0 = gs_now(), spin = s->spin;
  for (unsigned i = 0;; i++) {
    int got = reached(s, target);
    if (got) return got > 0 ? GS_OK : wait_error(s, b, GS_EPEER, "", e);
    if ((i & 63) == 0 && gs_now() - t0 > spin) break;
    if (s->yield) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else __builtin_ia32_pause();
#endif
  }
  return sleep_until(s, b, target, t0, e);
}

int gs_shm_barrier(gs_shm *s, gs_err *e) {
  int rc = wait_all(s, e);
  if (rc == GS_OK && s->fd >= 0) gs_shm_mapped(s); /* every member is here: it mapped it */
  return rc;
}
