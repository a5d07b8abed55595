/* ps.h: the parameter-server backend of sync.h: K servers in general
 * (flat.c), K = 1 being DataParallel's master, which this first part
 * describes; with opts.host_ranks L > 1 the hosts of L ranks first sum
 * their gradients in shared memory and push once per host (hostagg.c: the
 * contract of that at its top).
 *
 * Rank 0 hosts a server that receives every rank's gradients, sums them in
 * rank order, averages, runs SGD (the kernels' sgd, the same as a single
 * process) and sends each bucket's new parameters back. Workers are ZeroMQ
 * DEALERs, the server a ROUTER; one Envelope header + one raw payload frame
 * per message (proto/proto.h), payloads sent zero-copy.
 *
 *           rank 0 process                          rank r process
 *   +------------------------------+          +--------------------+
 *   | trainer -> DEALER --inproc-+ |   push   |  trainer -> DEALER |
 *   |                            v | <------- |                    |
 *   |          server thread: ROUTER  -------> |  params            |
 *   |   sum in rank order, /world, SGD  (tcp) +--------------------+
 *   +------------------------------+
 *
 * Where the server runs:
 *  - default: a thread inside rank 0 (opts.dedicated false), reducing on
 *    rank 0's device with its own kernels table, as DataParallel's GPU 0
 *    computes and reduces. Rank 0's worker reaches it over inproc://, so
 *    rank 0's gradients never cross the wire: the master receives and sends
 *    (N-1)*S per step, a worker S.
 *  - opts.dedicated: a separate process forked by rank 0's prepare() (before
 *    this backend creates any ZeroMQ context), reducing on the CPU as
 *    BytePS' summation servers do; it dies with rank 0 (PR_SET_PDEATHSIG;
 *    call prepare() from the thread that will call close()). Rank 0 is then
 *    a plain worker over TCP, and its end_step reports the server's share of
 *    the step in gs_sync_stats.server_* (has_server).
 *
 *  - opts.servers K > 1 (or opts.server_eps): a sharded ps (flat.c
 *    over shard.c's key ranges), K servers each owning a contiguous range
 *    of the parameters, as ps-lite and BytePS shard theirs; server k is a
 *    thread of rank
 *    gs_ps_server_rank(k) (its address that rank's endpoint from prepare()
 *    on), or, with opts.server_eps, a process a launcher started
 *    (gs_ps_serve_alone). Every rank runs one worker per server; the bits
 *    are those of one server. Loss scaling is refused (one verdict per
 *    step would need every server).
 *
 * The launcher's sequence (sync.h): prepare() on every rank (the endpoint
 * stays ""), bootstrap() on rank 0 starts the server and returns its TCP
 * address ("tcp://host:port", NUL included) as the blob, open() on every
 * rank connects. open() is a barrier: rank 0 sends Init (world, sizes,
 * buckets, SGD, wire dtype, loss scale, its initial parameters), every
 * other rank Hello (its sizes); once all are in and agree, the server
 * answers every rank with Welcome + rank 0's parameters, which every rank
 * copies (all ranks start bitwise identical, as DDP broadcasts rank 0's
 * state). A rank whose sizes differ makes open() fail on every rank with
 * both sizes named.
 *
 * open() takes the prepared state over, also when it fails (do not call
 * discard() after open()). bootstrap() writes at most GS_BOOTSTRAP_MAX
 * bytes to blob and sets *len.
 *
 * One step: workers push each bucket (after backward, or as soon as it is
 * ready with cfg.overlap) in cfg.wire; the server adds pushes of a bucket
 * in rank order as they become contiguous (same bits whatever the arrival
 * order), then
 *   fp32, no loss scaling:  per bucket: x 1/world, sgd, send parameters;
 *   loss scaling (fp16/bf16 wire, or a scale != 1 or dynamic): once every
 *     bucket is in: x 1/(world*scale), inf/NaN check of the whole step
 *     (the fp32 sum must also fit the wire dtype, as the ring's sum must),
 *     gs_scaler_update; skip (Params.skipped, no payload) or sgd + send;
 *     every Params carries the next scale;
 *   cfg.sum_only:  no averaging, no optimizer: the fp32 sum is sent back.
 * With cfg.compress topk:F (one flat bsp server, fp32, CPU) each push holds
 * only its bucket's largest entries of gradient + the rank's residual
 * (topk_push.c); the server checks it and makes it dense (topk_recv.c)
 * before the sum, and all else is as above.
 * Parameters go back in the wire dtype (fp16 / bf16 training halves the
 * pull as it halves the push): the fp32 master weights live on the server,
 * beside the only optimizer, and workers compute with the low-precision
 * copy anyway. --save-params on a worker therefore saves that copy.
 * Momentum follows torch.optim.SGD: the buffer starts at the first step
 * that is not skipped.
 *
 * Faults: every wait has cfg.timeout_ms. A rank missing from a step makes
 * the server fail the job with "rank 2 sent no gradients for step 14
 * bucket 3 in 60.0 s" (every missing rank named) and send Error to the
 * others; workers wait a quarter longer than the server, and a second more,
 * so that its named error reaches them first, then fail on their own ("no
 * parameters from the ps server ..."). Malformed or foreign messages from an unknown sender
 * are dropped with a warning on stderr; from a registered rank they fail
 * the job naming that rank. */
