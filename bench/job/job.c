/* job.c: how one rank starts a job, for training runs and the collective
 * benchmark alike:
 *
 *   1. which rank this process is, from the launch environment (rank_env.c:
 *      torchrun, Open MPI, MPICH, Slurm, bench --nnodes, our launcher);
 *   2. which address the sockets bind, and which one peers are told
 *      (addrs.c);
 *   3. the job secret (secret.c): --secret-file or GS_JOB_SECRET (our
 *      launcher makes a fresh one per job), or for a rank whose every
 *      socket is on loopback the user's own secret file; a rank that
 *      listens beyond loopback refuses to start without one. Every
 *      rendezvous connection and every data connection proves it;
 *   4. the rendezvous: rank 0 listens at MASTER_ADDR:MASTER_PORT (our
 *      launcher: an ephemeral port, written to GS_PORT_FD);
 *   5. which backend runs a mode on a device, and one round of
 *      prepare -> bootstrap (rank 0) -> rendezvous -> open, which the
 *      collective benchmark repeats per message size. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "bench/job/job.h"
#include "proto/proto.h"
#include "ps/ps.h"

/* ---- 2. addresses: what peers are told (addrs.c resolves them) ---- */

/* With --bind 0.0.0.0 every socket this rank's backend binds is a
 * wildcard one, whatever host its address names (the link layer may put
 * this host's name there, which can resolve to loopback); peers are told
 * the advertised address instead: "tcp://HOST:PORT" -> "tcp://ADDR:PORT". */
static int publish(const gs_job *j, char *text, size_t cap, gs_err *e) {
  const char *colon = strrchr(text, ':');
  if (!j->addr.wildcard || strncmp(text, "tcp://", 6) || !colon || colon < text + 6)
    return GS_OK;
  char out[GS_ENDPOINT_MAX];
  int n = snprintf(out, sizeof out, "tcp://%s%s", j->addr.advertise, colon);
  if (n < 0 || (size_t)n >= cap || (size_t)n >= sizeof out)
    return GS_FAIL(e, GS_EINVAL, "rank %d: the address %s does not fit", j->rank, out);
  memcpy(text, out, (size_t)n + 1);
  return GS_OK;
}

/* ---- 3. the job secret (secret.c) ---- */

/* What this rank listens on beyond loopback, for the message that asks for
 * a secret: NULL when every socket it binds is on loopback (or is a Unix
 * socket of --transport ipc, or it binds nothing at all). */
static const char *listens_beyond(const gs_job *j) {
  if (j->world == 1) return NULL;
  if (j->addr.wildcard) return "0.0.0.0 (--bind 0.0.0.0)";
  if (!j->ipc && !gs_addr_loopback(j->addr.bind)) return j->addr.bind;
  if (j->rank == 0 && !gs_addr_loopback(j->addr.master)) return j->addr.master;
  return NULL;
}

/* ---- 4. starting the job ---- */

