/* ps_internal.h: internal to ps/: the worker side, one server's worker
 * at a time. flat.c is what the launcher sees: K servers (K = 1 is
 * DataParallel's master), one ps_worker_state and one ps_worker per server on
 * every rank, over shard.c's key ranges. Below it, for one server:
 * state.c (where the server runs: a thread, a forked process, or
 * elsewhere; and the end of all that), join.c (the socket, Hello / Init
 * and the Welcome) and client.c (the steps: pushes, parameters back,
 * close). */
#ifndef GS_PS_INTERNAL_H
#define GS_PS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "proto/proto.h"
#include "ps/ps.h"
#include "ps/server.h"

typedef struct ps_worker_state {
  int rank;
  bool dedicated;
  bool shard;             /* one of K > 1 (or of servers of their own) */
  char who[48];           /* the server in messages: "the ps server", "ps server 2 of 3" */
  char where[48];         /* where it runs: "rank 0", "rank 0's dedicated process" */
  void *zctx;
  gs_zap *zap;            /* admits the job's peers to the in-process server */
  /* the in-process server (rank 0's; a shard's in the rank that hosts it) */
  gs_ps_server *server;
  pthread_t thread;
  bool thread_started;
  int server_rc;
  gs_err server_err;
  char tcp_ep[GS_ENDPOINT_MAX], inproc_ep[GS_ENDPOINT_MAX];
  /* rank 0, dedicated server */
  int child, child_fd;
} ps_worker_state;

typedef struct ps_worker {
  gs_sync_config c;       /* its opts: &o */
  gs_ps_opts o;           /* a copy of the caller's */
  gs_bucket *buckets;
  ps_worker_state *st;
  void *sock;
  char server_ep[GS_ENDPOINT_MAX];
  const char *who, *where;  /* st's, for messages */
  bool inproc;      /* beside its server thread (rank 0, or a shard's host) */
  bool has_server;  /* rank 0 with a dedicated server */
  bool cpu, failed, in_step;
  size_t wsize;
  int wait_ms;      /* the server's timeout, a quarter and 1 s more: its named error
                       arrives first */
  void *stage_host, *stage_dev;
  uint64_t stage_host_bytes, stage_dev_bytes;
  atomic_int inflight;
  gs_dial *dial;    /* the DEALER's connection, watched for drops (not inproc) */
  int64_t resent_step; /* the step whose pushes went again (-1: none) */

  int64_t step;
  uint8_t *ready, *pushed, *got;
  int ngot, nskipped;
  double blocked_s, last_progress;
  uint64_t sent, recv;
  float scale;
  /* ssp, async, backup (sync.h gs_ps_sync): versions are updates applied */
  bool stale;
  uint64_t version;   /* the parameters this rank holds */
  uint64_t base;      /* the version this step computes on */
  float base_scale;   /* the loss scale that came with it (the push says it) */
  bool vskipped;      /* a version received in this step's wait was a skipped update */
  uint64_t incoming;  /* the version arriving, while vgot > 0 */
  int vgot;           /* its buckets received so far */
  int64_t answers, pushes; /* async, backup: versions received / steps pushed */
  int64_t staleness;  /* this step's gradient's */
  double srv_reduce, srv_update;
  uint64_t srv_sent, srv_recv;
  /* gs_ps_goodbye done: its verdict and result, for gs_ps_close */
  bool said_bye, bye_orderly;
  int bye_rc;
  gs_err bye_err;
  char why[512];      /* an abort's reason, for the server to pass on ("": none) */
  /* --compress topk (topk_push.c; NULL: dense pushes) */
  gs_topk *topk;
  uint8_t *topk_buf;  /* every bucket's sparse payload of the step */
  size_t *topk_at, *topk_kept;  /* [nb]: bucket b's place in it, its entries */
  uint64_t topk_bytes;          /* the residual and that buffer */
  /* --compress powersgd (powersgd_push.c; NULL: whole buckets) */
  gs_powersgd *psgd;
  size_t *psgd_n;               /* [nb * 3]: floats of bucket b's part k + 1 */
  uint8_t *psgd_got;            /* [nb]: sums received this step (bits 1 << part) */
  double psgd_s;                /* this step's compression work */
} ps_worker;

/* state.c: one server's worker state for rank c->rank (host_server: that
 * rank's context carries the in-process server's connections). */
int gs_ps_prepare_one(const gs_sync_config *c, bool host_server, ps_worker_state **out, gs_err *e);
/* Create and bind the in-process server (its kernels a clone of c->k);
 * it serves once gs_ps_serve started its thread. */
int gs_ps_host_server(ps_worker_state *st, const gs_sync_config *c, gs_err *e);
int gs_ps_serve(ps_worker_state *st, gs_err *e);
/* Rank 0 of one server: start it (the thread, or the dedicated process's
 * address) and write its address to ep. */
int gs_ps_start(ps_worker_state *st, const gs_sync_config *c, char ep[GS_ENDPOINT_MAX], gs_err *e);
/* Stop what st runs (orderly: wait for the server to finish, up to
 * wait_ms for a dedicated one, and report its failure in e; kill_child:
 * a dedicated one that never served) and free st. */
