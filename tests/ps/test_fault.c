/* test_fault.c: dead, stalled and aborting ranks stop the job within the
 * timeout, with the culprit named, and nothing hangs.
 *
 * Ranks are processes; one SIGKILLs itself in the middle of a run. The
 * others must exit non-zero within the timeout (2 s here; workers wait a
 * quarter and a second longer than the server) plus scheduling slack, and their errors
 * must name the dead rank, or the dead server when rank 0 is the one that
 * died. A rank that gives up (close(ok=false)) stops the others at once. */
#include <dirent.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ps_harness.h"

/* Processes of this test's process group other than this one: a
 * dedicated server that outlived rank 0 would be one. */
static int leftovers(void) {
  DIR *d = opendir("/proc");
  REQUIRE(d, "opendir /proc");
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    int pid = atoi(de->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *rp = strrchr(buf, ')');
    char state;
    int ppid, pgrp;
    if (rp && sscanf(rp + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == getpgrp() &&
        state != 'Z')
      n++;
  }
  closedir(d);
  return n;
}

#define TIMEOUT_MS 2000
#define SLACK_S 2.0

static void expect(const job_opts *o, job_result *r, int dead, const char *needle,
                   double limit_s, const char *what) {
  for (int i = 0; i < o->world; i++) {
    if (i == dead) continue;
    REQUIRE(r->rc[i] != 0 && r->rc[i] > -1000, "%s: rank %d: rc %d (must fail, not hang)", what,
          i, r->rc[i]);
    REQUIRE(strstr(r->err[i], needle), "%s: rank %d's error does not say '%s': %s", what, i,
          needle, r->err[i]);
    double dt = r->fail_t[i] - r->kill_t;
    REQUIRE(r->kill_t > 0 && dt >= 0 && dt < limit_s, "%s: rank %d failed %.2f s after the fault "
          "(limit %.2f)", what, i, dt, limit_s);
    printf("  %s: rank %d stopped after %.2f s: %s\n", what, i, dt, r->err[i]);
  }
}

int main(void) {
  setpgid(0, 0);  /* our own group, to find leftover processes */
  job_opts o;
  double limit = TIMEOUT_MS / 1000.0 * 1.25 + 1.0 + SLACK_S;

  /* A worker dies before pushing a step (in-process server). */
  job_defaults(&o);
  o.world = 4;
  o.steps = 6;
  o.timeout_ms = TIMEOUT_MS;
  o.kill_rank = 2;
  o.kill_step = 2;
  o.kill_bucket = 0;
  job_result *r = result_new(&o);
  REQUIRE(run_procs(&o, r) != 0, "the job survived a dead rank");
  REQUIRE(r->rc[2] <= -2000, "rank 2 was meant to die of SIGKILL: %d", r->rc[2]);
  expect(&o, r, 2, "rank 2 sent no gradients for step 2 bucket 0", limit, "killed worker");
  for (int i = 0; i < o.world; i++)
    REQUIRE(r->steps_done[i] == 2, "rank %d completed %d steps", i, r->steps_done[i]);
  result_free(r);
  printf("ok: a killed worker is named by every other rank\n");

  /* A worker dies in the middle of a step, with overlap (some buckets of
   * the step pushed), dedicated server. */
  job_defaults(&o);
  o.world = 3;
  o.steps = 5;
  o.timeout_ms = TIMEOUT_MS;
  o.overlap = true;
  o.dedicated = true;
  o.kill_rank = 1;
  o.kill_step = 1;
  o.kill_bucket = 2;
  r = result_new(&o);
  REQUIRE(run_procs(&o, r) != 0, "the job survived a dead rank");
  expect(&o, r, 1, "rank 1 sent no gradients for step 1 bucket 2", limit, "killed mid-step");
  result_free(r);
  printf("ok: a worker killed mid-step (dedicated server) is named with its bucket\n");

  /* Rank 0 dies, and the server with it: the others notice within the
   * timeout and say the server is gone. */
  for (int ded = 0; ded <= 1; ded++) {
    job_defaults(&o);
    o.world = 3;
    o.steps = 5;
    o.timeout_ms = TIMEOUT_MS;
    o.dedicated = ded;
    o.kill_rank = 0;
    o.kill_step = 2;
    o.kill_bucket = 0;
    r = result_new(&o);
    REQUIRE(run_procs(&o, r) != 0, "the job survived a dead rank 0");
    expect(&o, r, 0, ded ? "the server (rank 0's dedicated process) died or stalled"
                         : "the server (rank 0) died or stalled", limit,
           ded ? "rank 0 + dedicated server killed" : "rank 0 + server killed");
    result_free(r);
    int left = 0;
    for (int i = 0; i < 50 && (left = leftovers()) > 0; i++) {
      struct timespec ts = {0, 20000000};
      nanosleep(&ts, NULL);
    }
    REQUIRE(left == 0, "%d processes outlived the job (a dedicated server left behind?)", left);
  }
  printf("ok: a vanished server is reported by every worker within the timeout\n");

  /* World 1: the dedicated server is idle when rank 0 dies; nothing but
   * PR_SET_PDEATHSIG ends it. */
  job_defaults(&o);
  o.world = 1;
  o.dedicated = true;
  o.kill_rank = 0;
  o.kill_step = 1;
  o.kill_bucket = 0;
  r = result_new(&o);
  REQUIRE(run_procs(&o, r) != 0 && r->rc[0] <= -2000, "rank 0 did not die");
  result_free(r);
  int left = 0;
  for (int i = 0; i < 100 && (left = leftovers()) > 0; i++) {
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  REQUIRE(left == 0, "%d processes outlived rank 0 (the dedicated server?)", left);
  printf("ok: the dedicated server dies with rank 0\n");

  /* A rank gives up: the others stop at once (well before the timeout). */
  job_defaults(&o);
  o.world = 3;
  o.steps = 5;
  o.timeout_ms = 20000;
  o.abort_rank = 1;
  o.abort_step = 3;
  r = result_new(&o);
  REQUIRE(run_threads(&o, r) != 0, "the job survived an abort");
  expect(&o, r, 1, "rank 1 aborted in step 3", 2.0, "abort");
  result_free(r);
  printf("ok: close(ok=false) stops every rank at once, naming the rank\n");
  return 0;
}
