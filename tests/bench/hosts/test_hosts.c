/* test_hosts: bench/hosts/hosts.h called directly.
 *   test_hosts parse   rate parsing and bad configurations (no root needed)
 *   test_hosts api     spawn (namespace, environment, a missing program),
 *                      info and link bounds, the sampler's misuse, and a
 *                      destroy that must end a spawned process nobody
 *                      reaped; skips (77) without CAP_NET_ADMIN and
 *                      CAP_SYS_ADMIN, with the module's own words
 *   test_hosts cpu     a cap on the hosts' CPU (cpu.c): a busy loop on a
 *                      host capped at 0.25 cores is in its cgroup and gets
 *                      no more than that share, a group left by a dead
 *                      maker is swept, and destroy removes the groups;
 *                      skips (77) without the capabilities or the cgroup
 *                      cpu controller */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/hosts/hosts.h"
#include "tests/check.h"

static void parse(void) {
  static const struct {
    const char *s;
    uint64_t bps;
  } good[] = {{"100mbit", 100000000}, {"1gbit", 1000000000}, {"2.5Gbit", 2500000000},
              {"64kbit", 64000},      {"8000", 8000},         {"1tbit", 1000000000000}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    uint64_t v = 0;
    gs_err e = {0};
    int rc = gs_hosts_parse_rate(good[i].s, &v, &e);
    CHECK(rc == 0 && v == good[i].bps, "'%s' is %llu bit/s (got %llu, rc %d)", good[i].s,
          (unsigned long long)good[i].bps, (unsigned long long)v, rc);
  }
  const char *bad[] = {"", "fast", "100mb", "-1gbit", "0", "1gbitx", "nanmbit", "1e30gbit"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 0;
    gs_err e = {0};
    int rc = gs_hosts_parse_rate(bad[i], &v, &e);
    CHECK(rc == GS_EINVAL && strstr(e.msg, bad[i]) && strstr(e.msg, "mbit"),
          "'%s' is refused with a hint: %s", bad[i], e.msg);
  }
  uint64_t b1, l1, b2, l2;
  gs_hosts_tbf(100000000, &b1, &l1);
  gs_hosts_tbf(1000000000, &b2, &l2);
  CHECK(b1 >= 70000 && b2 >= b1 && l1 > b1 && l2 > b2 && l2 > l1,
        "tbf buckets hold a whole GSO packet and queues grow with the rate (%llu/%llu, "
        "%llu/%llu)", (unsigned long long)b1, (unsigned long long)l1, (unsigned long long)b2,
        (unsigned long long)l2);
  struct {
    gs_hosts_cfg cfg;
    const char *word;
  } cfgs[] = {{{.hosts = 0, .rate_bps = 1000000}, "hosts"},
              {{.hosts = GS_HOSTS_MAX + 1, .rate_bps = 1000000}, "hosts"},
              {{.hosts = 2, .rate_bps = 10}, "rate"},
              {{.hosts = 2, .rate_bps = 1000000, .delay_s = -1}, "delay"},
              {{.hosts = 2, .rate_bps = 1000000, .host_cpus = 0.05}, "0.1 up"},
              {{.hosts = 2, .rate_bps = 1000000, .host_cpus = -1}, "0.1 up"},
              {{.hosts = 2, .rate_bps = 1000000, .host_cpus = NAN}, "0.1 up"},
              {{.hosts = 2, .rate_bps = 1000000, .host_cpus = 100000}, "give at most"}};
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    static char sentinel;
    gs_hosts *c = (gs_hosts *)&sentinel;  /* create must reset it to NULL */
    gs_err e = {0};
    int rc = gs_hosts_create(&cfgs[i].cfg, &c, &e);
    CHECK(rc == GS_EINVAL && !c && strstr(e.msg, cfgs[i].word),
          "a bad configuration is refused, naming its %s: %s", cfgs[i].word, e.msg);
  }
}

