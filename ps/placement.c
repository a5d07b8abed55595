/* placement.c: what the ps runs where its options place the servers (ps.h
 * gs_ps_opts): its capabilities and what its options ask, for sync.h's one
 * check (worker/caps.c) on the command line and in every ps rank. Each
 * placement takes from DataParallel's one master only what it cannot do,
 * and says why here, once. */
#include <stdio.h>
#include <string.h>

#include "ps/ps_internal.h"

#define TRAINING_WIRES (GS_CAP(GS_F32) | GS_CAP(GS_F16) | GS_CAP(GS_BF16))

void gs_ps_caps(const void *opts, gs_caps *c) {
  gs_ps_opts o = {0};
  if (opts) o = *(const gs_ps_opts *)opts;
  int K = o.servers > 1 ? o.servers : 1;
  bool own = o.server_hosts || o.server_eps, agg = o.host_ranks > 1;
  gs_caps_everything(c);
  char *what = c->what;
  /* DataParallel's master runs everything but the all-reduce's periodic
   * averaging */
  c->runs[GS_AXIS_SYNC] &= ~GS_CAP(GS_SYNC_PERIODIC);
  int n = 0;
  if (K > 1 || own) {
    /* one inf/NaN verdict per step covers every gradient, which K servers
     * would have to agree on: fp32 without loss scaling; compressed pushes
     * go to one server; the collective benchmark sums on one */
    c->runs[GS_AXIS_COMPRESS] = GS_CAP(GS_COMPRESS_NONE);
    c->runs[GS_AXIS_PRECISION] = c->runs[GS_AXIS_WIRE] = GS_CAP(GS_F32);
    c->runs[GS_AXIS_SCALING] = GS_CAP(0);
    c->runs[GS_AXIS_COLLECTIVE] = GS_CAP(0);
    if (own) c->runs[GS_AXIS_TRANSPORT] = GS_CAP(GS_TRANSPORT_TCP); /* they listen on TCP */
  }
  if (o.summation) {
    /* BytePS' summation servers: fp32 sums of every rank's gradient at
     * every step (no stale model: a rank's optimizer needs every rank's
     * sum; no compression, no loss scaling: the servers only add), pushed
     * from host memory to servers that listen on TCP */
    c->runs[GS_AXIS_SYNC] = GS_CAP(GS_SYNC_BSP);
    c->runs[GS_AXIS_COMPRESS] = GS_CAP(GS_COMPRESS_NONE);
    c->runs[GS_AXIS_PRECISION] = c->runs[GS_AXIS_WIRE] = GS_CAP(GS_F32);
    c->runs[GS_AXIS_SCALING] = GS_CAP(0);
    c->runs[GS_AXIS_COLLECTIVE] = GS_CAP(0);
    c->runs[GS_AXIS_DEVICE] = GS_CAP(GS_DEV_CPU);
    c->runs[GS_AXIS_TRANSPORT] = GS_CAP(GS_TRANSPORT_TCP);
  }
  if (agg) {
    /* hosts sum in host memory, and every rank would push its own
     * compressed gradient */
    c->runs[GS_AXIS_COMPRESS] &= GS_CAP(GS_COMPRESS_NONE) | GS_CAP(GS_COMPRESS_FP16) |
                                 GS_CAP(GS_COMPRESS_BF16);
    c->runs[GS_AXIS_DEVICE] = GS_CAP(GS_DEV_CPU);
    c->runs[GS_AXIS_WIRE] &= TRAINING_WIRES;
    c->runs[GS_AXIS_COLLECTIVE] = GS_CAP(0);
    n = snprintf(what, sizeof c->what, "the host-aggregated ps (--ps-local-reduce");
  }
  if (o.summation)
    n += snprintf(what + n, sizeof c->what - (size_t)n, "%sBytePS' summation servers "
                  "(--ps-spare-hosts %d", agg ? " with " : "", o.spare);
  else if (own)
    n += snprintf(what + n, sizeof c->what - (size_t)n, "%sthe ps with %d server(s) on hosts "
                  "of their own (--ps-servers %d --ps-server-hosts", agg ? "; " : "", K, K);
  else if (K > 1)
    n += snprintf(what + n, sizeof c->what - (size_t)n, "%sthe sharded ps of %d servers "
                  "(--ps-servers %d", agg ? " with " : "", K, K);
  else if (o.dedicated)
    n += snprintf(what + n, sizeof c->what - (size_t)n, "%sthe ps' dedicated server process "
                  "(--ps-dedicated", agg ? " with " : "");
  if (n == 0) snprintf(what, sizeof c->what, "the flat ps (--mode ps");
  snprintf(what + strlen(what), sizeof c->what - strlen(what), ")");
}

void gs_ps_asks(const void *opts, gs_want *w) {
  gs_ps_opts o = {0};
  if (opts) o = *(const gs_ps_opts *)opts;
  char text[48];
  gs_ps_sync_text(&o.sync, text, sizeof text);
  gs_sync_kind k = gs_ps_sync_kind(&o.sync);
  if (k == GS_SYNC_BACKUP) gs_want_set(w, GS_AXIS_SYNC, k, "--ps-backup %d", o.sync.backup);
  else if (k == GS_SYNC_BSP) gs_want_set(w, GS_AXIS_SYNC, k, NULL);
  else gs_want_set(w, GS_AXIS_SYNC, k, "--ps-sync %s", text);
}
