/* cpu_quota.c: each emulated host's share of the machine's processors: a cgroup
 * per host whose CFS quota caps everything spawned on it at a number of
 * cores, as Mininet's CPULimitedHost does (hosts.h, gs_hosts_cfg.host_cpus).
 *
 * Why: without it the hosts share the machine's cores freely, so a host
 * whose ranks sit waiting lends its core to a busy one. A straggler then
 * borrows the idle cores of the ranks that wait on it, and a scheme that
 * stops waiting (backup workers, asynchrony) keeps every rank busy and
 * finds the cores full: neither is what a cluster of machines does.
 *
 * Both cgroup versions: v2 (cpu.max, the cpu controller enabled below the
 * unified hierarchy's root) and v1 (the cpu hierarchy's cfs files). The
 * groups are <root>/gradsync-<pid>-<n>/h<h>; destroy removes them, and
 * groups whose maker died (its pid gone) are swept when a cluster is made.
 * A spawned process joins its host's group itself, before exec, so that
 * everything it runs or forks is counted from its first instruction. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/hosts/hosts_internal.h"

/* A short period spreads the throttling over every step: with the kernel's
 * 100 ms a 20 ms step could run at full speed and then stall for most of
 * the period. The quota's floor is the kernel's 1 ms. */
#define PERIOD_US 10000
#define MIN_QUOTA_US 1000
#define PREFIX "gradsync-"
#define RMDIR_WAIT_S 3.0   /* killed processes leave their group as they exit */

static atomic_int seq;

static int has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)); p += n)
    if ((p == list || p[-1] == ' ' || p[-1] == ',') &&
        (p[n] == '\0' || p[n] == ' ' || p[n] == '\n' || p[n] == ','))
      return 1;
  return 0;
}

static int read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = '\0';
  return 0;
}

static int put(const char *dir, const char *file, const char *text, gs_err *e) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : write(fd, text, strlen(text));
  int err = errno;
  if (fd >= 0) close(fd);
  if (n != (ssize_t)strlen(text))
    return GS_FAIL(e, GS_EIO, "emulated hosts: cannot write '%s' to %s: %s (a cap on the "
                   "hosts' CPU needs the cgroup cpu controller, writable as root)", text, path,
                   strerror(err));
  return GS_OK;
}

/* The hierarchy that holds the cpu controller: its mount point, and
 * whether it is the unified (v2) one. */
static int find_hierarchy(char *root, size_t cap, int *v2, gs_err *e) {
  FILE *f = setmntent("/proc/self/mounts", "r");
  if (!f) return GS_FAIL(e, GS_EIO, "emulated hosts: cannot read /proc/self/mounts: %s",
                         strerror(errno));
  int found = 0;
  struct mntent *m;
  while (!found && (m = getmntent(f))) {
    if (strcmp(m->mnt_type, "cgroup") == 0 && hasmntopt(m, "cpu")) {
      *v2 = 0;
      found = 1;
    } else if (strcmp(m->mnt_type, "cgroup2") == 0) {
      char path[512], ctl[512];
      snprintf(path, sizeof path, "%s/cgroup.controllers", m->mnt_dir);
      if (read_small(path, ctl, sizeof ctl) == 0 && has_word(ctl, "cpu")) {
        *v2 = 1;
        found = 1;
      }
    }
    if (found) snprintf(root, cap, "%s", m->mnt_dir);
  }
  endmntent(f);
  if (!found)
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: a cap on the hosts' CPU needs the cgroup cpu "
                   "controller, and no cgroup hierarchy mounted here has it: mount cgroup2 "
                   "(or cgroup v1's cpu hierarchy) on /sys/fs/cgroup, or run without --host-cpus");
  return GS_OK;
}

static void remove_group(const char *group) {
  DIR *d = opendir(group);
  if (d) {
    struct dirent *x;
    while ((x = readdir(d)))
      if (x->d_name[0] == 'h' && x->d_type == DT_DIR) {
        char path[1024];
        if (snprintf(path, sizeof path, "%s/%s", group, x->d_name) < (int)sizeof path)
          rmdir(path);
      }
    closedir(d);
  }
  rmdir(group);
}

/* Groups of makers that are gone: their processes went with them (a
 * cluster dies with its maker), so only the directories are left. */