int gs_job_start(gs_job *j, const gs_opts *o, const gs_rank_env *env, gs_err *e) {
  memset(j, 0, sizeof *j);
  j->env = *env;
  j->rank = env->rank;
  j->world = env->world;
  j->local_rank = env->local_rank >= 0 ? env->local_rank : env->rank;
  j->local_world = env->local_world > 0 ? env->local_world : 0;
  j->timeout_ms = (int)(o->timeout_s * 1000.0);
  if (j->rank == 0) j->first_token = gs_rdv_new_token();
  snprintf(j->hostname, sizeof j->hostname, "localhost");
  gethostname(j->hostname, sizeof j->hostname - 1);
  if (env->hosts > 0) /* emulated hosts share the machine's name */
    snprintf(j->hostname, sizeof j->hostname, "host%d", env->host);
  if (env->hosts > 0 && env->delay_line_s > 0)
    gs_wire_delay(env->delay_line_s, env->host, env->world / env->hosts);
  GS_TRY(gs_job_addrs_resolve(env, o->bind, &j->addr, e));
  j->ipc = o->transport && strcmp(o->transport, "tcp");
  if (j->ipc && (!j->addr.loopback || env->hosts > 0))
    return GS_FAIL(e, GS_EINVAL, "rank %d: --transport %s needs every rank on this machine "
                   "(bench's own launcher, or MASTER_ADDR a loopback address); use tcp across "
                   "machines", env->rank, o->transport);
  if (j->world == 1 && !o->secret_file && !getenv("GS_JOB_SECRET")) {
    char fresh[2 * GS_KEY_BYTES + 1]; /* nothing listens: any key will do */
    gs_secret_new(fresh);
    GS_TRY(gs_cred_derive(&j->cred, fresh, strlen(fresh), o->encrypt, e));
  } else {
    GS_TRY(gs_job_secret(o->secret_file, listens_beyond(j), o->encrypt, &j->cred, e));
  }
  /* Rank 0 listens first: our launcher waits for the port before it starts
   * anyone else. */
  if (j->rank != 0 || j->world == 1) return GS_OK;
  char bound[GS_ENDPOINT_MAX] = "";
  int rc = gs_rdv_listen(j->addr.rendezvous, &j->cred, j->world, bound, sizeof bound, &j->rdv, e);
  if (rc < 0 && env->port_derived && !getenv("GS_RENDEZVOUS_PORT")) {
    char was[sizeof e->msg];
    snprintf(was, sizeof was, "%s", e->msg);
    bool slurm = !strcmp(env->source, "slurm");
    return GS_FAIL(e, rc, "%s; the rendezvous took port %d, %s, or export GS_RENDEZVOUS_PORT="
                   "PORT (free on rank 0's host) on every rank", was, env->master_port,
                   slurm ? "derived from SLURM_JOB_ID as MASTER_PORT is not set: export "
                           "MASTER_PORT"
                         : "MASTER_PORT + 1, as torchrun's agent keeps its store on MASTER_PORT: "
                           "choose a MASTER_PORT whose next port is free too (below the "
                           "ephemeral range, /proc/sys/net/ipv4/ip_local_port_range)");
  }
  if (rc < 0) return rc;
  if (env->port_fd < 0) return GS_OK;
  const char *colon = strrchr(bound, ':');
  char line[32];
  int n = snprintf(line, sizeof line, "%s\n", colon ? colon + 1 : "0");
  if (write(env->port_fd, line, (size_t)n) != n)
    return GS_FAIL(e, GS_EIO, "cannot tell the launcher the rendezvous port: %s",
                   strerror(errno));
  close(env->port_fd);
  return GS_OK;
}

/* ---- 5. backends and one round ---- */

void gs_job_end(gs_job *j) {
  if (j->prepared && j->state && j->be->discard) j->be->discard(j->state);
  j->state = NULL;
  j->prepared = false;
  free(j->eps);
  j->eps = NULL;
  gs_rdv_job_free(&j->round);
}

void gs_job_close(gs_job *j) {
  gs_job_end(j);
  if (j->rdv) gs_rdv_close(j->rdv);
  j->rdv = NULL;
}

/* World 1: the round without a rendezvous. */
static int alone(gs_job *j, const char *endpoint, uint64_t token, const uint8_t *blob,
                 size_t bloblen, gs_err *e) {
  gs_rdv_job *r = &j->round;
  r->world = 1;
  r->endpoints = calloc(1, sizeof *r->endpoints);
  r->hosts = calloc(1, sizeof *r->hosts);
  if (!r->endpoints || !r->hosts) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  snprintf(r->endpoints[0], GS_ENDPOINT_MAX, "%s", endpoint);
  snprintf(r->hosts[0], GS_HOST_MAX, "%s", j->hostname);
  if (bloblen) memcpy(r->blob, blob, bloblen);
  r->bloblen = bloblen;
  r->job = token;
  r->local_world = 1;
  return GS_OK;
}

