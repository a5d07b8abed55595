/* addrs.c: which address this rank's sockets bind, and which one its
 * peers are told (job.h gs_job_addrs_resolve), the second step of a job's
 * start (job.c): a local job (our launcher, or MASTER_ADDR a loopback
 * address) binds loopback only; a multi-node job binds the address this
 * host uses to reach MASTER_ADDR (its route's source: MASTER_ADDR itself on
 * rank 0), or --bind ADDR. The wildcard 0.0.0.0 only when --bind 0.0.0.0
 * asks for it; peers are then told the route's address instead. A rank on
 * an emulated host binds that host's address. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/job/job.h"

static int ipv4_of(const char *what, const char *name, char out[GS_ADDR_MAX], gs_err *e) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(name, NULL, &hints, &res);
  if (rc != 0 || !res)
    return GS_FAIL(e, GS_EINVAL, "%s %s: no IPv4 address (%s); give an IPv4 address or a "
                   "host name that resolves to one", what, name, gai_strerror(rc));
  inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, GS_ADDR_MAX);
  freeaddrinfo(res);
  return GS_OK;
}

bool gs_addr_loopback(const char *ip) {
  struct in_addr a;
  return inet_pton(AF_INET, ip, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* The source address of this host's route to ip: what a UDP socket
 * connected there is bound to (connect sends nothing). */
static int route_source(const char *ip, char out[GS_ADDR_MAX], gs_err *e) {
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(9)}, src;
  socklen_t len = sizeof src;
  inet_pton(AF_INET, ip, &dst.sin_addr);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 ||
      getsockname(fd, (struct sockaddr *)&src, &len) < 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return GS_FAIL(e, GS_EIO, "no route from this host to MASTER_ADDR %s: %s (check the "
                   "network, or give --bind ADDR)", ip, strerror(err));
  }
  close(fd);
  inet_ntop(AF_INET, &src.sin_addr, out, GS_ADDR_MAX);
  return GS_OK;
}

/* ip is an address of this host: binding it works */
static int check_own(const char *ip, gs_err *e) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  inet_pton(AF_INET, ip, &a.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&a, sizeof a);
  int err = errno;
  if (fd >= 0) close(fd);
  if (rc < 0)
    return GS_FAIL(e, GS_EINVAL, "--bind %s: not an address of this host (%s); give one of "
                   "its addresses (ip -4 addr), or 0.0.0.0 for all of them", ip, strerror(err));
  return GS_OK;
}

int gs_job_addrs_resolve(const gs_rank_env *env, const char *bind, gs_job_addrs *a,
                         gs_err *e) {
  memset(a, 0, sizeof *a);
  GS_TRY(ipv4_of("MASTER_ADDR", env->master_addr, a->master, e));
  a->loopback = env->launched || gs_addr_loopback(a->master);
  a->wildcard = bind && !strcmp(bind, "0.0.0.0");
  /* what this host is to its peers: loopback, or its side of the route */
  if (a->loopback) snprintf(a->advertise, sizeof a->advertise, "%s", a->master);
  else GS_TRY(route_source(a->master, a->advertise, e));
  if (env->rank == 0 && !a->loopback && !a->wildcard && strcmp(a->advertise, a->master))
    return GS_FAIL(e, GS_EINVAL, "MASTER_ADDR %s is not an address of this host, and rank 0 "
                   "hosts the rendezvous there: start rank 0 on the machine MASTER_ADDR names "
                   "(or give --bind 0.0.0.0 to listen on every interface, as behind NAT)",
                   env->master_addr);
  if (a->wildcard) {
    snprintf(a->bind, sizeof a->bind, "0.0.0.0");
  } else if (env->hosts > 0) { /* an emulated host: its own address (peers on it
                                 * reach it over its loopback) */
    GS_TRY(ipv4_of("GS_HOST_ADDR", env->host_addr, a->bind, e));
    snprintf(a->advertise, sizeof a->advertise, "%s", a->bind);
  } else if (bind) {
    GS_TRY(ipv4_of("--bind", bind, a->bind, e));
    GS_TRY(check_own(a->bind, e));
    snprintf(a->advertise, sizeof a->advertise, "%s", a->bind);
  } else {
    snprintf(a->bind, sizeof a->bind, "%s", a->advertise);
  }
  if (env->port_fd >= 0) /* our launcher: an ephemeral port it reads back */
    snprintf(a->rendezvous, sizeof a->rendezvous, "tcp://%s:*", a->master);
  else
    snprintf(a->rendezvous, sizeof a->rendezvous, "tcp://%s:%d",
             env->rank == 0 && a->wildcard ? "0.0.0.0" : a->master, env->master_port);
  return GS_OK;
}
