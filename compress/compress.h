/* compress.h: what goes over the wire instead of the gradient, as DDP's
 * communication hooks decide it (--compress none|fp16|bf16|powersgd:R).
 *
 *   none      the gradient itself, in the precision's dtype (today's path)
 *   fp16/bf16 fp32 compute, gradients rounded to 16 bits for the all-reduce
 *             only (PyTorch's fp16_compress_hook / bf16_compress_hook): the
 *             backends' existing 16-bit wire (gs_sync_config.wire), chosen by
 *             gs_compress_wire; nothing below changes
 *   powersgd  PyTorch 1.13's powerSGD_hook (Vogels et al., 2019), per bucket:
 *             each tensor is viewed as a matrix M of shape[0] rows; those
 *             worth it (min_rate x (rows + cols) x R < rows x cols; vectors
 *             never are) are sent as a rank-R product, the rest as they are:
 *
 *               g += error                        (error feedback)
 *               keep g;  Q: warm start (last step's), first draw N(0,1)
 *               orthogonalize Q;  P = M Q
 *               all-reduce the uncompressed tensors (one buffer)
 *               all-reduce P;  orthogonalize P;  Q = M^T P;  all-reduce Q
 *               M = P Q^T;  error = kept g - (the bucket's result) / world
 *
 *             Before step `start` the bucket is all-reduced plainly
 *             (start_powerSGD_iter). Orthogonalization is Gram-Schmidt
 *             (PyTorch's choice up to rank 2; above it PyTorch takes a QR,
 *             the same columns up to sign, which P Q^T does not see); a zero
 *             column stays zero instead of becoming NaN.
 *
 *   topk      top-k with error feedback (Stich et al., 2018; Lin et al.'s Deep
 *             Gradient Compression without its momentum correction), per
 *             bucket of n gradients, in ps pushes (topk.c):
 *
 *               g += residual                     (error feedback)
 *               keep the k = ceil(FRACTION x n) entries of largest |g|
 *               push them sparse;  residual = g with the kept ones zeroed
 *
 *             Ties: entries are ranked by |g| (its bits without the sign:
 *             NaN above inf, -0 equal to +0), equal magnitudes by index,
 *             the lower first; the kept set is therefore one set whatever
 *             the order of the work. The push carries k u32 indices into
 *             the bucket, strictly increasing, then their k f32 values
 *             (8 bytes a kept entry); gs_topk_unpack checks all of that.
 *             Where that is not smaller than the bucket (2k >= n: FRACTION
 *             above about a half) the push is the dense bucket instead, the
 *             kept values in place and zeros elsewhere: both sides tell the
 *             form from k and n alone (gs_topk_sparse).
 *
 * The contract with the backend that calls it: gs_powersgd_bucket (or its
 * phases below, in a ps) leaves in
 * the bucket the element-wise SUM over ranks of what each rank contributed
 * (its approximation for compressed tensors), so the caller divides by the
 * world as after a plain all-reduce; every rank ends with the same bits
 * (the all-reduces do, and the rest is the same arithmetic on them). The
 * all-reduce is the caller's (a function pointer: the ring's, over emulated
 * hosts too); this part knows no transport and no model, only matrices in a
 * flat buffer. Math goes through a CPU gs_kernels table (OpenBLAS GEMMs). */
#ifndef GS_COMPRESS_H
#define GS_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef enum gs_compress_kind {
  GS_COMPRESS_NONE = 0, GS_COMPRESS_FP16, GS_COMPRESS_BF16, GS_COMPRESS_POWERSGD,
  GS_COMPRESS_TOPK
} gs_compress_kind;

/* PyTorch's PowerSGDState defaults that gradsync keeps. */
#define GS_POWERSGD_MIN_RATE 2.0
#define GS_POWERSGD_START 2   /* see gs_compress_default */

