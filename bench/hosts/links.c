/* links.c: the links of the emulated hosts: their tbf parameters, and
 * what they carried, read from the kernel's veth counters (never from a
 * program's own sums), with a sampler that turns counters into busy time.
 *
 * Counters come from /proc/<holder>/net/dev, the host namespace's view,
 * opened once per host and re-read from offset 0 (a seq_file starts over).
 *
 * Busy time: a shaped link is either sending at its rate or idle. So the
 * bytes the counters show are work for the link: each reading adds them,
 * divided by what a saturated link's counters show per second, to the
 * link's pending work, and the link is busy for as much of the interval
 * as it has work pending; the rest carries over. Counters move in lumps
 * (a GSO packet at a time, tbf's bucket at memory speed), so an interval
 * may show more than its length of work: carried over, it is counted when
 * the link really spent the time, and busy time never exceeds wall time.
 * A threshold ("busy when it moved 90% of its rate") would count a
 * half-used interval as all or nothing; this counts it half. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/hosts/hosts_internal.h"

/* tbf's bucket (burst) and queue (limit).
 *
 * Burst: 1 ms of the rate, and never under 96 KiB. Below ~70 KiB tbf can
 * no longer pass a whole GSO packet (veth hands it up to 64 KiB at once,
 * charged with every segment's headers: ~68 KiB) and splits each one,
 * which costs CPU and changes what the device counters see. Under ~1 ms
 * the link carries less than its rate on a busy machine: tbf's tokens are
 * refilled when an hrtimer or softirq gets to run, a few hundred
 * microseconds late at times, and tokens beyond the bucket are lost. A
 * larger bucket would only let each idle-to-busy transition pass more
 * bytes at memory speed (bytes a step-time model would see as free).
 *
 * Limit: the bucket plus 10 ms of the rate. A sender's TCP keeps about a
 * millisecond in its queue (TCP small queues), but the switch-side queue
 * of a host that several others send to at once (the ps master) gets all
 * of them: a short queue drops there, and TCP's backoff then leaves the
 * link idle part of the time. */
#define BURST_S 0.001
#define BURST_MIN (96 * 1024ull)
#define QUEUE_S 0.010

/* What a saturated link's counters show of its rate under bulk TCP: tbf
 * charges every segment's 66 bytes of Ethernet, IPv4 and TCP headers (with
 * timestamps, Linux's default), the counters see a GSO packet's headers
 * once, so they grow at (MSS / frame) of the rate, MTU 1500. */
#define COUNTED_FRACTION ((1500.0 - 52) / (1500.0 + 14))

double gs_hosts_counted_Bps(uint64_t rate_bps) { return (double)rate_bps / 8 * COUNTED_FRACTION; }

void gs_hosts_tbf(uint64_t rate_bps, uint64_t *burst_bytes, uint64_t *limit_bytes) {
  uint64_t burst = (uint64_t)((double)rate_bps / 8 * BURST_S);
  if (burst < BURST_MIN) burst = BURST_MIN;
  *burst_bytes = burst;
  *limit_bytes = burst + (uint64_t)((double)rate_bps / 8 * QUEUE_S);
}

int gs_hosts_parse_rate(const char *s, uint64_t *bps, gs_err *e) {
  static const struct {
    const char *unit;
    double scale;
  } units[] = {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}, {"", 1}};
  char *end = NULL;
  errno = 0;
  double v = s ? strtod(s, &end) : 0;
  if (s && end != s && errno == 0 && isfinite(v) && v > 0)
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (strcasecmp(end, units[i].unit) == 0 && v * units[i].scale < 1e15) {
        *bps = (uint64_t)llround(v * units[i].scale);
        return GS_OK;
      }
  return GS_FAIL(e, GS_EINVAL,
                 "link rate '%s' is not a rate: write a number with bit, kbit, mbit, gbit or tbit "
                 "(e.g. 100mbit, 1gbit)", s ? s : "");
}

/* eth0's rx and tx bytes in the text of a net/dev file */
static int eth0_of(const char *text, uint64_t *rx, uint64_t *tx) {
  for (const char *line = text; line && *line;
       line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    while (*line == ' ') line++;
    if (strncmp(line, "eth0:", 5) != 0) continue;
    if (sscanf(line + 5, "%" SCNu64 " %*u %*u %*u %*u %*u %*u %*u %" SCNu64, rx, tx) == 2)
      return 0;
  }
  return -1;
}

int gs_netdev_read_eth0(int fd, uint64_t *rx, uint64_t *tx) {
  char buf[8192];
  size_t len = 0;
  if (lseek(fd, 0, SEEK_SET) < 0) return -1;
  for (;;) {
    ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0 || (len += (size_t)r) == sizeof buf - 1) break;
  }
  buf[len] = '\0';
  return eth0_of(buf, rx, tx);
}

void gs_hostlink_acc_start(gs_hostlink_acc *a, uint64_t rate_bps, double now, uint64_t tx,
                           uint64_t rx) {
  memset(a, 0, sizeof *a);
  a->full_Bps = gs_hosts_counted_Bps(rate_bps);
  a->last = (gs_hostlink_stat){.t = now, .up_bytes = tx, .down_bytes = rx};
}

