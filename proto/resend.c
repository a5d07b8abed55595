/* resend.c: what a PUSH socket sent that its receiver may not have yet,
 * kept to send again when the connection drops and comes back (proto.h,
 * gs_resend).
 *
 * A PUSH socket's dial (dial.c) connects again after a drop, but the
 * frames already handed to the dropped TCP connection (both kernels'
 * buffers, a half-read message) are gone, and so is what waited in the
 * queue of a connection that is dialled afresh. So each message carries a number (Envelope.seq), the
 * sender keeps a copy of each until its caller knows the receiver had it
 * (gs_resend_forget), and after a reconnect it sends every kept one again,
 * in order. The receiver takes each number once and in order
 * (gs_resend_fresh): a copy it already has is dropped, and so is whatever
 * comes after a gap, since the copies bring it again behind the gap.
 *
 *   sender   1 2 3 4 5 | reset | 6 7        (4 5 lost with the connection)
 *   kept     1 . . . . . . . . . . . 7 ; after the reconnect 1..7 again
 *   receiver 1 2 3 . . . . . . . 6 7 (gap: dropped) 1 2 3 (copies) 4 5 6 7
 *
 * Payloads are kept as a shared reference when they are a received
 * message passed on (nobody writes it); borrowed, when the caller's memory
 * stays as sent until it says the receiver had it (gs_resend_acked) or the
 * collective ends (gs_resend_end copies what is still borrowed); else
 * copied. Copies go into buffers that are reused, so that a steady stream
 * neither allocates nor faults pages. */
#include "proto/proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_EVERY_S 0.02 /* how often waits look at the monitor */

typedef struct kept {
  uint64_t seq;
  size_t hlen, bytes;
  uint8_t *hdr;
  uint8_t *own;              /* a copy of the payload, from the pool */
  size_t own_cap;
  const uint8_t *borrowed;   /* or the caller's memory, unchanged until the end */
  zmq_msg_t shared;          /* or a reference to a received message */
  bool has_shared;
} kept;

typedef struct spare {
  uint8_t *p;
  size_t cap;
} spare;

struct gs_resend {
  void *sock;
  gs_dial *dial;             /* whose gs_dial_back says the connection came back */
  int rank, peer;
  const char *role;          /* "right", "mesh" */
  uint64_t seq;              /* the last number given */
  uint64_t begin;            /* gs_resend_begin's mark */
  bool enabled, keep, settle;
  kept *k;                   /* a FIFO: k[(head + i) % cap], i < n */
  size_t head, n, cap;
  spare *pool;
  size_t npool, pool_cap;
  double checked_at;
};

int gs_resend_open(gs_dial *dial, void *push, int rank, int peer, const char *role, bool keep,
                   gs_resend **out, gs_err *e) {
  gs_resend *s = calloc(1, sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the resend log", rank);
  s->sock = push;
  s->rank = rank;
  s->peer = peer;
  s->role = role;
  s->enabled = s->keep = keep;
  /* without a watched dial nothing is resent: a reset then stops the job,
   * as it would without this log */
  s->dial = gs_dial_watched(dial) ? dial : NULL;
  *out = s;
  return GS_OK;
}

static void put_spare(gs_resend *s, uint8_t *p, size_t cap) {
  if (!p) return;
  if (s->npool == s->pool_cap) {
    size_t nc = s->pool_cap ? 2 * s->pool_cap : 16;
    spare *np = realloc(s->pool, nc * sizeof *np);
    if (!np) {
      free(p);
      return;
    }
    s->pool = np;
    s->pool_cap = nc;
  }
  s->pool[s->npool++] = (spare){p, cap};
}

static uint8_t *get_spare(gs_resend *s, size_t bytes, size_t *cap) {
  for (size_t i = 0; i < s->npool; i++) {
    if (s->pool[i].cap < bytes) continue;
    uint8_t *p = s->pool[i].p;
    *cap = s->pool[i].cap;
    s->pool[i] = s->pool[--s->npool];
    return p;
  }
  *cap = bytes;
  return malloc(bytes ? bytes : 1);
}

static void drop_kept(gs_resend *s, kept *k) {
  free(k->hdr);
  put_spare(s, k->own, k->own_cap);
  if (k->has_shared) zmq_msg_close(&k->shared);
  memset(k, 0, sizeof *k);
}

void gs_resend_close(gs_resend *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) drop_kept(s, &s->k[(s->head + i) % s->cap]);
  for (size_t i = 0; i < s->npool; i++) free(s->pool[i].p);
  free(s->pool);
  free(s->k);
  free(s);
}

uint64_t gs_resend_next(gs_resend *s) { return s ? ++s->seq : 0; }

uint64_t gs_resend_last(const gs_resend *s) { return s ? s->seq : 0; }

