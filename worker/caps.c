/* caps.c: the one place that refuses a combination (sync.h gs_caps_check):
 * whether a backend, as its options made it, runs what a run asks, and
 * whether each value asked has what it needs wherever it runs. Both sides
 * are data: the backends declare their capabilities (gs_backend.caps), and
 * the needs are the table below, each written once, so the command line
 * and every backend refuse alike and in the same words.
 *
 * A refusal names the flag that asked the value, the backend as its flags
 * chose it (or the flag whose need is not met), and what would run:
 *   --compress topk:0.1: the ps with 2 servers (--ps-servers 2) runs
 *   --compress none only; drop one of them
 *   --compress powersgd:2 needs every step synchronous (--ps-sync bsp, no
 *   --ring-period), not --ps-sync ssp:1; drop one of them */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "worker/caps.h"

void gs_want_set(gs_want *w, gs_axis a, int v, const char *flag, ...) {
  w->value[a] = v;
  w->known[a] = true;
  w->flag[a][0] = '\0';
  if (!flag) return;
  va_list ap;
  va_start(ap, flag);
  vsnprintf(w->flag[a], sizeof w->flag[a], flag, ap);
  va_end(ap);
}

void gs_caps_everything(gs_caps *c) {
  memset(c, 0, sizeof *c);
  c->runs[GS_AXIS_COMPRESS] = GS_CAP(GS_COMPRESS_NONE) | GS_CAP(GS_COMPRESS_FP16) |
                              GS_CAP(GS_COMPRESS_BF16) | GS_CAP(GS_COMPRESS_POWERSGD) |
                              GS_CAP(GS_COMPRESS_TOPK);
  c->runs[GS_AXIS_SYNC] = GS_CAP(GS_SYNC_BSP) | GS_CAP(GS_SYNC_SSP) | GS_CAP(GS_SYNC_ASYNC) |
                          GS_CAP(GS_SYNC_BACKUP) | GS_CAP(GS_SYNC_PERIODIC);
  c->runs[GS_AXIS_DEVICE] = GS_CAP(GS_DEV_CPU) | GS_CAP(GS_DEV_CUDA);
  c->runs[GS_AXIS_PRECISION] = GS_CAP(GS_F32) | GS_CAP(GS_F16) | GS_CAP(GS_BF16);
  /* the collective benchmark's fp64 and int32 buffers too */
  c->runs[GS_AXIS_WIRE] = c->runs[GS_AXIS_PRECISION] | GS_CAP(GS_F64) | GS_CAP(GS_I32);
  c->runs[GS_AXIS_SCALING] = GS_CAP(0) | GS_CAP(1);
  c->runs[GS_AXIS_OVERLAP] = GS_CAP(0) | GS_CAP(1);
  c->runs[GS_AXIS_COLLECTIVE] = GS_CAP(0) | GS_CAP(1);
  c->runs[GS_AXIS_TRANSPORT] = GS_CAP(GS_TRANSPORT_TCP) | GS_CAP(GS_TRANSPORT_IPC) |
                               GS_CAP(GS_TRANSPORT_SHM);
}

/* ---- the words ---- */

/* How an axis' values read: the flag's words before them (one for a set:
 * "--compress none, fp16 or bf16"), then each value's. */
static const char *axis_prefix(gs_axis a) {
  switch (a) {
  case GS_AXIS_COMPRESS: return "--compress ";
  case GS_AXIS_DEVICE: return "--device ";
  case GS_AXIS_PRECISION: return "--precision ";
  case GS_AXIS_TRANSPORT: return "--transport ";
  default: return "";
  }
}

