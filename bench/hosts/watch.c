/* watch.c: a host's link watched from inside. The first rank of each
 * emulated host (or a ps server on a host of its own) reads its host's eth0
 * counters, so that they cover exactly the measured steps: a thread reads
 * them every period and turns them into busy time (gs_hostlink_acc), the
 * same accounting as the cluster's own sampler (links.c). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/hosts/hosts_internal.h"

struct gs_hostlink_watch {
  int fd;                   /* /proc/self/net/dev */
  double period;
  gs_hostlink_acc acc;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
};

/* with mu held */
static void sample(gs_hostlink_watch *w) {
  uint64_t tx, rx;
  if (gs_netdev_read_eth0(w->fd, &rx, &tx) == 0) gs_hostlink_acc_update(&w->acc, gs_now(), tx, rx);
}

static void *watcher(void *arg) {
  gs_hostlink_watch *w = arg;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    sample(w);
    gs_hosts_wait_period(&w->cv, &w->mu, w->period, &w->stop);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static int watch_start(const char *netdev, uint64_t rate_bps, double period_s,
                       gs_hostlink_watch **out, gs_err *e) {
  *out = NULL;
  gs_hostlink_watch *w = calloc(1, sizeof *w);
  if (!w) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  uint64_t tx, rx;
  w->period = period_s;
  w->fd = open(netdev, O_RDONLY | O_CLOEXEC);
  if (w->fd < 0 || gs_netdev_read_eth0(w->fd, &rx, &tx) < 0) {
    if (w->fd >= 0) close(w->fd);
    free(w);
    return GS_FAIL(e, GS_EIO, "cannot read a host's link counters (eth0 in %s): is it an "
                   "emulated host?", netdev);
  }
  gs_hostlink_acc_start(&w->acc, rate_bps, gs_now(), tx, rx);
  pthread_mutex_init(&w->mu, NULL);
  gs_hosts_cond_init(&w->cv);
  int rc = pthread_create(&w->thread, NULL, watcher, w);
  if (rc != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    close(w->fd);
    free(w);
    return GS_FAIL(e, GS_EIO, "cannot start the link watcher: %s", strerror(rc));
  }
  *out = w;
  return GS_OK;
}

int gs_hostlink_watch_start(uint64_t rate_bps, double period_s, gs_hostlink_watch **out,
                            gs_err *e) {
  return watch_start("/proc/self/net/dev", rate_bps, period_s, out, e);
}

int gs_hostlink_watch_start_pid(int pid, uint64_t rate_bps, double period_s,
                                gs_hostlink_watch **out, gs_err *e) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/net/dev", pid);
  return watch_start(path, rate_bps, period_s, out, e);
}

void gs_hostlink_watch_read(gs_hostlink_watch *w, gs_hostlink_stat *out) {
  pthread_mutex_lock(&w->mu);
  sample(w);
  *out = w->acc.last;
  pthread_mutex_unlock(&w->mu);
}

void gs_hostlink_watch_stop(gs_hostlink_watch *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  close(w->fd);
  free(w);
}
