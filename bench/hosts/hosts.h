/* hosts.h: the contract of bench/hosts: a cluster of emulated hosts on one
 * machine, the way Mininet builds one, usable without the command line
 * (tests/bench/hosts drives it directly): the net (gs_hosts_create / destroy:
 * namespaces, veth pairs and a bridge; hosts.c), the nodes (gs_hosts_spawn
 * a process on host h, gs_hosts_info its address) and the links (tc
 * shaping, the veth counters and their busy time: links.c), and where asked
 * each host's share of the processors (a cgroup per host: cpu_quota.c). It knows
 * base/base.h and nothing else of gradsync.
 *
 * Layout of a cluster of K hosts:
 *
 *   host h (h = 0..K-1): a network namespace with `lo` up and one interface,
 *     eth0, address 10.77.0.(h+1)/24. Ranks on the same host talk over its
 *     loopback; ranks on different hosts over eth0.
 *   switch: a network namespace holding a Linux bridge, sw0, whose ports
 *     port0..port(K-1) are the other ends of the hosts' eth0 veth pairs.
 *   link h = the veth pair eth0 <-> port<h>, shaped in both directions with
 *     tbf at the link rate: eth0's egress is the host's upload, port<h>'s
 *     egress its download.
 *
 * Isolation: nothing is added to the caller's own network namespace and no
 * name is left in /run/netns. Every namespace is held by a process inside
 * one private PID namespace whose init (pid 1) the caller holds: holders
 * and spawned processes all live there, so when that init dies (destroy,
 * or the caller's death: PR_SET_PDEATHSIG and a pipe whose far end only the
 * caller holds) the kernel kills every process of the cluster, and the
 * namespaces and veth pairs go with their last process.
 *
 * Threads: create the cluster and spawn from a thread that outlives it
 * (the main thread): the kernel's parent-death signal follows the thread
 * that forked. A cluster is used by one thread at a time, apart from the
 * sampler.
 *
 * A launcher's use: gs_hosts_create; gs_hosts_info(h).addr is what ranks
 * on host h bind for peers on other hosts (127.0.0.1 for peers on the same
 * host); gs_hosts_spawn each rank on its host (host-major: rank r on host
 * r / (world / K)), with MASTER_ADDR = host 0's address; gs_hosts_sample_start
 * and a gs_hosts_link reading of every host at the run's start and end (or
 * each step's); waitpid the ranks; gs_hosts_destroy. Needs CAP_NET_ADMIN
 * and CAP_SYS_ADMIN, and iproute2's ip and tc. */
#ifndef GS_BENCH_HOSTS_H
#define GS_BENCH_HOSTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"

#define GS_HOSTS_MAX 250          /* one /24 of addresses */
#define GS_HOSTS_SWITCH (-1)      /* the switch, for gs_hosts_info() */

typedef struct gs_hosts gs_hosts;

typedef struct gs_hosts_cfg {
  int hosts;                /* K, 1..GS_HOSTS_MAX */
  uint64_t rate_bps;        /* link rate in bit/s, each direction (> 0) */
  uint64_t burst_bytes;     /* tbf bucket; 0: gs_hosts_tbf()'s choice */
  uint64_t limit_bytes;     /* tbf queue; 0: gs_hosts_tbf()'s choice */
  double delay_s;           /* one-way host-to-host delay (netem, half on
                               each end of both links); needs netem */
  const struct gs_host_rates *host_rates; /* links of their own rate; NULL: none */
  double host_cpus;         /* cores each host may use, at least 0.1 (a CFS quota in
                               a cgroup per host, cpu_quota.c); 0: the machine's, shared */
} gs_hosts_cfg;

/* host_rates.c: links of their own rate, "H=RATE[,H=RATE...]" as users
 * write them (--link-host); every other link runs at the cluster's rate.
 * The burst and queue of such a link are gs_hosts_tbf()'s at its rate. */
#define GS_HOST_RATES_MAX 32
typedef struct gs_host_rates {
  int n;
  int host[GS_HOST_RATES_MAX];
  uint64_t bps[GS_HOST_RATES_MAX];
} gs_host_rates;
int gs_host_rates_parse(const char *s, gs_host_rates *out, gs_err *e);
/* host h's rate, or dflt when h has none of its own (r may be NULL) */
uint64_t gs_host_rates_of(const gs_host_rates *r, int h, uint64_t dflt);
/* the highest host named, -1 for none */
int gs_host_rates_max_host(const gs_host_rates *r);
/* "3=100000000bit,5=..." (tc's units, parseable again); "" for none */
void gs_host_rates_text(const gs_host_rates *r, char *buf, size_t cap);

/* The tbf parameters used at rate_bps when the configuration leaves them
 * at 0 (links.c says why these). */
void gs_hosts_tbf(uint64_t rate_bps, uint64_t *burst_bytes, uint64_t *limit_bytes);

/* What a saturated link of rate_bps shows in its counters per second (and
 * so carries of TCP payload): the rate less every segment's headers. */
double gs_hosts_counted_Bps(uint64_t rate_bps);

/* Parse a tc-style rate: a number with bit, kbit, mbit, gbit or tbit
 * (powers of 1000, as tc reads them), e.g. "100mbit", "1gbit", "2.5gbit". */
int gs_hosts_parse_rate(const char *s, uint64_t *bps, gs_err *e);

/* Whether `cores` is a cap a host can have (cpu_quota.c): at least 0.1 (a CFS
 * quota's floor), at most this machine's cores; GS_OK or why not. */
int gs_hosts_cpus_check(double cores, gs_err *e);

/* Whether this process may build a cluster: GS_OK, or an error saying what
 * is missing (a capability, iproute2) and how to get it. Builds nothing. */
int gs_hosts_usable(gs_err *e);

