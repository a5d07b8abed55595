/* allreduce.h: the contract of the allreduce part: all-reduce of flat
 * buffers of numbers (training's fp32 gradients, on the wire in fp32, fp16
 * or bf16; the collective benchmark's fp64 and int32 too), as
 * DistributedDataParallel does it, and the other collectives.
 *
 * Two backends of worker/sync.h live here:
 *   ring  our own, over ZeroMQ: a communicator that knows no algorithm
 *         (comm.c) and a table of algorithms over it (algos.c: the ring,
 *         recursive doubling, direct exchange, shared memory), with
 *         allreduce/backend.c for buckets, overlap, the optimizer and
 *         --compress powersgd (compress/compress.h over the ring's
 *         all-reduce);
 *   nccl  the ring on GPUs (allreduce/nccl/, built where NCCL is found).
 * Both are handed to the launcher as a gs_backend; the training loop never
 * sees anything below sync.h.
 *
 * Below the backends, the bare ZeroMQ communicator ("the ring": its two
 * neighbours carry the handshake and the ring algorithm) is usable on its
 * own (the tests and the collective benchmark drive it directly):
 *
 *     gs_comm_prepare   every rank: bind the socket the LEFT neighbour
 *                       connects to, return its endpoint
 *     (exchange endpoints: the launcher's rendezvous, or a test's pipes)
 *     gs_comm_connect   connect to the RIGHT neighbour (endpoints[rank+1])
 *                       and compare configurations with every rank
 *     gs_comm_allreduce dst = sum over ranks of src (src == dst allowed),
 *                       as often as needed, any count <= max_count
 *     gs_comm_reduce_scatter, gs_comm_all_gather, gs_comm_broadcast,
 *     gs_comm_reduce    the other collectives, on the same ring (below)
 *     gs_comm_close
 *
 * Buffers handed to gs_comm_allreduce must be host-addressable (they are
 * sent zero-copy); the math goes through the gs_kernels table.
 *
 * Determinism: element i is always summed in the same order (segment j
 * starts at rank j and travels right), whatever the timing; after the
 * all-gather every rank holds the same bits. */
#ifndef GS_ALLREDUCE_H
#define GS_ALLREDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "worker/sync.h"

/* ---- the backends of sync.h ---- */

/* "ring" (the user's word): the all-reduce backend on host memory, over
 * the ZeroMQ communicator and its algorithms. prepare() binds
 * tcp://cfg->host:*, open() connects to endpoints[(rank+1) % world]. No
 * bootstrap blob. Its options of its own are gs_allreduce_opts (cfg.opts;
 * NULL: every step all-reduced by the ring algorithm, the resend log kept);
 * NCCL's backend takes them too (and runs no periodic averaging). */
extern const gs_backend gs_allreduce_backend;

/* "nccl": the ring on GPUs through NCCL (allreduce/nccl/nccl.c), as DDP does.
 * Declared in every build: where NCCL or CUDA was not found (nccl/nonccl.c),
 * prepare() and open() fail with GS_EDEVICE saying so. bootstrap() on rank
 * 0 writes NCCL's unique id (128 bytes) into the blob. The config must
 * carry device (this rank's GPU), local_rank / local_world, and k, params,
 * grads and buckets on that GPU (a CUDA table). */
extern const gs_backend gs_nccl_backend;

/* What the all-reduce family's options ask (gs_backend.asks of the CPU
 * ring's backend and NCCL's, which both take gs_allreduce_opts): the
 * consistency model, every step or periodic averaging. */
void gs_allreduce_asks(const void *opts, gs_want *w);
/* What the nccl backend runs (gs_backend.caps; in every build, so the
 * command line can refuse before any rank loads CUDA): NCCL's all-reduce
 * of model buffers on GPUs, every step, no compression but 16-bit
 * traffic. */
void gs_nccl_caps(const void *opts, gs_caps *c);

/* NCCL runs one rank per GPU: with local_world ranks on this host and
 * ngpus GPUs visible, fail with a message that says what to do instead
 * (--mode=ps shares a GPU) before NCCL reports a duplicate GPU or hangs.
 * Pure function (no CUDA call), so CPU tests cover the messages. */