int gs_ps_end(ps_worker_state *st, bool orderly, bool kill_child, int wait_ms, gs_err *e);

/* join.c: open one server's worker (takes st over, also when it fails). */
int gs_ps_open_one(ps_worker_state *st, const gs_sync_config *c, ps_worker **out, gs_err *e);

/* client.c: one server's worker's step, as the backend drives it (sync.h's
 * order is the backend's to check): begin, a bucket ready (with overlap:
 * pushed, and what came back applied), then push the rest, wait for every
 * server's parameters (gs_ps_drain applies what arrived, without waiting),
 * and finish (t0: when the step's wait began, for wait_s). */
int gs_ps_begin(ps_worker *s, int64_t step, gs_err *e);
int gs_ps_ready(ps_worker *s, int bucket, gs_err *e);
int gs_ps_push_rest(ps_worker *s, gs_err *e);
int gs_ps_drain(ps_worker *s, gs_err *e);
/* A server whose connection dropped and has not come back in grace_s:
 * dead (a summation server's process: sched.c), named. */
int gs_ps_check_up(ps_worker *s, double grace_s, gs_err *e);
int gs_ps_finish(ps_worker *s, double t0, gs_sync_stats *st, gs_err *e);
/* Goodbye to the server (or an abort), then free s and its state. */
int gs_ps_close(ps_worker *s, bool ok, gs_err *e);
/* gs_ps_close's first half, which waits for no server to finish: ssp's
 * last update, the goodbye, the socket closed. A rank of a sharded ps says
 * it to every server before it waits for its own to finish (a server
 * whose ranks leave at different times, as stale models let them, must
 * hear every goodbye). gs_ps_close then does the rest. */
int gs_ps_goodbye(ps_worker *s, bool ok, gs_err *e);
/* free s, its socket closed or never opened, and its state */
void gs_ps_free(ps_worker *s);
/* the kernels' sticky error, with the rank, the step and what was done */
int gs_ps_kcheck(ps_worker *s, const char *what, gs_err *e);
/* Bytes this worker (and a server beside it) holds (ps.h gs_ps_memory). */
void gs_ps_worker_memory(const ps_worker *s, uint64_t *device_bytes, uint64_t *host_bytes);

/* topk_push.c: sparse pushes (CPU, fp32). open: the residual and the
 * payload buffer when c.compress is topk (nothing otherwise); free: them.
 * stage: bucket b's sparse payload of this step (s->topk_kept[b] entries),
 * the residual updated; staged: the same bytes again, for a push sent
 * again. */
int gs_ps_topk_open(ps_worker *s, gs_err *e);
void gs_ps_topk_free(ps_worker *s);
const void *gs_ps_topk_stage(ps_worker *s, int b);
const void *gs_ps_topk_staged(const ps_worker *s, int b);

/* powersgd_push.c: a bucket in parts (powersgd_recv.c draws the
 * exchange). open: the state when c.compress is powersgd (nothing
 * otherwise); free: it. push: bucket b's first parts, in a step that
 * compresses (gs_powersgd_active); sum: a Params message that carries a
 * part's sum (Params.part), checked, and what it lets this rank do next
 * (Q out, or its error feedback). */
int gs_ps_psgd_open(ps_worker *s, gs_err *e);
void gs_ps_psgd_free(ps_worker *s);
int gs_ps_psgd_push(ps_worker *s, int b, gs_err *e);
int gs_ps_psgd_sum(ps_worker *s, gs_wire_msg *m, gs_err *e);

/* push_msg.c: the Push messages to this worker's server. push: bucket b of
 * this step from data (its wire dtype, or topk's payload), zero-copy (the
 * inflight counter holds it until ZeroMQ lets go), again after a dropped
 * connection; part: part `part` of bucket b (count floats at data, copied) */
int gs_ps_send_push(ps_worker *s, int b, const void *data, bool again, gs_err *e);
int gs_ps_send_part(ps_worker *s, int b, int part, const float *data, size_t count, gs_err *e);

/* shard.c: the key ranges: K contiguous ranges of the n parameters, and
 * every bucket's pieces, one per range it overlaps. */
typedef struct ps_keys {
  int K, nb;
  size_t *lo;              /* [K + 1]: server k owns [lo[k], lo[k + 1]) */
  gs_bucket **sub;         /* [K]: server k's pieces, offsets within its range,
                              in readiness order */
  int *nsub;               /* [K] */
  int *first;              /* [nb + 1]: bucket b is pieces first[b] .. first[b + 1] - 1 */
  int *pk, *pj;            /* a piece: its server, its index among that server's pieces */
  /* summation servers (split.c): server k's pieces lie anywhere in the flat
   * buffers, so its job is a compact view of them; NULL: the ranges above */
  float **vbuf;            /* [2K]: server k's parameters (vbuf[k]; its sums once
                              training) and gradients (vbuf[K + k]) */
  size_t *vn;              /* [K]: elements of server k's view */
  int *rank_of;            /* [K]: the rank whose thread runs server k, -1: a process of
                              its own (opts.server_eps[k]); NULL: flat.c's placement */
  gs_kernels *vk;          /* what vbuf was allocated with */
} ps_keys;