static void sweep(const char *root) {
  DIR *d = opendir(root);
  if (!d) return;
  struct dirent *x;
  while ((x = readdir(d))) {
    int pid, n;
    if (sscanf(x->d_name, PREFIX "%d-%d", &pid, &n) != 2 || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    char group[600];
    if (snprintf(group, sizeof group, "%s/%s", root, x->d_name) < (int)sizeof group)
      remove_group(group);
  }
  closedir(d);
}

int gs_hosts_cpus_check(double cores, gs_err *e) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (!(cores >= (double)MIN_QUOTA_US / PERIOD_US))
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: %g cores per host: give a number of cores "
                   "from 0.1 up (0.5 is half a core)", cores);
  if (online > 0 && cores > (double)online)
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: %g cores per host asked, but this machine "
                   "has %ld: give at most %ld (a cap above the machine caps nothing)", cores,
                   online, online);
  return GS_OK;
}

/* cores has passed gs_hosts_cpus_check (check_cfg, before the build) */
int gs_hosts_cpu_open(gs_hosts *c, double cores, gs_err *e) {
  char root[256];
  int v2 = 0;
  GS_TRY(find_hierarchy(root, sizeof root, &v2, e));
  sweep(root);
  if (v2) GS_TRY(put(root, "cgroup.subtree_control", "+cpu", e));
  snprintf(c->cgroup, sizeof c->cgroup, "%s/" PREFIX "%d-%d", root, (int)getpid(),
           atomic_fetch_add(&seq, 1));
  if (mkdir(c->cgroup, 0755) < 0) {
    int err = errno;
    c->cgroup[0] = '\0';
    return GS_FAIL(e, GS_EIO, "emulated hosts: cannot make the cgroup %s/" PREFIX "...: %s (a "
                   "cap on the hosts' CPU needs the cgroup cpu controller writable: run as root, "
                   "where /sys/fs/cgroup is not mounted read-only)", root, strerror(err));
  }
  if (v2) GS_TRY(put(c->cgroup, "cgroup.subtree_control", "+cpu", e));
  long quota = (long)(cores * PERIOD_US + 0.5);
  for (int h = 0; h < c->k; h++) {
    char dir[600], text[64];
    snprintf(dir, sizeof dir, "%s/h%d", c->cgroup, h);
    if (mkdir(dir, 0755) < 0)
      return GS_FAIL(e, GS_EIO, "emulated hosts: cannot make the cgroup %s: %s", dir,
                     strerror(errno));
    if (v2) {
      snprintf(text, sizeof text, "%ld %d", quota, PERIOD_US);
      GS_TRY(put(dir, "cpu.max", text, e));
    } else {
      snprintf(text, sizeof text, "%d", PERIOD_US);
      GS_TRY(put(dir, "cpu.cfs_period_us", text, e));
      snprintf(text, sizeof text, "%ld", quota);
      GS_TRY(put(dir, "cpu.cfs_quota_us", text, e));
    }
    char procs[640];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    if ((c->host[h].cgfd = open(procs, O_WRONLY | O_CLOEXEC)) < 0)
      return GS_FAIL(e, GS_EIO, "emulated hosts: cannot open %s: %s", procs, strerror(errno));
  }
  c->host_cpus = cores;
  return GS_OK;
}

void gs_hosts_cpu_close(gs_hosts *c) {
  for (int h = 0; h < c->k; h++)
    if (c->host[h].cgfd >= 0) {
      close(c->host[h].cgfd);
      c->host[h].cgfd = -1;
    }
  if (!c->cgroup[0]) return;
  /* the cluster's processes were killed; the kernel takes each out of its
   * group as it exits, so a group can be busy for a moment longer */
  double deadline = gs_now() + RMDIR_WAIT_S;
  struct stat st;
  while (remove_group(c->cgroup), stat(c->cgroup, &st) == 0 && gs_now() < deadline)
    usleep(2000);
  c->cgroup[0] = '\0';
}

int gs_hosts_cpu_join(const gs_hosts *c, int h) {
  int fd = c->host[h].cgfd;
  if (fd < 0) return 0;
  /* "0": the writer itself (both versions); async-signal-safe */
  return write(fd, "0", 1) == 1 ? 0 : -1;
}