typedef struct gs_compress {
  gs_compress_kind kind;
  int rank;                /* powersgd: R (matrix_approximation_rank), >= 1 */
  int64_t start;           /* powersgd: first compressed step (start_powerSGD_iter) */
  double min_rate;         /* powersgd: min_compression_rate */
  uint64_t seed;           /* powersgd: the first Q's draw (the run's --seed) */
  double fraction;         /* topk: FRACTION, in (0, 1] */
} gs_compress;

/* none, with the powersgd fields at their defaults: start 2, the smallest
 * start PyTorch accepts with error feedback (its constructor's default is
 * 1000, longer than a benchmark run; --powersgd-start 1000 gives it). */
void gs_compress_default(gs_compress *c);
/* "none", "fp16", "bf16", "powersgd:R", "topk:FRACTION" into c's kind and
 * rank or fraction (the other fields stay); GS_EINVAL with a message naming
 * the spec otherwise. */
int gs_compress_parse(const char *spec, gs_compress *c, gs_err *e);
/* The spec back ("powersgd:2", "topk:0.1": the shortest decimal that
 * parses back to the same fraction), into buf. */
const char *gs_compress_spec(const gs_compress *c, char *buf, size_t cap);
/* The dtype gradients travel in: fp16 / bf16 for those kinds, the
 * precision's dtype otherwise. */
gs_dtype gs_compress_wire(const gs_compress *c, gs_dtype precision);

/* One tensor of the flat gradient buffer, as PyTorch's view(shape[0], -1):
 * rows x cols elements from offset (a vector: rows = count, cols = 1). */
typedef struct gs_compress_tensor {
  size_t offset, rows, cols;
} gs_compress_tensor;

/* Whether PowerSGD sends tensor t compressed at rank R (_should_compress). */
bool gs_powersgd_compresses(const gs_compress *c, const gs_compress_tensor *t);

/* The caller's all-reduce: buf (count floats, host memory) := the sum over
 * ranks of every rank's buf, in place. part numbers the collectives of one
 * bucket (0 uncompressed, 1 P, 2 Q) for messages. Returns < 0 with e set. */
typedef int (*gs_allreduce_fn)(void *ctx, float *buf, size_t count, int part, gs_err *e);

typedef struct gs_powersgd gs_powersgd;

/* State for a model of ntensors tensors (copied) in nbuckets buckets;
 * k: a CPU table (its GEMMs), kept, not owned. */
int gs_powersgd_create(const gs_compress *c, gs_kernels *k, const gs_compress_tensor *tensors,
                       int ntensors, int nbuckets, int world, gs_powersgd **out, gs_err *e);
void gs_powersgd_destroy(gs_powersgd *p);

/* Whether step compresses (step >= start). */
bool gs_powersgd_active(const gs_powersgd *p, int64_t step);

/* What one bucket's compressed exchange cost, ADDED to. */
typedef struct gs_powersgd_stats {
  uint64_t elems_before, elems_after;  /* floats a plain all-reduce would take / took */
  double compute_s;                    /* GEMMs, orthogonalization, error feedback */
} gs_powersgd_stats;

/* Bucket b (elements [off, off + count) of the flat buffer grads, which
 * every tensor inside it lies in) at an active step: the exchange above, in
 * place. Every rank calls it for the same buckets in the same order.
 * Tensors are those whose offset falls in the range. */
int gs_powersgd_bucket(gs_powersgd *p, int b, float *grads, size_t off, size_t count,
                       gs_allreduce_fn allreduce, void *ctx, gs_powersgd_stats *st, gs_err *e);

/* The same exchange in its three phases, for a caller whose reduction is
 * not a call that returns the sum (a ps: each part goes to the server and
 * its sum comes back later). Parts: 0 the uncompressed tensors end to end,
 * 1 P, 2 Q (each tensor's, end to end); a part of 0 floats does not travel.
 *
 *   encode   g += error; P = M Q                        parts 0 and 1 to sum
 *   project  (parts 0, 1 hold their sums) P orthogonalized; Q = M^T P
 *                                                        part 2 to sum
 *   decode   (part 2 holds its sum) the bucket in grads := the uncompressed
 *            sums and P Q^T; error = what was meant - bucket / world
 *
 * gs_powersgd_bucket is encode, sum 0, sum 1, project, sum 2, decode.
 * parts: bucket b's part sizes in floats (it builds the bucket's layout,
 * failing where its tensors do not cover it exactly); part: its buffer
 * (NULL before the bucket is built), where the caller reads what to send
 * and writes the sum. */