/* split.c: BytePS' partitions, in priority order (the lowest offset, the
 * earliest layer, first), each split over every server in its share. */
typedef struct ps_part {
  size_t offset, count;    /* in the flat buffers */
  int bucket;              /* the bucket it is part of */
  int first, npieces;      /* its pieces: ps_split.piece[first .. first + npieces) */
} ps_part;
typedef struct ps_piece {
  int server, index;       /* bucket `index` of server `server`'s view */
  size_t offset, count;    /* in the flat buffers */
  size_t at;               /* in the server's view */
} ps_piece;
typedef struct ps_split {
  size_t part_bytes;       /* the most bytes of a partition */
  ps_part *part;
  int nparts;
  ps_piece *piece;
  int npieces;
} ps_split;
/* The servers (spare processes first, then one per workers' host with a
 * share), the partitions and the views, for c and its opts. */
int gs_ps_split_plan(ps_keys *ks, ps_split *sp, const gs_sync_config *c, gs_err *e);
void gs_ps_split_free(ps_split *sp);
/* params (the flat buffer) into the parameter views, or (out) back */
void gs_ps_split_copy(const ps_keys *ks, const ps_split *sp, float *params, bool out);

/* sched.c: a summation session's steps (the worker side of BytePS): which
 * partition goes next (priority, credit), the gradients into the views,
 * the timeline's partitions, the optimizer on the sums. */
typedef struct ps_sum ps_sum;
/* The kernel's buffers (SO_SNDBUF, SO_RCVBUF) of every summation
 * connection, workers' and servers' alike: 16 KiB, so that one flow's TCP
 * window stays a few packets. A link that the pushes of n workers (or the
 * answers of k + n servers) converge on queues the sum of their windows;
 * with the kernel's 4 MiB buffers that overflows a switch's queue (the
 * emulated links': 10 ms of the rate beside tbf's 96 KiB bucket, 221 KB at
 * 100 Mbit/s), drops the tails of partitions, and every such drop waits
 * for TCP's 200 ms retransmission timeout (incast). Measured on 4 + 4
 * emulated hosts at 100 Mbit/s: 32 KiB still lost a quarter of the links'
 * time to it, 16 KiB none (docs/byteps.md). It caps a connection at 16 KiB
 * per round trip: 130 Mbit/s at 1 ms, which a job of many connections per
 * link shares anyway. It also makes sched.c's credit meaningful: what
 * ZeroMQ let go is on the wire. */
#define GS_PS_SUM_SOCKBUF (16 << 10)
int gs_ps_sum_open(const gs_sync_config *c, const ps_keys *ks, const ps_split *sp,
                   ps_worker **w, ps_sum **out, gs_err *e);
void gs_ps_sum_free(ps_sum *s);
void gs_ps_sum_begin(ps_sum *s, int64_t step);
/* bucket b's partitions may go (all: every bucket's) */
int gs_ps_sum_ready(ps_sum *s, int bucket, gs_err *e);
int gs_ps_sum_ready_all(ps_sum *s, gs_err *e);
/* what came back in, what may go next out */
int gs_ps_sum_pump(ps_sum *s, gs_err *e);
/* partitions ready that the credit holds back (ZeroMQ letting go of a push
 * wakes no poll: the caller looks again soon) */
bool gs_ps_sum_held(const ps_sum *s);
/* every partition's sums are in: the step's update of this rank's params */
int gs_ps_sum_update(ps_sum *s, gs_sync_stats *st, gs_err *e);
/* bytes it holds (the optimizer's state) */
uint64_t gs_ps_sum_bytes(const ps_sum *s);
/* placement.c: what the ps runs as opts place its servers (gs_backend.caps),
 * and what opts ask (gs_backend.asks: the consistency model). */
void gs_ps_caps(const void *opts, gs_caps *c);
void gs_ps_asks(const void *opts, gs_want *w);

/* The ps backend of K servers where every rank pushes (flat.c); ps.h's
 * gs_ps_backend is hostagg.c, which runs this one alone or, with hosts of
 * several ranks, among the hosts' first ranks. */
extern const gs_backend gs_ps_flat_backend;
void gs_ps_flat_memory(const gs_sync *s, uint64_t *device_bytes, uint64_t *host_bytes);
/* Why a session of gs_ps_flat_backend is about to abort: every server hears
 * it with the abort and passes it on to the other ranks. */
void gs_ps_flat_why(gs_sync *s, const char *why);

int gs_ps_keys_plan(ps_keys *ks, int K, const gs_sync_config *c, gs_err *e);
void gs_ps_keys_free(ps_keys *ks);
/* Server k's view of the job: its range of the buffers, its pieces. */
gs_sync_config gs_ps_keys_view(const ps_keys *ks, const gs_sync_config *c, int k);

#endif
