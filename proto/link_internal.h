/* link_internal.h: the state of a ring link (wire.h, gs_link), shared by
 * link.c (opening, receiving, errors) and link_send.c (sending, and the
 * log of what was sent that the right neighbour has not acknowledged). */
#ifndef GS_LINK_INTERNAL_H
#define GS_LINK_INTERNAL_H

#include "proto/wire.h"

#define HDR_MAX 4096           /* a chunk header is ~50 bytes; an Error ~1 KiB */
#define ARENA_BYTES (64 << 10) /* protobuf-c unpack of one header of HDR_MAX */
#define ACK_ARENA 1024         /* an Ack unpacks into far less */
#define GS_LINK_ACK_NOW (64u << 10) /* payloads acknowledged at once, not now and then */

/* A numbered message sent and not yet acknowledged: kept so that it can go
 * again after the connection to the right neighbour dropped. flag: the
 * payload still borrows the caller's buffer (zero-copy), whose flag stays
 * set until this copy is gone too. */
typedef struct gs_link_sent {
  uint64_t seq;
  zmq_msg_t hdr, pay;
  bool has_pay;
  atomic_uint *flag;
} gs_link_sent;

typedef struct gs_bump {
  uint8_t *buf;
  size_t cap, used;
} gs_bump;

struct gs_link {
  gs_link_cfg c;
  char host[256];
  void *ctx, *pull, *push, *mon, *rmon;
  gs_zap *zap;
  bool told_right;           /* the right neighbour has been told why we stop */
  int errors_sent;
  double left_gone_at;       /* > 0: the left neighbour closed its connection */
  uint32_t peer_fd[32];      /* open connections on the receiving socket */
  int npeers;
  unsigned dropped;          /* foreign messages, for the first few lines */
  atomic_int stop;           /* gs_link_interrupt */
  gs_wire_msg last;          /* the last message received (its env lives in the arena) */
  ProtobufCAllocator alloc;  /* bump allocator over arena */
  gs_bump arena;
  ProtobufCAllocator ack_alloc;
  gs_bump ack_arena;
  uint8_t ack_buf[ACK_ARENA];
  char left_id[32], my_id[32]; /* the left neighbour's and our routing ids */
  uint64_t rx_next;          /* the number expected next from the left */
  uint64_t rx_acked;         /* the last rx_next acknowledged */
  double acked_at;           /* when */
  uint64_t tx_seq;           /* the number of the last message sent right */
  bool right_dropped;        /* the right connection dropped: resend once it is back */
  unsigned resends;          /* times the log went again, for the first few lines */
  gs_link_sent *log;         /* ring buffer of unacknowledged messages */
  size_t log_cap, log_head, log_len;
  uint8_t hbuf[HDR_MAX];
};

void gs_bump_init(ProtobufCAllocator *a, gs_bump *b, uint8_t *buf, size_t cap);

/* Acknowledgements and reconnections of the right connection, without
 * waiting: forget what was acknowledged, and after a dropped connection
 * came back, send everything not acknowledged again. */
void gs_link_right_events(gs_link *l);
/* Acknowledge to the left neighbour what has arrived (best effort); now:
 * at once, else only when the last acknowledgement is old enough. */
void gs_link_ack(gs_link *l, bool now);
/* Free the log (gs_link_close). */
void gs_link_log_free(gs_link *l);

#endif