int gs_nccl_check_gpus(int rank, int local_rank, int local_world, int device, int ngpus,
                       gs_err *e);

/* ---- the bare ZeroMQ ring ---- */

typedef struct gs_comm gs_comm;

/* The bare ring under a session the ring backend opened (NULL for any
 * other session): the collective benchmark runs the other collectives on
 * it, between steps (the session's thread is idle then). */
gs_comm *gs_allreduce_comm(gs_sync *s);

#define GS_COMM_NO_SMALL SIZE_MAX

/* Which algorithm a collective runs: a row of the table in
 * allreduce/algos.c, which has them all (each drawn in a file of its own:
 * ring_pipe.c and ring_small.c, rd.c, direct.c, shm.c, hier.c; --algo's
 * words ring, rd, direct, shm, hier, auto; what each is, and when auto
 * picks it, is written there). An algorithm is its row's number, which
 * the handshake compares: gs_algo_parse and gs_algo_name go between
 * numbers and words. The rows the launcher names are below, at numbers
 * that never change; the zero value is the ring, so every existing caller
 * keeps it. Every algorithm gives every rank the same bits, and the same
 * bits run after run. */
typedef int gs_algo;
enum { GS_ALGO_RING = 0, GS_ALGO_AUTO = 3, GS_ALGO_SHM = 4, GS_ALGO_HIER = 5 };

/* Where auto leaves recursive doubling for the ring, in float32 bytes (as
 * small_bytes, so fp16 and fp32 pick alike): the largest size at which rd
 * was faster than the ring at both world 2 and world 4 (direct was never
 * faster than rd at world 4), measured on a 2-core machine over loopback
 * with
 *   bench --mode=ring --collective allreduce -b 8 -e 4M --world W --algo A
 * for W in 2, 4 and A in ring, rd, direct, the runs interleaved, the
 * median of 3 per size. rd moves log2(N) x the buffer per rank against the
 * ring's 2(N-1)/N, so at larger worlds the crossover comes sooner: measure
 * again before trusting it there. */
#define GS_ALGO_AUTO_MAX_BYTES ((size_t)256 << 10)

/* The row's word ("ring", "rd", ...; "unknown" for no row). */
const char *gs_algo_name(gs_algo a);
/* The word's algorithm, or -1. */
int gs_algo_parse(const char *s);
/* Every row's word, as a usage message lists them ("ring, rd, ... or
 * auto"), cut at cap. */
void gs_algo_names(char *buf, size_t cap);
/* What the ring's all-reduce of count elements runs: under the ring's
 * algorithm, a row that runs once it is ready (shm on one host, hier on
 * several), else what the requested row runs at that size (auto and shm:
 * recursive doubling up to GS_ALGO_AUTO_MAX_BYTES, the ring above; hier:
 * the ring; the others: themselves); world 1 has nothing to exchange
 * (ring). */
gs_algo gs_comm_algo(const gs_comm *r, size_t count);

/* The all-reduce backend's own options (gs_sync_config.opts). */
typedef struct gs_allreduce_opts {
  gs_algo algo;             /* --algo: training runs the ring (0), or hier when this
                               says hier or auto (on hosts of several ranks); the
                               collective benchmark runs this one */
  bool no_resend;           /* --no-resend: gs_comm_opts.no_resend */
  int period;               /* --ring-period H > 1: periodic averaging, PyTorch's
                               PostLocalSGDOptimizer + PeriodicModelAverager(period=H,
                               warmup_steps=0): every rank steps on its own gradient,
                               and after the steps t with t % H == 0 the parameters
                               are averaged over the ranks (divided by world, then
                               all-reduced); 0 or 1: gradients all-reduced every
                               step (DDP) */
} gs_allreduce_opts;