int gs_powersgd_parts(gs_powersgd *p, int b, size_t off, size_t count, size_t n[3], gs_err *e);
/* A ps numbers the parts it sends 1, 2, 3 (0 is a whole bucket): those of
 * n (gs_powersgd_parts' sizes) that travel, as bits 1 << (part + 1). */
static inline unsigned gs_powersgd_part_bits(const size_t n[3]) {
  return (n[0] ? 2u : 0u) | (n[1] ? 4u : 0u) | (n[2] ? 8u : 0u);
}
float *gs_powersgd_part(gs_powersgd *p, int b, int part);
int gs_powersgd_encode(gs_powersgd *p, int b, float *grads, size_t off, size_t count,
                       gs_powersgd_stats *st, gs_err *e);
int gs_powersgd_project(gs_powersgd *p, int b, const float *grads, gs_powersgd_stats *st,
                        gs_err *e);
int gs_powersgd_decode(gs_powersgd *p, int b, float *grads, gs_powersgd_stats *st, gs_err *e);
/* A ps server's side, which keeps no error and no Q: from the three sums
 * in the parts' buffers, P orthogonalized (the bits every rank's project
 * gives) and the bucket's sum over ranks written where it lies in the flat
 * buffer out: the uncompressed sums and P Q^T. */
int gs_powersgd_rebuild(gs_powersgd *p, int b, float *out, gs_err *e);

/* ---- top-k (topk.c) ---- */

/* Entries a bucket of n keeps: ceil(fraction x n) in double, at least 1
 * and at most n (0 for n = 0). Pushers and the server both count with it. */
size_t gs_topk_count(double fraction, size_t n);

/* Whether a bucket of n keeping k travels sparse (2k < n), and its bytes
 * on the wire: 8 k sparse, 4 n dense. */
static inline bool gs_topk_sparse(size_t k, size_t n) { return k < n - k; }
static inline size_t gs_topk_bytes(size_t k, size_t n) {
  return gs_topk_sparse(k, n) ? k * (sizeof(uint32_t) + sizeof(float)) : n * sizeof(float);
}

typedef struct gs_topk gs_topk;

/* State for n gradients (the residual, zero at first) whose largest
 * bucket has max_bucket of them. */
int gs_topk_create(double fraction, size_t n, size_t max_bucket, gs_topk **out, gs_err *e);
void gs_topk_destroy(gs_topk *t);

/* Bucket [off, off + count) of grads (host memory; not written): adds the
 * residual, writes the payload of its k = gs_topk_count entries to out
 * (gs_topk_bytes(k, count) bytes, any alignment; sparse or dense as
 * gs_topk_sparse says) and keeps the rest as the new residual.
 * Returns k. Nothing is lost: entry by entry, what was sent plus the new
 * residual is the float g + old residual, and an entry whose residual is
 * zero is g's own bits (topk:1 sends every gradient as it is). */
size_t gs_topk_select(gs_topk *t, const float *grads, size_t off, size_t count, void *out);

/* The residual of element i (tests). */
float gs_topk_residual(const gs_topk *t, size_t i);

/* A received payload of `bytes` bytes that must hold k entries of a bucket
 * of count: checks its size (gs_topk_bytes) and, sparse, that every index
 * is below count and that they strictly increase, then writes the dense
 * bucket into dense (count floats: zero where nothing was sent; a dense
 * payload as it came). Never trusts the sender:
 * GS_EPROTO with what is wrong (the caller adds who and when); payload may
 * be unaligned. */
int gs_topk_unpack(const void *payload, size_t bytes, size_t k, size_t count, float *dense,
                   gs_err *e);

#endif