/* Run argv on host h and return its exit status (-1 if it did not start). */
static int run_on(gs_hosts *c, int h, char *const argv[], char *const envp[], gs_err *e) {
  pid_t pid;
  if (gs_hosts_spawn(c, h, argv, envp, &pid, e) < 0) return -1;
  int st;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void api(void) {
  gs_hosts_cfg cfg = {.hosts = 2, .rate_bps = 100000000};
  gs_hosts *c = NULL;
  gs_err e = {0};
  if (gs_hosts_create(&cfg, &c, &e) < 0) {
    if (strstr(e.msg, "lacks CAP_")) {
      printf("SKIP: %s\n", e.msg);
      exit(77);
    }
    printf("FAIL: cannot build 2 hosts: %s\n", e.msg);
    check_failures++;
    return;
  }
  gs_host_info in[2], sw, none;
  gs_hosts_info(c, 0, &in[0]);
  gs_hosts_info(c, 1, &in[1]);
  CHECK(gs_hosts_info(c, GS_HOSTS_SWITCH, &sw) == 0 && !strcmp(sw.ifname, "sw0") && !*sw.addr,
        "the switch is described: %s, %s", sw.ifname, sw.netns);
  CHECK(gs_hosts_info(c, 2, &none) == GS_EINVAL && gs_hosts_info(c, -2, &none) == GS_EINVAL,
        "hosts outside 0..K-1 are refused by info");
  gs_hostlink_stat st;
  gs_err e2 = {0};
  CHECK(gs_hosts_link(c, 2, &st, &e2) == GS_EINVAL && strstr(e2.msg, "host 2"),
        "and by link: %s", e2.msg);

  for (int h = 0; h < 2; h++) {
    char script[256], ino[32];
    snprintf(ino, sizeof ino, "%llu", (unsigned long long)in[h].netns_ino);
    snprintf(script, sizeof script,
             "[ \"$(stat -Lc %%i /proc/self/ns/net)\" = \"$INO\" ] && [ \"$GREETING\" = hi ] && "
             "grep -q ' eth0:' /proc/self/net/dev && ! grep -q ' port' /proc/self/net/dev");
    char inoenv[64];
    snprintf(inoenv, sizeof inoenv, "INO=%s", ino);
    char *argv[] = {"sh", "-c", script, NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", "GREETING=hi", inoenv, NULL};
    gs_err e3 = {0};
    int rc = run_on(c, h, argv, envp, &e3);
    CHECK(rc == 0, "a process spawned on host %d runs in its namespace (%s) with the given "
          "environment, sees eth0 and no switch port (status %d %s)", h, ino, rc, e3.msg);
  }

  char *missing[] = {"/nonexistent/gs-program", NULL};
  pid_t pid = 0;
  gs_err e4 = {0};
  int rc = gs_hosts_spawn(c, 0, missing, NULL, &pid, &e4);
  CHECK(rc == GS_EIO && pid == -1 && strstr(e4.msg, "/nonexistent/gs-program") &&
        strstr(e4.msg, "host 0") && strstr(e4.msg, "No such file"),
        "a program that cannot start is reported: %s", e4.msg);
  gs_err e5 = {0};
  CHECK(gs_hosts_spawn(c, 5, missing, NULL, &pid, &e5) == GS_EINVAL && strstr(e5.msg, "host 5"),
        "spawning on a host that does not exist is refused: %s", e5.msg);

  gs_err e6 = {0};
  CHECK(gs_hosts_sample_start(c, 0, &e6) == GS_EINVAL, "a zero sampling period is refused: %s",
        e6.msg);
  gs_err e7 = {0};
  CHECK(gs_hosts_sample_start(c, 0.002, &e7) == 0 && gs_hosts_sample_start(c, 0.002, &e7) ==
        GS_EINVAL, "a second sampler is refused: %s", e7.msg);
  gs_hosts_sample_stop(c);
  gs_hosts_sample_stop(c);

  /* a process left running and unreaped: destroy must end it, promptly */
  char *sleeper[] = {"sleep", "30", NULL};
  pid_t sl = -1;
  gs_err e8 = {0};
  gs_hosts_spawn(c, 1, sleeper, NULL, &sl, &e8);
  CHECK(sl > 0 && kill(sl, 0) == 0, "a sleeper runs on host 1 (pid %d)", (int)sl);
  gs_hosts_sample_start(c, 0.002, &e8);
  double t = gs_now();
  gs_hosts_destroy(c);
  double took = gs_now() - t;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%d", (int)sl);
  struct stat sb;
  CHECK(took < 2 && stat(proc, &sb) != 0 && waitpid(sl, NULL, WNOHANG) < 0 && errno == ECHILD,
        "destroy (sampler running) ended and reaped it in %.3f s", took);
}

/* A pid that is nobody's: a child of ours that has exited and been reaped. */
static pid_t dead_pid(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, NULL, 0);
  return p;
}

static int in_file(const char *path, pid_t pid) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int v, found = 0;
  while (fscanf(f, "%d", &v) == 1) found |= v == (int)pid;
  fclose(f);
  return found;
}