typedef struct gs_comm_opts {
  int rank, world;
  int timeout_ms;            /* every receive; <= 0: 30 s */
  uint64_t job;              /* token every message carries */
  const char *host;          /* address to bind ("127.0.0.1" when NULL) */
  gs_cred cred;              /* the job's credential (proto.h) */
  gs_kernels *k;             /* the math (adds, conversions, copies) */
  gs_dtype wire;             /* dtype of chunks on the wire (F32, F16, BF16;
                                F64 and I32: buffers of that type, for the
                                collective benchmark) */
  size_t max_count;          /* largest collective, elements (sizes staging) */
  gs_algo algo;              /* 0: the ring; every rank must pass the same
                                (the handshake checks it) */
  /* Tuning; 0 picks the default, which the environment can override
   * (GS_RING_CHUNK, GS_RING_SMALL, GS_RING_INFLIGHT, GS_RING_SPIN_US,
   * GS_RING_IO_THREADS, GS_RING_SOCKBUF,
   * in bytes / a count). Every rank must use the same chunk and small sizes:
   * the handshake checks it. */
  size_t chunk_bytes;        /* payload bytes per chunk (default 512 KiB) */
  size_t small_bytes;        /* at most this many float32 bytes: all-gather
                                of whole vectors, then a local sum (half the
                                hops, (N-1)/2 x the bytes per rank);
                                GS_COMM_NO_SMALL: never; default 64 KiB */
  int inflight;              /* chunks in flight per link (default 2) */
  int spin_us;               /* poll before sleeping on a receive, in
                                collectives up to 4 MiB (default 100; off
                                when local_ranks exceed the host's cores) */
  int local_ranks;           /* ranks sharing this host (0: unknown, as 1) */
  bool hier_auto;            /* with algo hier: run it only on several hosts
                                of several ranks (training's auto), else the
                                ring, and no error */
  const char *host_tag;      /* added to this rank's host key: ranks whose
                                tags differ are on different hosts to shm
                                and hier even on one machine (NULL: none) */
  int io_threads;            /* ZeroMQ I/O threads (default 1) */
  int sockbuf;               /* kernel SO_SNDBUF / SO_RCVBUF (default, or < 0:
                                the kernel's autotuning) */
  bool no_resend;            /* keep nothing to send again when a connection
                                drops and comes back (a reset then stops the
                                job; saves copying what is sent) */
  /* What the handshake also compares (the sync layer's bucket plan). */
  uint32_t nbuckets;
  uint64_t plan_hash;
  bool sum_only;
  /* Timeline ("reduce-scatter", "all-gather" on track 1); may be NULL. */
  gs_span_fn span;
  void *span_ctx;
} gs_comm_opts;

/* What one collective cost this rank. */
typedef struct gs_comm_stats {
  uint64_t bytes_sent, bytes_recv;  /* headers included */
  double reduce_s;                  /* summing (and rounding to the wire dtype) */
} gs_comm_stats;

/* Bind the socket the left neighbour will connect to and write its address
 * to endpoint (world 1: nothing to bind, endpoint ""). */
int gs_comm_prepare(const gs_comm_opts *o, gs_comm **out, char endpoint[GS_ENDPOINT_MAX],
                    gs_err *e);

/* Connect to endpoints[(rank+1) % world] and run the handshake: every rank's
 * configuration (world, max_count, wire dtype, chunk sizes, bucket plan)
 * travels once around the ring, so a mismatch is the same clear error on
 * every rank (GS_EMISMATCH) instead of a hang or a silent corruption. */
int gs_comm_connect(gs_comm *r, const char *const *endpoints, gs_err *e);
/* The job token, when it was not known at prepare (ranks > 0 learn it from
 * the rendezvous); call before gs_comm_connect. */
void gs_comm_set_job(gs_comm *r, uint64_t job);

/* dst[i] = sum over ranks of src[i], i < count. step and bucket label the
 * chunks (they are checked on receipt and named in errors). Every rank
 * calls it with the same count, step and bucket. st may be NULL; its
 * counters are ADDED to. On failure the right neighbour is told (so the
 * error travels around the ring) and the ring is unusable; ZeroMQ may still
 * hold parts of src/dst until gs_comm_close, so keep them alive until then. */
int gs_comm_allreduce(gs_comm *r, const void *src, void *dst, size_t count, int64_t step,
                      int bucket, gs_comm_stats *st, gs_err *e);