int gs_resend_keep(gs_resend *s, uint64_t seq, const void *hdr, size_t hlen, const void *data,
                   size_t bytes, zmq_msg_t *fwd, bool borrow, gs_err *e) {
  if (!s || !s->keep || !s->dial) return GS_OK;
  if (s->n == s->cap) {
    size_t nc = s->cap ? 2 * s->cap : 64;
    kept *nk = calloc(nc, sizeof *nk);
    if (!nk) goto oom;
    for (size_t i = 0; i < s->n; i++) nk[i] = s->k[(s->head + i) % s->cap];
    free(s->k);
    s->k = nk;
    s->cap = nc;
    s->head = 0;
  }
  kept *k = &s->k[(s->head + s->n) % s->cap];
  memset(k, 0, sizeof *k);
  k->seq = seq;
  k->hlen = hlen;
  k->bytes = bytes;
  if (!(k->hdr = malloc(hlen ? hlen : 1))) goto oom;
  memcpy(k->hdr, hdr, hlen);
  if (bytes && fwd) {
    zmq_msg_init(&k->shared);
    k->has_shared = zmq_msg_copy(&k->shared, fwd) == 0;
    if (!k->has_shared) goto oom;
  } else if (bytes && borrow) {
    k->borrowed = data;
  } else if (bytes) {
    if (!(k->own = get_spare(s, bytes, &k->own_cap))) goto oom;
    memcpy(k->own, data, bytes);
  }
  s->n++;
  return GS_OK;
oom:
  return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory keeping a message for rank %d (%s) to "
                 "send again after a reconnect", s->rank, s->peer, s->role);
}

void gs_resend_begin(gs_resend *s, bool settles) {
  if (!s) return;
  s->begin = s->seq;
  /* what nobody will certify is not kept at all: the log stays bounded */
  s->keep = settles && s->enabled;
  s->settle = settles;
}

void gs_resend_acked(gs_resend *s, uint64_t seq) {
  while (s && s->n > 0 && s->k[s->head].seq <= seq) {
    drop_kept(s, &s->k[s->head]);
    s->head = (s->head + 1) % s->cap;
    s->n--;
  }
}

int gs_resend_end(gs_resend *s, gs_err *e) {
  if (!s) return GS_OK;
  if (s->settle) gs_resend_acked(s, s->begin);
  for (size_t i = 0; i < s->n; i++) {
    kept *k = &s->k[(s->head + i) % s->cap];
    if (!k->borrowed) continue;
    if (!(k->own = get_spare(s, k->bytes, &k->own_cap)))
      return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory keeping a message for rank %d (%s) "
                     "to send again after a reconnect", s->rank, s->peer, s->role);
    memcpy(k->own, k->borrowed, k->bytes);
    k->borrowed = NULL;
  }
  return GS_OK;
}

/* Send every kept message again, oldest first. The socket's queue has no
 * high-water mark, so this only queues. */
static int send_again(gs_resend *s, gs_err *e) {
  if (s->n == 0) return GS_OK;
  fprintf(stderr, "rank %d: the connection to rank %d (%s) dropped and came back; sending the "
          "last %zu message(s) again (numbers %" PRIu64 "..%" PRIu64 ")\n", s->rank, s->peer,
          s->role, s->n, s->k[s->head].seq, s->k[(s->head + s->n - 1) % s->cap].seq);
  for (size_t i = 0; i < s->n; i++) {
    kept *k = &s->k[(s->head + i) % s->cap];
    int rc = zmq_send(s->sock, k->hdr, k->hlen, k->bytes ? ZMQ_SNDMORE : 0);
    if (rc >= 0 && k->bytes && k->has_shared) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      rc = zmq_msg_copy(&m, &k->shared);
      if (rc == 0) rc = zmq_msg_send(&m, s->sock, 0);
      if (rc < 0) zmq_msg_close(&m);
    } else if (rc >= 0 && k->bytes) {
      rc = zmq_send(s->sock, k->own ? k->own : k->borrowed, k->bytes, 0);
    }
    if (rc < 0)
      return GS_FAIL(e, GS_EIO, "rank %d: sending message %" PRIu64 " again to rank %d (%s) "
                     "after a reconnect: %s", s->rank, k->seq, s->peer, s->role,
                     zmq_strerror(errno));
  }
  return GS_OK;
}

int gs_resend_check(gs_resend *s, bool now, gs_err *e) {
  if (!s || !s->dial) return GS_OK;
  double t = gs_now();
  if (!now && t - s->checked_at < CHECK_EVERY_S) return GS_OK;
  s->checked_at = t;
  return gs_dial_back(s->dial) ? send_again(s, e) : GS_OK;
}

int gs_resend_fresh(gs_seq_in *in, uint64_t seq, int rank, int from, const char *role) {
  if (seq == 0 || seq == in->last + 1) {
    if (seq) in->last = seq;
    return 1;
  }
  if (seq > in->last + 1 && in->warned != in->last + 1) {
    in->warned = in->last + 1;
    fprintf(stderr, "rank %d: message %" PRIu64 " from rank %d (%s) came after %" PRIu64 ": the "
            "ones between were lost with a connection; what follows is dropped until they come "
            "again\n", rank, seq, from, role, in->last);
  }
  return 0;
}
