/* exec.c: `bench --hosts K --link RATE [--world N] [--latency D] -- CMD ...`:
 * any program, once per rank, on emulated hosts (hosts.h), as Mininet runs
 * a command on its hosts: a user's own PyTorch DDP script, or a peer such
 * as Gloo, over the same links bench's ranks use.
 *
 * Each rank gets the torchrun variables (RANK, LOCAL_RANK, WORLD_SIZE,
 * LOCAL_WORLD_SIZE, MASTER_ADDR = host 0's address, MASTER_PORT) plus
 * GS_HOST, GS_HOSTS and GS_HOST_ADDR, and GLOO/NCCL/TP_SOCKET_IFNAME=eth0
 * (where not set already); ranks are placed host-major, as
 * bench places its own. The launcher watches them as it watches bench's
 * ranks (launch.c), and prints what every host's link carried while they
 * ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/hosts/hosts.h"
#include "bench/job/job.h"

/* Each host is a network namespace of its own, so a fixed port collides
 * with nothing; 29500 is torchrun's. */
#define EXEC_PORT 29500

const char *gs_exec_flag_refused(const char *name) {
  static const char *const ok[] = {"hosts", "link", "link-host", "latency", "world", "timeout",
                                   NULL};
  for (int i = 0; ok[i]; i++)
    if (!strcmp(name, ok[i])) return NULL;
  return "does nothing with -- CMD, which runs a command of your own on the emulated hosts "
         "(only --hosts, --link, --link-host, --latency, --world and --timeout apply)";
}

int gs_exec_resolve(const gs_opts *o, gs_err *e) {
  if (!o->link_bps)
    return GS_FAIL(e, GS_EINVAL, "-- %s: a command after -- runs on emulated hosts: give "
                   "--hosts K --link RATE (e.g. --hosts 2 --link 1gbit)", o->exec[0]);
  if (o->nworlds != 1 || o->worlds[0] < 1)
    return GS_FAIL(e, GS_EINVAL, "-- %s: give one --world (ranks to start), not a list",
                   o->exec[0]);
  return GS_OK;
}

int gs_exec_on_hosts(const gs_opts *o, char **argv, int world, int hosts,
                     struct gs_hostlink_stat *links, int *nlinks, char *why, size_t cap) {
  int argc = 0;
  while (argv[argc]) argc++;
  gs_launch l = {.argc = argc, .argv = argv, .world = world, .timeout_s = o->timeout_s,
                 .hosts = hosts, .link_bps = o->link_bps, .link_host = &o->link_host,
                 .latency_s = o->latency_s, .host_cpus = o->host_cpus, .exec = true,
                 .exec_port = EXEC_PORT, .links = links, .nlinks = nlinks};
  /* Gloo, NCCL and TensorPipe pick the interface of the hostname, which
   * resolves to loopback here: the host's link is eth0 (unless the user
   * said otherwise) */
  setenv("GLOO_SOCKET_IFNAME", "eth0", 0);
  setenv("NCCL_SOCKET_IFNAME", "eth0", 0);
  setenv("TP_SOCKET_IFNAME", "eth0", 0);
  return gs_launch_run(&l, why, cap);
}

int gs_exec_main(const gs_opts *o) {
  int world = o->worlds[0], hosts = o->hosts > 0 ? o->hosts : world;
  gs_hostlink_stat links[GS_HOSTS_MAX];
  int n = 0;
  char why[1024];
  int rc = gs_exec_on_hosts(o, o->exec, world, hosts, links, &n, why, sizeof why);
  if (rc) fprintf(stderr, "bench: -- %s on %d emulated hosts: %s\n", o->exec[0], hosts, why);
  if (n > 0) {
    printf("# what each emulated host's link carried while the command ran (%.0f Mbit/s "
           "each way; busy: the share of the time it was sending)\n", o->link_bps / 1e6);
    printf("#  host     up (MB)   down (MB)   busy up   busy down   over (s)\n");
    for (int h = 0; h < n; h++) {
      double t = links[h].t > 0 ? links[h].t : 1;
      printf("%7d  %10.1f  %10.1f  %7.0f%%  %9.0f%%  %9.2f\n", h, links[h].up_bytes / 1e6,
             links[h].down_bytes / 1e6, 100 * links[h].up_busy_s / t,
             100 * links[h].down_busy_s / t, links[h].t);
    }
  }
  return rc;
}
