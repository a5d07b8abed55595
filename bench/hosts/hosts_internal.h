/* hosts_internal.h: what hosts.c (namespaces, processes) and links.c
 * (link parameters, counters, sampler) share; internal to the emulated
 * hosts of bench/hosts/hosts.h. */
#ifndef GS_BENCH_HOSTS_INTERNAL_H
#define GS_BENCH_HOSTS_INTERNAL_H

#include <pthread.h>

#include "bench/hosts/hosts.h"

/* One namespace: the switch or a host. */
typedef struct gs_node {
  pid_t pid;             /* its holder */
  int pidfd;
  int nsfd;              /* /proc/<pid>/ns/net, for setns */
  char netns[40];
  uint64_t ino;
  char addr[16];         /* hosts only */
  uint64_t rate, burst, limit; /* hosts only: its link's tbf */
  int cgfd;              /* hosts with a CPU cap: its cgroup's cgroup.procs (cpu_quota.c) */
  /* counters (hosts only), guarded by gs_hosts.mu */
  int devfd;             /* /proc/<pid>/net/dev */
  gs_hostlink_acc acc;
} gs_node;

struct gs_hosts {
  int k;
  uint64_t rate, burst, limit;
  double delay;
  double host_cpus;      /* cores each host may use; 0: uncapped */
  char cgroup[320];      /* the cluster's cgroup (cpu_quota.c); "" for none */
  gs_node sw;            /* its holder is the PID namespace's init */
  gs_node *host;
  char ip[256], tc[256];
  int life[2];           /* the caller holds [1]; children watch [0] for EOF */
  int devnull;
  int own_pidns, cluster_pidns;
  int *spawned;          /* pidfds of spawned processes */
  size_t nspawned;
  /* sampler */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int sampling, stop;
  double period;
};

void gs_hosts_links_init(gs_hosts *c);
int gs_hosts_links_open(gs_hosts *c, gs_err *e);
void gs_hosts_links_close(gs_hosts *c);
void gs_hosts_links_free(gs_hosts *c);
/* cpu_quota.c: a cgroup per host capped at `cores` (opens each host's cgfd);
 * close removes them once the cluster's processes are gone. join, in a
 * spawned child before exec: enter host h's group (0, or -1 with errno). */
int gs_hosts_cpu_open(gs_hosts *c, double cores, gs_err *e);
void gs_hosts_cpu_close(gs_hosts *c);
int gs_hosts_cpu_join(const gs_hosts *c, int h);
/* The samplers' clock (links.c, watch.c): a condition variable on
 * CLOCK_MONOTONIC, and with mu held, one period's wait, cut short when
 * *stop is set and cv signalled. */
void gs_hosts_cond_init(pthread_cond_t *cv);
void gs_hosts_wait_period(pthread_cond_t *cv, pthread_mutex_t *mu, double period,
                          const int *stop);

#endif