static const char *value_word(gs_axis a, int v) {
  static const char *const compress[] = {"none", "fp16", "bf16", "powersgd", "topk"};
  static const char *const sync[] = {"every step synchronous (--ps-sync bsp, no --ring-period)",
                                     "--ps-sync ssp",
                                     "--ps-sync async", "--ps-backup", "--ring-period"};
  static const char *const transport[] = {"tcp", "ipc", "shm"};
  switch (a) {
  case GS_AXIS_COMPRESS:
    return v >= 0 && v < 5 ? compress[v] : "?";
  case GS_AXIS_SYNC:
    return v >= 0 && v < 5 ? sync[v] : "?";
  case GS_AXIS_DEVICE:
    return v == GS_DEV_CPU ? "cpu" : "cuda";
  case GS_AXIS_PRECISION:
    return v == GS_F32 ? "fp32" : v == GS_F16 ? "fp16" : v == GS_BF16 ? "bf16" : "?";
  case GS_AXIS_WIRE:
    return v == GS_F32 ? "fp32 gradients" : v == GS_F16 ? "fp16 gradients"
           : v == GS_BF16 ? "bf16 gradients" : v == GS_F64 ? "fp64 buffers"
           : v == GS_I32 ? "int32 buffers" : "gradients of another type";
  case GS_AXIS_SCALING:
    return v ? "loss scaling" : "no loss scaling";
  case GS_AXIS_OVERLAP:
    return v ? "--overlap" : "pushes after backward (no --overlap)";
  case GS_AXIS_COLLECTIVE:
    return v ? "the collective benchmark (--collective)" : "training (no --collective)";
  case GS_AXIS_TRANSPORT:
    return v >= 0 && v < 3 ? transport[v] : "?";
  default:
    return "?";
  }
}

/* "--compress none, fp16 or bf16": the values in set, in value order */
static void set_words(gs_axis a, unsigned set, char *buf, size_t cap) {
  int n = 0, total = __builtin_popcount(set);
  int o = snprintf(buf, cap, "%s", axis_prefix(a));
  for (int v = 0; v < 32 && o >= 0 && (size_t)o < cap; v++) {
    if (!(set & GS_CAP(v))) continue;
    const char *sep = n == 0 ? "" : n == total - 1 ? " or " : ", ";
    int k = snprintf(buf + o, cap - (size_t)o, "%s%s", sep, value_word(a, v));
    if (k < 0) break;
    o += k;
    n++;
  }
}

/* what asked axis a: its flag, else the value's own words */
static const char *asked(const gs_want *w, gs_axis a, char *buf, size_t cap) {
  if (w->flag[a][0]) return w->flag[a];
  set_words(a, GS_CAP(w->value[a]), buf, cap);
  return buf;
}

/* ---- the needs: what a value needs of the other axes, wherever it runs ---- */

typedef struct need {
  gs_axis axis;
  int value;
  gs_axis of;               /* the axis it needs something of */
  unsigned set;             /* the values of `of` it runs with */
} need;

#define ALL_SYNC_BSP GS_CAP(GS_SYNC_BSP)
/* In the order the refusals are checked: compression first (its precision,
 * then where its math runs, then its consistency), then the consistency
 * models'. */