static void cpu(void) {
  gs_hosts_cfg cfg = {.hosts = 2, .rate_bps = 100000000, .host_cpus = 0.25};
  gs_hosts *c = NULL;
  gs_err e = {0};
  if (gs_hosts_create(&cfg, &c, &e) < 0) {
    if (strstr(e.msg, "lacks CAP_") || strstr(e.msg, "cpu controller")) {
      printf("SKIP: %s\n", e.msg);
      exit(77);
    }
    printf("FAIL: cannot build 2 hosts capped at 0.25 cores: %s\n", e.msg);
    check_failures++;
    return;
  }
  gs_host_info in;
  gs_hosts_info(c, 1, &in);
  /* the paths below are cut from it */
  REQUIRE(in.cpus == 0.25 && in.cgroup[0] && strstr(in.cgroup, "/h1"),
        "host 1 reports its cap and its cgroup: %g cores, %s", in.cpus, in.cgroup);
  /* the cluster's group, and beside it one whose maker is gone */
  char group[400], root[400], stale[480], stale_h[500];
  snprintf(group, sizeof group, "%.*s", (int)(strrchr(in.cgroup, '/') - in.cgroup), in.cgroup);
  snprintf(root, sizeof root, "%.*s", (int)(strrchr(group, '/') - group), group);
  snprintf(stale, sizeof stale, "%s/gradsync-%d-0", root, (int)dead_pid());
  snprintf(stale_h, sizeof stale_h, "%s/h0", stale);
  CHECK(mkdir(stale, 0755) == 0 && mkdir(stale_h, 0755) == 0, "a stale group %s is made (%s)",
        stale, strerror(errno));

  char *burn[] = {"sh", "-c", "while :; do :; done", NULL};
  pid_t pid = -1;
  CHECK_OK(gs_hosts_spawn(c, 1, burn, NULL, &pid, &e), &e);
  double t0 = gs_now();
  usleep(300000);
  char procs[420];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", in.cgroup);
  CHECK(pid > 0 && in_file(procs, pid), "the busy loop (pid %d) is in host 1's group %s",
        (int)pid, procs);
  usleep(1200000);
  if (pid > 0) kill(pid, SIGKILL);
  struct rusage ru;
  int st;
  double wall = gs_now() - t0;
  CHECK(pid > 0 && wait4(pid, &st, 0, &ru) == pid, "the busy loop is reaped");
  double used = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  /* uncapped it would use a whole core whenever one is free */
  CHECK(used <= 0.25 * wall * 1.3 + 0.02, "a busy loop on a host of 0.25 cores used %.3f s of "
        "CPU in %.3f s (at most 0.25 x that, with 30%% for the quota's periods)", used, wall);

  /* a second cluster sweeps the group of the dead maker */
  gs_hosts *c2 = NULL;
  CHECK_OK(gs_hosts_create(&cfg, &c2, &e), &e);
  struct stat sb;
  CHECK(stat(stale, &sb) != 0 && errno == ENOENT, "the stale group %s was swept", stale);
  gs_host_info in2;
  gs_hosts_info(c2, 0, &in2);
  CHECK(strcmp(in2.cgroup, in.cgroup) != 0 && stat(group, &sb) == 0,
        "a second cluster of this process has groups of its own (%s), the first keeps its (%s)",
        in2.cgroup, group);
  char group2[400];
  snprintf(group2, sizeof group2, "%.*s", (int)(strrchr(in2.cgroup, '/') - in2.cgroup),
           in2.cgroup);
  gs_hosts_destroy(c2);
  gs_hosts_destroy(c);
  CHECK(stat(group, &sb) != 0 && stat(group2, &sb) != 0,
        "destroy removed both clusters' groups (%s, %s)", group, group2);
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "parse") && strcmp(argv[1], "api") &&
                    strcmp(argv[1], "cpu"))) {
    fprintf(stderr, "usage: test_hosts parse|api|cpu\n");
    return 2;
  }
  if (!strcmp(argv[1], "parse")) {
    parse();
  } else if (!strcmp(argv[1], "api")) {
    api();
  } else {
    cpu();
  }
  return check_done("test_hosts");
}