/* Whether the kernel has netem: 1 yes, 0 no (tried on the loopback of a
 * throwaway namespace), or a negative GS_E* (no CAP_NET_ADMIN, no tc). */
int gs_hosts_netem(gs_err *e);

/* Build the whole cluster or nothing: on failure what was built is torn
 * down and e says what is missing (CAP_NET_ADMIN, iproute2, a kernel
 * feature) and how to get it. */
int gs_hosts_create(const gs_hosts_cfg *cfg, gs_hosts **out, gs_err *e);
/* Kill every process of the cluster (spawned ones included, which are
 * reaped here if the caller has not), and release the namespaces. */
void gs_hosts_destroy(gs_hosts *c);

int gs_hosts_count(const gs_hosts *c);
/* Whether its links delay packets (netem). */
bool gs_hosts_has_delay(const gs_hosts *c);

typedef struct gs_host_info {
  int host;                 /* h, or GS_HOSTS_SWITCH */
  char addr[16];            /* "10.77.0.3" (empty for the switch) */
  int prefix;               /* 24 */
  char ifname[16];          /* the host's end: "eth0" (switch: "sw0") */
  char port[16];            /* the switch's end: "port2" (switch: "") */
  pid_t holder;             /* a process in that namespace (caller's view) */
  char netns[40];           /* "/proc/<holder>/ns/net": for nsenter --net= */
  uint64_t netns_ino;       /* its inode: how /proc/<pid>/ns/net names it */
  uint64_t rate_bps;        /* its link's rate (0 for the switch) */
  double cpus;              /* cores its processes may use (0: uncapped) */
  char cgroup[352];         /* the cgroup that caps them ("" when uncapped) */
} gs_host_info;
int gs_hosts_info(const gs_hosts *c, int h, gs_host_info *out);

/* Fork a process into host h's network namespace (and the cluster's PID
 * namespace, with a /proc of its own in a private mount namespace) and exec argv (PATH searched; envp NULL: this environment).
 * It is the caller's child: wait for it with waitpid(*pid). It gets SIGKILL
 * if the calling thread dies. Fails with a clear error if exec fails. */
int gs_hosts_spawn(gs_hosts *c, int h, char *const argv[], char *const envp[], pid_t *pid,
                   gs_err *e);

/* Link counters of host h, from eth0's counters in its namespace (bytes
 * the kernel moved, Ethernet headers included; a GSO packet's headers are
 * counted once, where the wire would carry them per segment).
 * busy: the time the link was sending: the bytes it carried over what a
 * saturated link carries in a second (its rate times 1448/1514, bulk TCP's
 * share of what tbf charges), counted as the wall clock advances, so never
 * more than the time elapsed (links.c says why). It accumulates while
 * the sampler runs and at each gs_hosts_link call; busy over a window
 * [a, b] is (b.up_busy_s - a.up_busy_s) / (b.t - a.t): gs_hostlink_busy(). */
typedef struct gs_hostlink_stat {
  double t;                 /* gs_now() of the reading */
  uint64_t up_bytes;        /* host -> switch (eth0 tx) */
  uint64_t down_bytes;      /* switch -> host (eth0 rx) */
  double up_busy_s, down_busy_s;
  double any_busy_s;        /* busy in either direction */
} gs_hostlink_stat;
int gs_hosts_link(gs_hosts *c, int h, gs_hostlink_stat *out, gs_err *e);

/* The busy-time accounting of one link (links.c says how), for any
 * reader of its counters: start with a first reading, update with each. */
typedef struct gs_hostlink_acc {
  double full_Bps;          /* gs_hosts_counted_Bps of the rate */
  gs_hostlink_stat last;        /* the latest reading, busy times accumulated */
  double up_work_s, down_work_s;   /* counted, not yet spent as busy time */
} gs_hostlink_acc;
void gs_hostlink_acc_start(gs_hostlink_acc *a, uint64_t rate_bps, double now, uint64_t tx,
                           uint64_t rx);
void gs_hostlink_acc_update(gs_hostlink_acc *a, double now, uint64_t tx, uint64_t rx);

/* eth0's rx and tx bytes from an open /proc/<pid>/net/dev, read again from
 * its start (a seq_file starts over): 0, or -1 when it cannot be read or has
 * no eth0 line. */
int gs_netdev_read_eth0(int fd, uint64_t *rx, uint64_t *tx);

/* Fraction of [a.t, b.t] that the link was busy in each direction. */
void gs_hostlink_busy(const gs_hostlink_stat *a, const gs_hostlink_stat *b, double *up,
                      double *down);

/* A thread that reads every host's counters each period_s (e.g. 0.005) to
 * accumulate busy time. Stop is idempotent; destroy stops it too. */
int gs_hosts_sample_start(gs_hosts *c, double period_s, gs_err *e);
void gs_hosts_sample_stop(gs_hosts *c);

/* watch.c: a host's link from inside it. */
/* A thread watching this process's host link (eth0 of its network
 * namespace) every period_s; a reading gives bytes and busy time so far
 * (hosts.h gs_hostlink_stat: up = tx, down = rx). Stop frees it. */
typedef struct gs_hostlink_watch gs_hostlink_watch;
int gs_hostlink_watch_start(uint64_t rate_bps, double period_s, gs_hostlink_watch **w,
                            gs_err *e);
/* The same for the host of process pid (a ps server of its own: its
 * /proc/<pid>/net/dev shows its network namespace). */
int gs_hostlink_watch_start_pid(int pid, uint64_t rate_bps, double period_s,
                                gs_hostlink_watch **w, gs_err *e);
void gs_hostlink_watch_read(gs_hostlink_watch *w, gs_hostlink_stat *out);
void gs_hostlink_watch_stop(gs_hostlink_watch *w);

#endif