/* The same with another reduction (sum, prod, min or max; avg is the
 * caller's sum and post-division): every rank must pass the same op (each
 * chunk carries it; a mismatch is an error). Buffers hold elements of the
 * ring's wire dtype (fp32 under a 16-bit wire). Ops other than the sum, and
 * the fp64 / int32 wires, need a CPU kernels table. */
int gs_comm_allreduce_op(gs_comm *r, gs_redop op, const void *src, void *dst, size_t count,
                         int64_t step, int bucket, gs_comm_stats *st, gs_err *e);

/* ---- the other collectives on the same ring (ring_coll.c) ----
 * reduce_scatter and reduce take an op as gs_comm_allreduce_op. The layout of the parted collectives: count elements cut in world parts
 * in rank order, rank r's part at gs_comm_part(count, world, r) (the first
 * count mod world parts one element longer; parts may be empty when count <
 * world). Same contract as gs_comm_allreduce otherwise: every rank calls
 * with the same count, step and (for broadcast and reduce) root; on failure
 * the ring is unusable. Sums are in a fixed order, whatever the timing.
 *
 *   reduce_scatter  src: count elements; on return dst's part `rank`
 *                   (dst + off, len) holds that part's sum over ranks; the
 *                   rest of dst (count elements) holds partial sums.
 *                   src == dst allowed. The all-reduce's first phase.
 *   all_gather      src: this rank's part (len elements; src == dst + off
 *                   allowed); on return dst (count elements) holds every
 *                   rank's part, the same bits on every rank. Its second.
 *   broadcast       dst = root's src on every rank (src read only on root;
 *                   src == dst allowed): a chain root -> root+1 -> ...
 *   reduce          root's dst = sum over ranks of src: a chain root+1 ->
 *                   ... -> root, each hop adding its own; dst on the other
 *                   ranks is scratch (partial sums, or untouched). */
void gs_comm_part(size_t count, int world, int rank, size_t *off, size_t *len);
int gs_comm_reduce_scatter(gs_comm *r, gs_redop op, const void *src, void *dst, size_t count,
                           int64_t step, gs_comm_stats *st, gs_err *e);
int gs_comm_all_gather(gs_comm *r, const void *src, void *dst, size_t count, int64_t step,
                       gs_comm_stats *st, gs_err *e);
int gs_comm_broadcast(gs_comm *r, const void *src, void *dst, size_t count, int root,
                      int64_t step, gs_comm_stats *st, gs_err *e);
int gs_comm_reduce(gs_comm *r, gs_redop op, const void *src, void *dst, size_t count, int root,
                   int64_t step, gs_comm_stats *st, gs_err *e);

/* Make a gs_comm_allreduce running in another thread fail soon (within
 * ~50 ms) with GS_EINTR. */
void gs_comm_interrupt(gs_comm *r);

/* ok: orderly close. !ok: abort; the right neighbour gets an error message
 * naming `why` (may be NULL) so it does not wait for its timeout. Waits for
 * nothing ZeroMQ still holds of the caller's buffers: on return it holds
 * none. r may be NULL. */
void gs_comm_close(gs_comm *r, bool ok, const char *why);

/* For the program to call at start, where it runs the ring (the library
 * never changes process-wide settings on its own): ZeroMQ mallocs a buffer
 * for every chunk it receives, and glibc serves blocks of 128 KiB and more
 * with a fresh mmap (or trims the heap after they are freed), so every
 * received chunk would fault its pages in again, about a third of the
 * receive cost on loopback. This keeps them in the heap (mallopt), unless
 * GS_RING_MALLOPT=0. */
void gs_comm_tune_malloc(void);

/* The chunk size and small-message threshold the ring uses (after the
 * defaults and the environment), for reports. */
size_t gs_comm_chunk_bytes(const gs_comm *r);
size_t gs_comm_small_bytes(const gs_comm *r);

/* ---- what each collective is (coll.c) ---- */