#ifndef GS_PS_H
#define GS_PS_H

#include <stdint.h>

#include "worker/sync.h"

/* The ps consistency model (ps/stale.c; docs/stragglers.md):
 *   bsp       every update waits for every rank's gradient of that step
 *             (DataParallel; the default, the server of server.c);
 *   ssp:K     stale-synchronous parallel (Ho et al. 2013): update s still
 *             sums every rank's step-s gradient in rank order, but a worker
 *             starts step s+1 with whatever version it holds as long as it
 *             is at least s+1-K (at most K updates missing), so a fast
 *             worker runs up to K steps ahead of the slowest; K = 0 is bsp;
 *   async     each worker's gradient is applied alone as it arrives (one
 *             SGD step with that gradient), and the worker gets the new
 *             parameters back (Downpour);
 *   backup B  (with bsp) each update uses the first world-B gradients
 *             computed on the current version to arrive, averaged over
 *             them; later ones are dropped and their worker gets the
 *             current parameters (Chen et al. 2016); B = 0 runs this
 *             machinery with every gradient, the same bits as bsp.
 * A gradient's staleness is the updates the server applied between the
 * version the worker computed it on and its own update. */
typedef enum gs_ps_model { GS_PS_BSP = 0, GS_PS_SSP = 1, GS_PS_ASYNC = 2 } gs_ps_model;
typedef struct gs_ps_sync {
  gs_ps_model model;
  int staleness;            /* ssp: K */
  bool backup_on;           /* backup workers asked for (--ps-backup, even 0) */
  int backup;               /* B */
} gs_ps_sync;
/* Whether s needs the stale server (anything but plain bsp). A zero
 * struct is plain bsp. */
static inline bool gs_ps_sync_stale(const gs_ps_sync *s) {
  return s->model != GS_PS_BSP || s->backup_on;
}
/* The consistency model as the capabilities' axis (sync.h gs_sync_kind). */
static inline gs_sync_kind gs_ps_sync_kind(const gs_ps_sync *s) {
  return s->model == GS_PS_SSP ? GS_SYNC_SSP : s->model == GS_PS_ASYNC ? GS_SYNC_ASYNC
         : s->backup_on ? GS_SYNC_BACKUP : GS_SYNC_BSP;
}

/* The ps backend's own options (gs_sync_config.opts; NULL: all zero,
 * DataParallel's one master in rank 0). They choose where the servers run
 * and how the workers reach them, and so what the backend runs (its
 * capabilities, gs_ps_backend.caps):
 *   one server in rank 0        everything: topk and PowerSGD pushes, every
 *                               consistency model, 16-bit traffic with loss
 *                               scaling, the collective benchmark, GPUs;
 *   dedicated                   the same, the server in a process of its own;
 *   servers K > 1, server_hosts fp32 gradients without loss scaling (one
 *                               inf/NaN verdict per step would need every
 *                               server), no compression, no collective
 *                               benchmark; server_hosts: over TCP;
 *   host_ranks L > 1            host memory (the CPU), no topk or PowerSGD
 *                               (every rank pushes its own compressed
 *                               gradient), no collective benchmark. */
