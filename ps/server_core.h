/* server_core.h: internal to ps/: what the server's files share.
 * server.c runs the loop and the steps (pushes, the update, deadlines);
 * server_join.c the joining (Init, hellos, the Welcome) and the answer to
 * ranks that join a job that already failed; server_send.c the Params
 * back; server_peers.c, below all three, the peers' identities, warnings
 * and errors. */
#ifndef GS_PS_SERVER_CORE_H
#define GS_PS_SERVER_CORE_H

#include <stdatomic.h>

#include "compress/compress.h"
#include "proto/proto.h"
#include "ps/server_reduce.h"
#include "ps/ps.h"
#include "ps/server.h"

#define MAX_PENDING 4096   /* hellos kept before Init arrives */
#define WARN_MAX 20        /* dropped-message warnings printed before going quiet */
#define MAX_WORLD 65536
#define SLICE_MS 200       /* longest wait between looks at the stop flag */

typedef struct peer {
  uint8_t id[256];
  size_t idlen;
  bool known, bye, inproc;
  int pushed;            /* buckets pushed in the current round */
  int64_t last_step;     /* last step this rank completed (-1: none) */
} peer;

typedef struct pending_hello {
  uint8_t id[256];
  size_t idlen;
  uint32_t rank;
  uint64_t count;
  uint32_t nbuckets;
} pending_hello;

struct gs_ps_server {
  gs_ps_server_opts o;
  gs_kernels *k;
  void *sock;
  bool cpu;
  char tcp_ep[GS_ENDPOINT_MAX];
  int timeout_ms;
  bool failed;

  /* from Init */
  bool have_init, running;
  int world, nb;
  int average_over;           /* the mean's divisor: world, or the ranks the
                                 hosts' pushes summed */
  size_t n, maxcnt, wsize;
  size_t *off, *cnt;
  gs_sgd sgd;
  gs_dtype wire;
  bool sum_only;
  double topk;                /* pushes are sparse, this share of each bucket
                                 (topk_recv.c); 0: dense */
  /* --compress powersgd (powersgd_recv.c; psgd NULL: none) */
  gs_powersgd *psgd;          /* the parts' layout and the rebuild */
  uint64_t psgd_start;        /* the first step that travels in parts */
  size_t *psgd_n;             /* [nb * 3]: floats of bucket b's part k + 1 */
  size_t *psgd_off[3];        /* [nb]: bucket b's part k + 1 in its sums */
  gs_ps_reduce *psgd_red[3];  /* each part's sums */
  uint8_t *psgd_got;          /* [world * nb]: parts pushed this round (bits 1 << part) */
  uint8_t *psgd_done;         /* [nb]: parts summed this round (bits 1 << part) */
  float *psgd_grad;           /* [n]: the rebuilt sums, the optimizer's gradient */

  peer *peers;
  pending_hello *pend;
  int npend, nknown;
  double contact_t0;

  float *master;              /* the fp32 parameters (device) */
  gs_ps_reduce *red;          /* the pushes' sums */
  gs_update u;                /* the optimizer and the loss scaler */
  float *hout;                /* host mirror of what goes out (devices only) */
  void *wout;                 /* parameters in the wire dtype, as they go out
                                 (fp16 / bf16 training only) */

  /* the current round */
  bool in_round, stepped;
  uint64_t step, last_step;
  double round_t0;
  int round_rank;             /* whose push started the round */
  uint8_t *got;               /* [world * nb] */
  int complete;
  atomic_int *inflight;       /* [nb * world]: bucket b's outgoing messages to rank r
                                 that ZeroMQ still holds, at b * world + r */
  atomic_int inflight_welcome;
  bool last_skipped;          /* the verdict on the last finished step */
  Gradsync__Params last_cost; /* what its last Params reported, for answers again */
  double reduce_s, update_s;  /* this step's, for the last Params */
  uint64_t sent, recv;        /* this step's wire bytes (inproc excluded) */

  int nbye;
  double bye_t0;

  /* ssp, async, backup workers (stale.c) */
  gs_ps_sync cons;
  bool stale;
  uint64_t updates;           /* updates applied: the parameters' version */
  bool version_skipped;       /* that version's update overflowed (loss scaling) */
  int depth;                  /* pushes held per rank (ssp: K + 2; else 1) */
  struct stale_slot *slots;   /* [world * depth] */
  float *held;                /* [world * depth * n] the held gradients (device) */
  float *acc;                 /* [n] their sum (device) */
  int alive;                  /* ranks that have not said goodbye */

