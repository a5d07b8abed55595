/* caps.h: part of sync.h's contract (sync.h includes it): the words in
 * which a backend says what it runs and a run says what it asks, and the
 * one check between them (caps.c). A header of its own because caps.c
 * needs nothing else of sync.h, and sync.c calls it: the arrow runs one
 * way. */
#ifndef GS_CAPS_H
#define GS_CAPS_H

#include <stdbool.h>

#include "compress/compress.h"
#include "kernels/kernels.h"

/* ---- what a backend supports (caps.c) ----
 * Each backend declares, for the options it was given, which value of
 * each axis below it runs (gs_backend.caps): its capabilities. A run asks
 * one value of each axis (gs_want), each with the flag that asked it;
 * gs_caps_check is the ONE place that refuses a combination, with words
 * that name the flags. The command line calls it for every run of a sweep
 * before any rank starts (bench/job/backends.c holds the table of rows);
 * every backend's prepare() and open() call it again through
 * gs_sync_check_config, so a backend driven by a program of its own
 * refuses the same combination with the same words. Besides what a
 * backend runs, some values need others wherever they run (a compression
 * needs fp32 compute on the CPU under bsp; a stale consistency model
 * pushes after backward; periodic averaging averages fp32 parameters as
 * they are): caps.c's table of needs, written once. */
typedef enum gs_axis {
  GS_AXIS_COMPRESS = 0,     /* gs_compress_kind */
  GS_AXIS_SYNC,             /* gs_sync_kind: the consistency model */
  GS_AXIS_DEVICE,           /* gs_device */
  GS_AXIS_PRECISION,        /* the compute precision (gs_dtype F32, F16, BF16) */
  GS_AXIS_WIRE,             /* the gradients' dtype on the wire (gs_dtype) */
  GS_AXIS_SCALING,          /* loss scaling: 0 off, 1 on */
  GS_AXIS_OVERLAP,          /* buckets handed over as backward fills them: 0, 1 */
  GS_AXIS_COLLECTIVE,       /* the collective benchmark (sum_only): 0, 1 */
  GS_AXIS_TRANSPORT,        /* gs_transport */
  GS_AXIS_COUNT
} gs_axis;

/* The consistency models, as one axis: the ps' (bsp, ssp, async, backup
 * workers: ps.h) and the all-reduce's periodic averaging (allreduce.h). */
typedef enum gs_sync_kind {
  GS_SYNC_BSP = 0, GS_SYNC_SSP, GS_SYNC_ASYNC, GS_SYNC_BACKUP, GS_SYNC_PERIODIC
} gs_sync_kind;
/* How ranks of one machine reach each other: TCP (the default, and the
 * only one across machines), Unix sockets, or shared memory. */
typedef enum gs_transport { GS_TRANSPORT_TCP = 0, GS_TRANSPORT_IPC, GS_TRANSPORT_SHM } gs_transport;

#define GS_CAP(v) (1u << (unsigned)(v))

/* A backend's capabilities: per axis, the set of values it runs (bits
 * GS_CAP(value)), and its name as the flags chose it, for the words. */
typedef struct gs_caps {
  char what[160];           /* "the flat ps (--mode ps)", "a sharded ps (--ps-servers 2)" */
  unsigned runs[GS_AXIS_COUNT];
} gs_caps;

/* What a run asks: one value per axis, each with the flag that asked it
 * ("--compress topk:0.1", "--ps-sync ssp:2"; "" when nobody asked, the
 * default). known[axis] false: the asker cannot tell (a backend does not
 * see the compute precision), and the axis is not checked. */
typedef struct gs_want {
  int value[GS_AXIS_COUNT];
  bool known[GS_AXIS_COUNT];
  char flag[GS_AXIS_COUNT][48];
} gs_want;
/* Set axis a of w to v, asked by flag (printf; NULL: the default). */
void gs_want_set(gs_want *w, gs_axis a, int v, const char *flag, ...)
    __attribute__((format(printf, 4, 5)));

/* Every value of every axis: where a backend's declaration starts, so that
 * it says only what it does not run. */
void gs_caps_everything(gs_caps *c);

/* Whether a backend of capabilities c runs w, and whether every value of
 * w has what it needs: GS_OK, or GS_EINVAL with a sentence naming the
 * flags (prefix, when not NULL or "", starts it: "rank 2: "). */
int gs_caps_check(const gs_caps *c, const gs_want *w, const char *prefix, gs_err *e);

#endif