typedef struct gs_ps_opts {
  bool dedicated;           /* --ps-dedicated: the one server in a process rank 0 forks */
  int servers;              /* --ps-servers K: servers sharing the parameters by key
                               range (0 or 1: one) */
  bool server_hosts;        /* --ps-server-hosts: the servers run in processes of their
                               own that a launcher started */
  const char *const *server_eps; /* their addresses (what open() connects to; a rank
                               learns them from its launcher); NULL: in the ranks */
  gs_ps_sync sync;          /* --ps-sync, --ps-backup (zero: bsp) */
  int host_ranks;           /* --ps-local-reduce: L > 1: ranks are L per host, host-major,
                               and each host sums its gradients in shared memory before
                               one push per host (hostagg.c); 0 or 1: every rank pushes */
  int average_over;         /* the mean's divisor when pushes are sums of several ranks
                               (hostagg.c sets it for its leaders' flat ps); 0: world */
  gs_applied_hook applied;  /* stale models: each update of the server this rank runs
                               (in-process, dedicated or a shard); zero: none */
  /* --ps-spare-hosts K: BytePS' summation servers (split.c, sched.c): K servers
   * in processes of their own (server_eps[0..K-1], on spare hosts) and one in
   * the first rank of each of the workers' hosts, sharing every partition of
   * the parameters as gs_ps_spare_shares says; they only sum, and every rank
   * runs the optimizer on the sums, as the all-reduce's ranks do. */
  bool summation;
  int spare;                /* K >= 0 spare hosts' servers */
  int hosts;                /* the workers' hosts n, ranks host-major (0: every rank
                               a host of its own) */
  double spare_share;       /* one spare server's share of the parameters (0: BytePS'
                               formula; at most 1/K) */
  size_t partition_bytes;   /* a partition's most bytes (0: gs_ps_partition_bytes' rule) */
  size_t credit_bytes;      /* most bytes pushed that ZeroMQ still holds, ByteScheduler's
                               credit (sched.c; 0: two partitions) */
} gs_ps_opts;
/* c's ps options, or the defaults when it has none. */
static inline gs_ps_opts gs_ps_opts_of(const gs_sync_config *c) {
  gs_ps_opts o = {0};
  if (c && c->opts) o = *(const gs_ps_opts *)c->opts;
  return o;
}

/* BytePS' partitions and split (gs_ps_partition_bytes, gs_ps_spare_shares):
 * worker/sync.h, where the cost model sees them too. */

/* The consistency model as users write it: "bsp", "ssp:K" (K in 0..1000)
 * or "async" into y's model and staleness (backup untouched); GS_EINVAL
 * naming --ps-sync. And back: "bsp", "ssp:2", "async", with "+backup:B"
 * when backup workers are on. */
int gs_ps_sync_parse(const char *spec, gs_ps_sync *y, gs_err *e);
void gs_ps_sync_text(const gs_ps_sync *y, char *buf, size_t cap);

/* The "ps" backend for the launcher. */
extern const gs_backend gs_ps_backend;

/* A ps server in a process of its own that a launcher started
 * (--ps-server-hosts: one of K, on an emulated host of its own): bind
 * tcp://host:*, write "E <endpoint> <pid>\n" on fd (then close it), serve one job
 * on the CPU (its token is rank 0's Init's) until every rank said goodbye
 * (GS_OK) or the job failed. max_elems: the most parameters it may own.
 * applied (NULL: none): a stale model's updates (sync.h). */
int gs_ps_serve_alone(const char *host, const gs_cred *cred, int timeout_ms, size_t max_elems,
                      const gs_applied_hook *applied, int fd, gs_err *e);
/* The same for a spare host's BytePS summation server (--ps-spare-hosts):
 * its connections' kernel buffers those of the workers' (sched.c). */
int gs_ps_serve_summation(const char *host, const gs_cred *cred, int timeout_ms,
                          size_t max_elems, int fd, gs_err *e);

/* Sharded ps (opts.servers K > 1, flat.c): the rank whose process runs
 * server k of K in a world (spread evenly: ranks 0..K-1 at K = world, the
 * first rank of each host when K hosts hold the ranks host-major). */
static inline int gs_ps_server_rank(int k, int world, int servers) {
  return (int)((int64_t)k * world / servers);
}
/* The server rank r runs, or -1 (k = ceil(r K / N) is the only candidate). */
static inline int gs_ps_server_of(int r, int world, int servers) {
  int k = (int)(((int64_t)r * servers + world - 1) / world);
  return k < servers && gs_ps_server_rank(k, world, servers) == r ? k : -1;
}
/* Whether rank r runs one of them. */
static inline bool gs_ps_runs_server(int r, int world, int servers) {
  return gs_ps_server_of(r, world, servers) >= 0;
}

/* Bytes the ps backend holds on this rank beyond the model's buffers: the
 * worker's staging buffers, plus on rank 0 with the in-process server the
 * server's master copy, momentum, accumulator, host mirrors and the peak of
 * pushes buffered while waiting for lower ranks (DataParallel's extra
 * memory on GPU 0). device: on the kernels' device (the same as host on the
 * CPU); host: host memory that is not the device's. s must be a ps sync. */
void gs_ps_memory(const gs_sync *s, uint64_t *device_bytes, uint64_t *host_bytes);

#endif