/* The collectives, by nccl-tests' names. Over count elements in src and
 * dst (src == dst: in place), parts as gs_comm_part with count a multiple
 * of the world (equal parts):
 *   all_reduce      dst = sum over ranks of src
 *   reduce_scatter  dst's part `rank` = that part's sum (the rest unread)
 *   all_gather      dst = every rank's part of its src
 *   broadcast       dst = root's src
 *   reduce          root's dst = sum over ranks of src (others unread) */
typedef enum gs_coll {
  GS_COLL_ALL_REDUCE = 0, GS_COLL_REDUCE_SCATTER, GS_COLL_ALL_GATHER, GS_COLL_BROADCAST,
  GS_COLL_REDUCE
} gs_coll;

/* What an element of a rank's result holds (gs_coll_desc.holds): the
 * reduction over every rank, nothing defined, or (>= 0) that rank's own
 * contribution. */
enum { GS_HOLDS_REDUCED = -1, GS_HOLDS_NOTHING = -2 };

/* One row per collective, as nccl-tests' descriptors: everything about a
 * collective that is not how a backend runs it (each backend's runs are a
 * table of its own indexed by gs_coll: gs_comm_collective,
 * gs_nccl_collective). */
typedef struct gs_coll_desc {
  const char *name;       /* "all_reduce", "reduce_scatter", ... */
  bool parted;            /* each rank holds count / world of it (a size
                             is count x the dtype, count a multiple of N) */
  bool has_op, has_root;  /* reduces (gs_redop); has a root */
  const char *factor;     /* busbw = algbw x factor, in words ("2(n-1)/n") */
  double (*busbw)(int world);  /* that factor: what each link carries, as
                                  nccl-tests counts it (size: the full vector) */
  /* element i of rank me's result (part = count / world) */
  int (*holds)(size_t i, size_t part, int me, int root);
  const char *what;       /* what the reference check expects, in words */
} gs_coll_desc;

const gs_coll_desc *gs_coll_of(gs_coll c);   /* NULL if not a collective */
const char *gs_coll_name(gs_coll c);         /* "unknown" if none */
int gs_coll_parse(const char *s);            /* the names, and "allreduce"; -1 if none */
double gs_coll_busbw_factor(gs_coll c, int world);
/* a reduction (all_gather, broadcast: none) */
static inline bool gs_coll_has_op(gs_coll c) {
  const gs_coll_desc *d = gs_coll_of(c);
  return d && d->has_op;
}
/* broadcast, reduce */
static inline bool gs_coll_has_root(gs_coll c) {
  const gs_coll_desc *d = gs_coll_of(c);
  return d && d->has_root;
}

/* c on the bare ring (ring_coll.c), with op (where c reduces) and root
 * (where it has one): the function above for it; all_gather's input is
 * this rank's part of src. */
int gs_comm_collective(gs_comm *r, gs_coll c, gs_redop op, int root, const void *src, void *dst,
                       size_t count, int64_t step, gs_comm_stats *st, gs_err *e);

/* The collective benchmark's collectives on a session gs_nccl_backend
 * opened (sum_only, its wire dtype the benchmark's -d), between steps
 * (allreduce/nccl/nccl_coll.c): c on count elements of src into dst as gs_coll
 * says (src == dst: in place; count a multiple of the world for
 * reduce_scatter and all_gather; buffers of the wire dtype, or fp32 under
 * an fp16 / bf16 wire), through ncclAllReduce, ncclReduceScatter,
 * ncclAllGather, ncclBroadcast or ncclReduce with op as ncclSum, ncclAvg
 * (NCCL averages: no post-division after it), ncclProd, ncclMin or
 * ncclMax, and root for broadcast and reduce. iter is the step messages
 * name. Waits for the result as a step does (timeout, NCCL's asynchronous
 * errors, abort). Bad arguments: GS_EINVAL, nothing queued. Declared in
 * every build: without NCCL (nccl/nonccl.c) it fails with GS_EDEVICE. */
typedef int gs_nccl_collective_fn(gs_sync *s, gs_coll c, gs_redop op, int root, const void *src,
                                  void *dst, size_t count, int64_t iter, gs_err *e);
gs_nccl_collective_fn gs_nccl_collective;

#endif
