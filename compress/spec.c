/* spec.c: the --compress words (compress.h) and PowerSGD's rule for which
 * tensors are worth compressing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress.h"

void gs_compress_default(gs_compress *c) {
  *c = (gs_compress){.kind = GS_COMPRESS_NONE, .rank = 1, .start = GS_POWERSGD_START,
                     .min_rate = GS_POWERSGD_MIN_RATE, .seed = 1};
}

int gs_compress_parse(const char *spec, gs_compress *c, gs_err *e) {
  if (!spec) spec = "";
  if (!strcmp(spec, "none")) c->kind = GS_COMPRESS_NONE;
  else if (!strcmp(spec, "fp16")) c->kind = GS_COMPRESS_FP16;
  else if (!strcmp(spec, "bf16")) c->kind = GS_COMPRESS_BF16;
  else if (!strncmp(spec, "powersgd:", 9)) {
    const char *r = spec + 9;
    char *end = NULL;
    errno = 0;
    long v = strtol(r, &end, 10);
    if (!*r || *end || errno || v < 1 || v > 1024)
      return GS_FAIL(e, GS_EINVAL, "--compress %s: the rank after powersgd: must be a whole "
                     "number from 1 to 1024 (e.g. powersgd:2)", spec);
    c->kind = GS_COMPRESS_POWERSGD;
    c->rank = (int)v;
  } else if (!strncmp(spec, "topk:", 5)) {
    const char *f = spec + 5;
    char *end = NULL;
    errno = 0;
    double v = strtod(f, &end);
    /* the words strtod also takes (inf, nan, hex) are not fractions */
    bool plain = *f && strspn(f, "0123456789.eE+-") == strlen(f);
    if (!plain || *end || errno || !(v > 0) || v > 1)
      return GS_FAIL(e, GS_EINVAL, "--compress %s: the fraction after topk: must be a number "
                     "above 0 and at most 1, the share of each bucket's gradients a push keeps "
                     "(e.g. topk:0.1)", spec);
    c->kind = GS_COMPRESS_TOPK;
    c->fraction = v;
  } else {
    return GS_FAIL(e, GS_EINVAL, "--compress '%s': use none, fp16, bf16, powersgd:R (R the "
                   "rank of the approximation, e.g. powersgd:2) or topk:FRACTION (e.g. "
                   "topk:0.1)", spec);
  }
  return GS_OK;
}

const char *gs_compress_spec(const gs_compress *c, char *buf, size_t cap) {
  switch (c->kind) {
  case GS_COMPRESS_FP16: snprintf(buf, cap, "fp16"); break;
  case GS_COMPRESS_BF16: snprintf(buf, cap, "bf16"); break;
  case GS_COMPRESS_POWERSGD: snprintf(buf, cap, "powersgd:%d", c->rank); break;
  case GS_COMPRESS_TOPK:
    /* the shortest decimal that reads back as the same double */
    for (int p = 1; p <= 17; p++) {
      snprintf(buf, cap, "topk:%.*g", p, c->fraction);
      if (strlen(buf) < 5 || strtod(buf + 5, NULL) == c->fraction) break;
    }
    break;
  default: snprintf(buf, cap, "none"); break;
  }
  return buf;
}

gs_dtype gs_compress_wire(const gs_compress *c, gs_dtype precision) {
  if (c->kind == GS_COMPRESS_FP16) return GS_F16;
  if (c->kind == GS_COMPRESS_BF16) return GS_BF16;
  return precision;
}

bool gs_powersgd_compresses(const gs_compress *c, const gs_compress_tensor *t) {
  size_t r = (size_t)c->rank;
  if (t->rows < r) r = t->rows;
  if (t->cols < r) r = t->cols;
  double plain = (double)t->rows * (double)t->cols;
  double lowrank = (double)(t->rows + t->cols) * (double)r;
  return lowrank * c->min_rate < plain;
}
