/* cluster.c: emulated hosts in a bench run. What --hosts, --link and
 * --latency mean (checked with the other flags, before anything starts),
 * how many hosts one run of the sweep gets, and the link counters a rank
 * reads of its own host.
 *
 * Placement is host-major, as torchrun places ranks on nodes: with N ranks
 * on K hosts, rank r is on host r / (N/K), and the ps master (rank 0) is on
 * host 0. --link without --hosts puts each rank on a host of its own, so a
 * sweep over --world is a sweep over hosts. World 1 has nothing to
 * synchronize and runs without a cluster. The cluster itself (namespaces,
 * veth pairs, tc, the links' counters) is bench/hosts'; launch.c builds one
 * per run. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hosts/hosts.h"
#include "bench/job/job.h"

/* "100us", "2ms", "0.5s", "0": seconds in [0, 10) */
int gs_cluster_parse_delay(const char *s, double *out, gs_err *e) {
  static const struct {
    const char *unit;
    double scale;
  } units[] = {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"", 1}};
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (end != s && errno == 0 && isfinite(v) && v >= 0)
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (!strcmp(end, units[i].unit) && (v == 0 || *end) && v * units[i].scale < 10) {
        *out = v * units[i].scale;
        return GS_OK;
      }
  return GS_FAIL(e, GS_EINVAL, "--latency %s: a one-way delay under 10 s with its unit, e.g. "
                 "100us or 2ms (0 for none)", s);
}

int gs_cluster_resolve(gs_opts *o, gs_err *e) {
  if (!o->link_arg) {
    o->link_choice = o->link_none ? GS_LINK_NONE : GS_LINK_AUTO;
    if (o->hosts || o->latency_arg || o->link_host_arg || o->host_cpus > 0)
      return GS_FAIL(e, GS_EINVAL, "%s needs --link RATE, the emulated links' rate (e.g. --link "
                     "1gbit)", o->hosts ? "--hosts" : o->latency_arg ? "--latency"
                     : o->link_host_arg ? "--link-host" : "--host-cpus");
    return GS_OK;
  }
  o->link_choice = GS_LINK_GIVEN;
  GS_TRY(gs_hosts_parse_rate(o->link_arg, &o->link_bps, e));
  if (o->link_bps < 8000)
    return GS_FAIL(e, GS_EINVAL, "--link %s: at least 8kbit", o->link_arg);
  if (o->latency_arg) GS_TRY(gs_cluster_parse_delay(o->latency_arg, &o->latency_s, e));
  gs_err cpus = {0};
  if (o->host_cpus > 0 && gs_hosts_cpus_check(o->host_cpus, &cpus) < 0)
    return GS_FAIL(e, GS_EINVAL, "--host-cpus %g: %s", o->host_cpus, cpus.msg);
  if (o->nnodes > 0)
    return GS_FAIL(e, GS_EINVAL, "--link emulates hosts on this machine, and --nnodes runs on "
                   "real ones: give one or the other");
  if (!o->world_given && o->hosts) { /* the natural run: one world, K hosts */
    o->worlds[0] = o->hosts;
    o->nworlds = 1;
  }
  for (int i = 0; i < o->nworlds; i++) {
    int w = o->worlds[i], k = o->hosts ? o->hosts : w;
    if (w == 1) continue;
    if (w < k || w % k)
      return GS_FAIL(e, GS_EINVAL, "--hosts %d: world %d does not split evenly over %d hosts "
                     "(ranks are placed host-major, world / hosts on each): give worlds that "
                     "are multiples of %d", k, w, k, k);
    if (gs_host_rates_max_host(&o->link_host) >= k)
      return GS_FAIL(e, GS_EINVAL, "--link-host %s: world %d runs on hosts 0..%d, so host %d "
                     "has no link: name hosts below %d (or give --hosts K)", o->link_host_arg,
                     w, k - 1, gs_host_rates_max_host(&o->link_host), k);
  }
  return GS_OK;
}

/* What --link auto picks for a training sweep: the rate, and why the
 * default falls back to loopback where it does. */
#define GS_LINK_AUTO_ARG "1gbit"

void gs_cluster_auto(gs_opts *o) {
  if (o->link_choice != GS_LINK_AUTO) return;
  o->link_choice = GS_LINK_AUTO_LOOPBACK;
  bool multi = false;
  for (int m = 0; m < o->nmodes; m++)
    for (int w = 0; w < o->nworlds; w++) multi |= o->modes[m] != GS_MODE_SINGLE && o->worlds[w] > 1;
  const char *why = NULL;
  gs_err e = {0};
  if (!multi) return; /* one process: no link to choose */
  if (o->collective) why = "the collective benchmark measures this machine's transport";
  else if (o->peer) why = "--peer runs its peer over this machine's loopback, so ps and ring do "
                          "too";
  else if (strcmp(o->transport, "tcp")) why = "--transport ipc or shm joins ranks of one machine";
  else if (strcmp(o->device, "cpu") && gs_cuda_device_count() > 0)
    why = "GPU ranks use NCCL's own transports";
  else if (o->nnodes > 0) why = "--nnodes runs on real machines";
  for (int w = 0; w < o->nworlds && !why; w++)
    if (o->worlds[w] > GS_HOSTS_MAX) why = "a world has more ranks than emulated hosts can be";
  if (why) {
    snprintf(o->link_why, sizeof o->link_why, "%s (--link RATE asks for emulated hosts)", why);
    return;
  }
  if (gs_hosts_usable(&e) < 0) {
    snprintf(o->link_why, sizeof o->link_why, "%s; then bench runs over emulated %s links by "
             "default", e.msg, GS_LINK_AUTO_ARG);
    return;
  }
  o->link_choice = GS_LINK_AUTO_HOSTS;
  o->link_arg = GS_LINK_AUTO_ARG;
  gs_hosts_parse_rate(o->link_arg, &o->link_bps, &e);
}

int gs_cluster_hosts(const gs_opts *o, gs_mode mode, int world) {
  if (!o->link_bps || mode == GS_MODE_SINGLE || world == 1) return 0;
  return o->hosts ? o->hosts : world;
}