  atomic_int stop;            /* gs_ps_server_stop */
  double stop_t0;             /* when this thread saw it (0: not yet) */
  _Atomic uint64_t dev_bytes, host_bytes;
  unsigned long warnings;
};

/* Fail the job: fill e, tell the workers, return the code. */
#define FAIL(s, e, code, ...) \
  (GS_FAIL((e), (code), __VA_ARGS__), gs_pss_broadcast_error((s), (e)), (code))

/* server_peers.c */
void gs_pss_release_count(void *data, void *hint);   /* zmq free callback: one less held */
void gs_pss_warn(gs_ps_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_pss_broadcast_error(gs_ps_server *s, const gs_err *e);
int gs_pss_find_peer(const gs_ps_server *s, const zmq_msg_t *id);
/* Whether a message's routing identity fits a peer's id field: libzmq
 * caps the identities it makes at 255 bytes, but a raw ZMTP client may
 * announce a longer one. Checked before a message is looked at. */
bool gs_pss_id_fits(const gs_wire_msg *m);
/* copy a routing identity that fits */
void gs_pss_set_id(uint8_t *dst, size_t *dlen, const zmq_msg_t *id);
void gs_pss_send_error(gs_ps_server *s, const peer *p, const gs_err *e);
int gs_pss_kernel_check(gs_ps_server *s, const char *what, gs_err *e);
void *gs_pss_dev_alloc(gs_ps_server *s, size_t bytes);

/* server_send.c: the parameters (or sums) of bucket b to every rank, or
 * to rank only (>= 0) again; last: this message completes the step, so it
 * carries the server's cost of the step. gs_pss_wait_inflight: until
 * ZeroMQ holds nothing of bucket b (nor of the Welcome's parameters). */
int gs_pss_send_bucket(gs_ps_server *s, int b, bool skipped, bool last, int only, gs_err *e);
int gs_pss_wait_inflight(gs_ps_server *s, int b, gs_err *e);

/* stale.c: the ssp / async / backup server (gs_ps_sync), beside server.c's
 * bsp rounds. A push (checked by server.c: bucket, sizes, dtype, payload)
 * is copied out at once (the worker may compute on); an update is applied
 * when the model says, its parameters sent (ssp: to every rank; async,
 * backup: as the answer to each push it resolves). stale_bye: rank r left
 * (backup: fewer gradients can make an update). */
int gs_pss_stale_init(gs_ps_server *s, gs_err *e);
int gs_pss_stale_push(gs_ps_server *s, int r, gs_wire_msg *m, gs_err *e);
int gs_pss_stale_bye(gs_ps_server *s, int r, gs_err *e);
void gs_pss_stale_free(gs_ps_server *s);

/* topk_recv.c: rank r's push m of a topk job (bucket, step, dtype checked)
 * checked as sparse and its payload replaced by the dense bucket; a sparse
 * push in a dense job fails too. */
int gs_pss_topk_dense(gs_ps_server *s, int r, gs_wire_msg *m, gs_err *e);

/* powersgd_recv.c: init: from rank 0's Init (no PowerSGD: nothing);
 * push: rank r's part push m (bucket and step checked by server.c), *done
 * when bucket b's sum is rebuilt in gs_pss_psgd_grad; step: whether a
 * step travels in parts; grad: the rebuilt sums (a flat buffer of n) in
 * such a step, else NULL; round: a new round. */
int gs_pss_psgd_init(gs_ps_server *s, const Gradsync__Init *in, gs_err *e);
int gs_pss_psgd_push(gs_ps_server *s, int r, gs_wire_msg *m, bool *done, gs_err *e);
bool gs_pss_psgd_step(const gs_ps_server *s, uint64_t step);
float *gs_pss_psgd_grad(gs_ps_server *s, int b);
void gs_pss_psgd_round(gs_ps_server *s);
void gs_pss_psgd_free(gs_ps_server *s);

/* server_join.c */
int gs_pss_on_init(gs_ps_server *s, gs_wire_msg *m, gs_err *e);
int gs_pss_on_hello(gs_ps_server *s, gs_wire_msg *m, gs_err *e);
void gs_pss_tell_latecomers(gs_ps_server *s, const gs_err *e);

#endif