void gs_hostlink_acc_update(gs_hostlink_acc *a, double now, uint64_t tx, uint64_t rx) {
  gs_hostlink_stat *s = &a->last;
  double dt = now - s->t;
  if (dt < 0) dt = 0;
  a->up_work_s += (double)(tx - s->up_bytes) / a->full_Bps;
  a->down_work_s += (double)(rx - s->down_bytes) / a->full_Bps;
  double up = a->up_work_s < dt ? a->up_work_s : dt;
  double down = a->down_work_s < dt ? a->down_work_s : dt;
  a->up_work_s -= up;
  a->down_work_s -= down;
  s->up_busy_s += up;
  s->down_busy_s += down;
  /* busy at all: at least the busier direction's share of the interval
   * (exact when one direction covers the other, as a short interval's do) */
  s->any_busy_s += up > down ? up : down;
  s->up_bytes = tx;
  s->down_bytes = rx;
  s->t = now;
}

/* Bring host h's reading up to now; call with mu held. */
static int sample(gs_hosts *c, int h, double now) {
  uint64_t rx, tx;
  if (gs_netdev_read_eth0(c->host[h].devfd, &rx, &tx) < 0) return -1;
  gs_hostlink_acc_update(&c->host[h].acc, now, tx, rx);
  return 0;
}

void gs_hosts_links_init(gs_hosts *c) {
  pthread_mutex_init(&c->mu, NULL);
  gs_hosts_cond_init(&c->cv);
}

int gs_hosts_links_open(gs_hosts *c, gs_err *e) {
  for (int h = 0; h < c->k; h++) {
    gs_node *n = &c->host[h];
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/net/dev", (int)n->pid);
    n->devfd = open(path, O_RDONLY | O_CLOEXEC);
    uint64_t rx, tx;
    if (n->devfd < 0 || gs_netdev_read_eth0(n->devfd, &rx, &tx) < 0)
      return GS_FAIL(e, GS_EIO, "emulated hosts: cannot read host %d's link counters in %s",
                     h, path);
    gs_hostlink_acc_start(&n->acc, n->rate, gs_now(), tx, rx);
  }
  return GS_OK;
}

void gs_hosts_links_close(gs_hosts *c) {
  /* an open net/dev holds its namespace: close them before teardown */
  for (int h = 0; h < c->k; h++)
    if (c->host[h].devfd >= 0) {
      close(c->host[h].devfd);
      c->host[h].devfd = -1;
    }
}

void gs_hosts_links_free(gs_hosts *c) {
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
}

int gs_hosts_link(gs_hosts *c, int h, gs_hostlink_stat *out, gs_err *e) {
  if (h < 0 || h >= c->k)
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: no host %d (there are %d)", h, c->k);
  pthread_mutex_lock(&c->mu);
  int rc = sample(c, h, gs_now());
  *out = c->host[h].acc.last;
  pthread_mutex_unlock(&c->mu);
  if (rc < 0)
    return GS_FAIL(e, GS_EIO, "emulated hosts: cannot read host %d's link counters", h);
  return GS_OK;
}

void gs_hostlink_busy(const gs_hostlink_stat *a, const gs_hostlink_stat *b, double *up,
                      double *down) {
  double dt = b->t - a->t;
  *up = dt > 0 ? (b->up_busy_s - a->up_busy_s) / dt : 0;
  *down = dt > 0 ? (b->down_busy_s - a->down_busy_s) / dt : 0;
}

void gs_hosts_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
}

void gs_hosts_wait_period(pthread_cond_t *cv, pthread_mutex_t *mu, double period,
                          const int *stop) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long ns = ts.tv_nsec + (long)(period * 1e9);
  ts.tv_sec += ns / 1000000000L;
  ts.tv_nsec = ns % 1000000000L;
  while (!*stop && pthread_cond_timedwait(cv, mu, &ts) == 0) {
  }
}

static void *sampler(void *arg) {
  gs_hosts *c = arg;
  pthread_mutex_lock(&c->mu);
  while (!c->stop) {
    double now = gs_now();
    for (int h = 0; h < c->k; h++) sample(c, h, now);
    gs_hosts_wait_period(&c->cv, &c->mu, c->period, &c->stop);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int gs_hosts_sample_start(gs_hosts *c, double period_s, gs_err *e) {
  if (!(period_s >= 1e-4 && period_s <= 10))
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: sampling period %g s is not in [0.0001, 10]",
                   period_s);
  if (c->sampling) return GS_FAIL(e, GS_EINVAL, "emulated hosts: the sampler already runs");
  c->period = period_s;
  c->stop = 0;
  int rc = pthread_create(&c->thread, NULL, sampler, c);
  if (rc != 0)
    return GS_FAIL(e, GS_EIO, "emulated hosts: cannot start the sampler: %s", strerror(rc));
  c->sampling = 1;
  return GS_OK;
}

void gs_hosts_sample_stop(gs_hosts *c) {
  if (!c->sampling) return;
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  c->sampling = 0;
}