int gs_job_meet(gs_job *j, const gs_backend *be, gs_sync_config *cfg, const char *settings,
                const char **phase, gs_err *e) {
  const char *ignored;
  if (!phase) phase = &ignored;
  *phase = "backend";
  gs_job_end(j);
  cfg->rank = j->rank;
  cfg->world = j->world;
  cfg->timeout_ms = j->timeout_ms;
  cfg->host = j->ipc ? GS_WIRE_IPC : j->addr.bind;
  cfg->cred = j->cred;
  cfg->local_rank = j->local_rank;
  cfg->local_world = j->local_world > 0 ? j->local_world : 1;
  cfg->device = j->local_rank;
  j->be = be;
  /* rank 0 makes the job token before anything of its backend starts (a
   * dedicated ps server is forked in prepare and must know it): the first
   * round's at the start (gs_job_results_dir), each later round's afresh, so
   * that no message of a round is taken for the next one's */
  if (j->rank == 0) cfg->job = j->rounds++ ? gs_rdv_new_token() : j->first_token;
  char endpoint[GS_ENDPOINT_MAX] = "";
  GS_TRY(be->prepare(cfg, &j->state, endpoint, e));
  j->prepared = true;
  uint8_t blob[GS_BOOTSTRAP_MAX + 1];
  size_t bloblen = 0;
  int rc = publish(j, endpoint, sizeof endpoint, e);
  if (rc == GS_OK && j->rank == 0 && be->bootstrap)
    rc = be->bootstrap(j->state, cfg, blob, &bloblen, e);
  /* a blob that is an address (the ps server's) is published as one */
  if (rc == GS_OK && bloblen && bloblen <= GS_BOOTSTRAP_MAX && !blob[bloblen - 1] &&
      strlen((char *)blob) + 1 == bloblen) {
    rc = publish(j, (char *)blob, GS_BOOTSTRAP_MAX, e);
    bloblen = strlen((char *)blob) + 1;
  }
  /* ranks that disagree on encryption could meet but never connect */
  size_t slen = strlen(settings) + 32;
  char *all = malloc(slen);
  if (!all) rc = rc < 0 ? rc : GS_FAIL(e, GS_ENOMEM, "out of memory");
  else snprintf(all, slen, "%sencrypt=%d\n", settings, j->cred.encrypt);
  gs_rdv_me me = {.rank = j->rank, .world = j->world, .local_rank = j->local_rank,
                  .host = j->hostname, .endpoint = endpoint, .settings = all,
                  .cred = &j->cred};
  if (rc == GS_OK) *phase = "rendezvous";
  if (rc < 0) {
    /* prepared, not met: gs_job_end discards the state */
  } else if (j->world == 1) {
    rc = alone(j, endpoint, cfg->job, blob, bloblen, e);
  } else if (j->rank == 0) {
    rc = gs_rdv_host(j->rdv, &me, cfg->job, blob, bloblen, j->timeout_ms, &j->round, e);
  } else {
    char master[GS_ADDR_MAX + 32];
    snprintf(master, sizeof master, "tcp://%s:%d", j->addr.master, j->env.master_port);
    if (j->rdv) gs_rdv_close(j->rdv); /* a new round registers afresh */
    j->rdv = NULL;
    rc = gs_rdv_join(master, &me, j->timeout_ms, &j->rdv, &j->round, e);
  }
  free(all);
  if (rc == GS_OK && !(j->eps = calloc((size_t)j->world, sizeof *j->eps)))
    rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (rc < 0) {
    gs_job_end(j);
    return rc;
  }
  for (int i = 0; i < j->world; i++) j->eps[i] = j->round.endpoints[i];
  cfg->endpoints = j->eps;
  cfg->bootstrap = j->round.blob;
  cfg->bootstrap_len = j->round.bloblen;
  cfg->job = j->round.job;
  if (j->local_world <= 0) j->local_world = j->round.local_world;
  cfg->local_world = j->local_world;
  return GS_OK;
}

int gs_job_open(gs_job *j, const gs_sync_config *cfg, gs_sync **out, gs_err *e) {
  if (!j->prepared)
    return GS_FAIL(e, GS_EINVAL, "rank %d: no backend prepared to open", j->rank);
  int rc = j->be->open(j->state, cfg, out, e);
  j->state = NULL; /* open owns it now, success or not */
  j->prepared = false;
  return rc;
}

void gs_job_report_error(gs_job *j, const char *phase, const char *msg) {
  if (j->rdv && j->rank != 0) gs_rdv_report_error(j->rdv, j->rank, phase, msg);
}