static const need NEEDS[] = {
  /* compressions work on fp32 gradients: the 16-bit ones round them, the
   * others' math is fp32 (compress.h) */
  {GS_AXIS_COMPRESS, GS_COMPRESS_FP16, GS_AXIS_PRECISION, GS_CAP(GS_F32)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_BF16, GS_AXIS_PRECISION, GS_CAP(GS_F32)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_TOPK, GS_AXIS_PRECISION, GS_CAP(GS_F32)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_POWERSGD, GS_AXIS_PRECISION, GS_CAP(GS_F32)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_TOPK, GS_AXIS_WIRE, GS_CAP(GS_F32)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_POWERSGD, GS_AXIS_WIRE, GS_CAP(GS_F32)},
  /* the collective benchmark moves raw buffers (its -d picks the dtype) */
  {GS_AXIS_COMPRESS, GS_COMPRESS_FP16, GS_AXIS_COLLECTIVE, GS_CAP(0)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_BF16, GS_AXIS_COLLECTIVE, GS_CAP(0)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_TOPK, GS_AXIS_COLLECTIVE, GS_CAP(0)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_POWERSGD, GS_AXIS_COLLECTIVE, GS_CAP(0)},
  /* the error feedback keeps fp32 residuals of unscaled gradients */
  {GS_AXIS_COMPRESS, GS_COMPRESS_TOPK, GS_AXIS_SCALING, GS_CAP(0)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_POWERSGD, GS_AXIS_SCALING, GS_CAP(0)},
  /* their selection and GEMMs run in host memory (OpenBLAS) */
  {GS_AXIS_COMPRESS, GS_COMPRESS_TOPK, GS_AXIS_DEVICE, GS_CAP(GS_DEV_CPU)},
  {GS_AXIS_COMPRESS, GS_COMPRESS_POWERSGD, GS_AXIS_DEVICE, GS_CAP(GS_DEV_CPU)},
  /* one residual per rank and step, summed into every step's update */
  {GS_AXIS_COMPRESS, GS_COMPRESS_TOPK, GS_AXIS_SYNC, ALL_SYNC_BSP},
  {GS_AXIS_COMPRESS, GS_COMPRESS_POWERSGD, GS_AXIS_SYNC, ALL_SYNC_BSP},
  /* a stale update is the server's: new parameters may arrive at any time,
   * and backward still reads them; and it needs the optimizer */
  {GS_AXIS_SYNC, GS_SYNC_SSP, GS_AXIS_OVERLAP, GS_CAP(0)},
  {GS_AXIS_SYNC, GS_SYNC_ASYNC, GS_AXIS_OVERLAP, GS_CAP(0)},
  {GS_AXIS_SYNC, GS_SYNC_BACKUP, GS_AXIS_OVERLAP, GS_CAP(0)},
  {GS_AXIS_SYNC, GS_SYNC_SSP, GS_AXIS_COLLECTIVE, GS_CAP(0)},
  {GS_AXIS_SYNC, GS_SYNC_ASYNC, GS_AXIS_COLLECTIVE, GS_CAP(0)},
  {GS_AXIS_SYNC, GS_SYNC_BACKUP, GS_AXIS_COLLECTIVE, GS_CAP(0)},
  /* periodic averaging averages the parameters as they are: fp32, unscaled,
   * on the CPU ring, and trains */
  {GS_AXIS_SYNC, GS_SYNC_PERIODIC, GS_AXIS_PRECISION, GS_CAP(GS_F32)},
  {GS_AXIS_SYNC, GS_SYNC_PERIODIC, GS_AXIS_WIRE, GS_CAP(GS_F32)},
  {GS_AXIS_SYNC, GS_SYNC_PERIODIC, GS_AXIS_SCALING, GS_CAP(0)},
  {GS_AXIS_SYNC, GS_SYNC_PERIODIC, GS_AXIS_DEVICE, GS_CAP(GS_DEV_CPU)},
  {GS_AXIS_SYNC, GS_SYNC_PERIODIC, GS_AXIS_COLLECTIVE, GS_CAP(0)},
};

static int refuse(const char *prefix, gs_err *e, const char *fmt, const char *a, const char *b,
                  const char *c) {
  char msg[1024];
  snprintf(msg, sizeof msg, fmt, a, b, c);
  return GS_FAIL(e, GS_EINVAL, "%s%s", prefix ? prefix : "", msg);
}

int gs_caps_check(const gs_caps *c, const gs_want *w, const char *prefix, gs_err *e) {
  char set[256], one[96], other[96];
  for (int a = 0; a < GS_AXIS_COUNT; a++) {
    if (!w->known[a] || (c->runs[a] & GS_CAP(w->value[a]))) continue;
    set_words((gs_axis)a, c->runs[a], set, sizeof set);
    return refuse(prefix, e, "%s: %s runs %s only; drop one of them",
                  asked(w, (gs_axis)a, one, sizeof one), c->what, set);
  }
  for (size_t i = 0; i < sizeof NEEDS / sizeof *NEEDS; i++) {
    const need *n = &NEEDS[i];
    if (!w->known[n->axis] || w->value[n->axis] != n->value || !w->known[n->of] ||
        (n->set & GS_CAP(w->value[n->of])))
      continue;
    set_words(n->of, n->set, set, sizeof set);
    return refuse(prefix, e, "%s needs %s, not %s; drop one of them",
                  asked(w, n->axis, one, sizeof one), set, asked(w, n->of, other, sizeof other));
  }
  return GS_OK;
}
