/* base.h: the contract of base, the part below every other: the few
 * things every part of gradsync needs and none of them owns: an error
 * record, clocks, a hash, checked allocation, the interrupt flag every
 * wait polls, and the type of a job's credential (what proto/ derives from
 * it is proto's). It knows nothing of any other part.
 *
 * Errors: a function that can fail returns 0 on success or a negative
 * GS_E* code, and fills the caller's gs_err with a sentence that names the
 * rank, the peer and the phase where they are known. No exit() below bench/.
 * GS_FAIL() is the one way to fill it; it records file:line so a report can
 * point at the source (as nccl-tests' CHECK macros do). */
#ifndef GS_BASE_H
#define GS_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdarg.h>

enum {
  GS_OK = 0,
  GS_EINVAL = -1,    /* bad argument, flag or configuration */
  GS_EIO = -2,       /* file or transport failure */
  GS_ETIMEOUT = -3,  /* a wait ran out (peer dead or stalled) */
  GS_EPROTO = -4,    /* malformed or unexpected message */
  GS_ENOMEM = -5,
  GS_EPEER = -6,     /* a peer reported an error or went away */
  GS_EDEVICE = -7,   /* CUDA / NCCL / no usable device */
  GS_EINTR = -8,     /* interrupted (SIGINT / SIGTERM) */
  GS_EMISMATCH = -9, /* ranks disagree (config, sizes) */
};

typedef struct gs_err {
  int code;
  char msg[1024];
  const char *file;
  int line;
} gs_err;

/* Fill e (may be NULL) and return code. The first error wins: a later
 * GS_FAIL on the same record keeps the original message, because the
 * first failure is the cause and the rest are consequences. */
int gs_fail_at(gs_err *e, const char *file, int line, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define GS_FAIL(e, code, ...) gs_fail_at((e), __FILE__, __LINE__, (code), __VA_ARGS__)
/* Prepend context ("rank 2, step 14: ") to an error already set. */
void gs_err_prefix(gs_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_err_clear(gs_err *e);
const char *gs_strerror(int code);

/* Propagate a failing call's code unchanged (its gs_err is already set). */
#define GS_TRY(expr) do { int gs_rc_ = (expr); if (gs_rc_ < 0) return gs_rc_; } while (0)

/* Monotonic seconds since an arbitrary origin, and wall-clock seconds since
 * the epoch (for traces that merge processes on one host). */
double gs_now(void);
double gs_wall(void);

/* FNV-1a over n bytes, continuing from h (GS_HASH_INIT to start): the same
 * bits give the same hash on every rank and every machine, which is what
 * the ranks' agreement checks and the apply log compare. */
#define GS_HASH_INIT 1469598103934665603ull
uint64_t gs_hash_bytes(uint64_t h, const void *p, size_t n);

/* One line ('\n' dropped, cut at cap - 1) from a pipe or socket fd before
 * the gs_now() deadline: 1 a line, 0 end of file (buf holds what came
 * after the last '\n', "" if nothing), -1 the deadline passed or
 * gs_interrupted was set. */
int gs_read_line(int fd, double deadline, char *buf, size_t cap);

/* The environment's byte count name: "256K", "4M", "1G" or plain bytes;
 * "never" or "none": SIZE_MAX; fallback when unset or not a number. */
size_t gs_env_bytes(const char *name, size_t fallback);

/* Part j of n elements cut in N parts in order, as even as can be: the
 * first n mod N parts one element longer (parts may be empty, n < N). */
void gs_part_range(size_t n, int N, int j, size_t *off, size_t *len);

/* Allocation that reports instead of crashing. Large buffers are 64-byte
 * aligned and zeroed (vector loads, and first touch paid once). */
void *gs_alloc(size_t bytes, gs_err *e);
void gs_free(void *p);

/* Set by a SIGINT / SIGTERM handler; every wait loop polls it (sig_atomic_t:
 * the one type a handler may write and the program read). */
extern volatile sig_atomic_t gs_interrupted;

/* A job's credential: a key derived from the job secret (the key of an
 * empty secret when the job has none) and whether every socket of the job
 * encrypts. Every rank of one job holds the same one; proto/proto.h says
 * what is derived from it. */
#define GS_KEY_BYTES 32
typedef struct gs_cred {
  unsigned char key[GS_KEY_BYTES];
  bool encrypt;
} gs_cred;

#endif
