/* mkseeds.c: writes the seed corpora of the fuzz harnesses with the
 * project's own writers (gs_npy_write, the protobuf packers, the wire
 * framing) where there are any, and by hand for formats the project only
 * reads (IDX, CIFAR-10).
 *
 *   mkseeds DIR        writes DIR/<harness>/<seed> (tests/fuzz/corpus)
 *
 * Names say what a seed promises (fuzz.h): "ok-" accepted, "bad-" refused.
 * Run it again after a format changes and commit what differs; crashers
 * found by fuzzing are added by hand next to these, never regenerated. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shm/shm.h"
#include "bench/job/job.h"
#include "fuzz.h"
#include "proto/proto.h"
#include "worker/npy.h"

#define TOKEN FUZZ_RDV_TOKEN
#define WIRE_JOB FUZZ_WIRE_JOB

static const char *root;
static uint8_t buf[1 << 16];

static void path_of(char *p, size_t cap, const char *dir, const char *name) {
  snprintf(p, cap, "%s/%s", root, dir);
  mkdir(p, 0755);
  snprintf(p, cap, "%s/%s/%s", root, dir, name);
}

static void put(const char *dir, const char *name, const void *data, size_t len) {
  char p[512];
  path_of(p, sizeof p, dir, name);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
    fprintf(stderr, "mkseeds: cannot write %s\n", p);
    exit(1);
  }
}

/* ---- .npy: the checkpoint writer, then headers it never writes ---- */

static void npy_ok(const char *name, int ndim, const int64_t *shape) {
  char p[512];
  path_of(p, sizeof p, "npy", name);
  size_t count = 1;
  for (int i = 0; i < ndim; i++) count *= (size_t)shape[i];
  float *v = calloc(count + 1, sizeof *v);
  for (size_t i = 0; i < count; i++) v[i] = (float)i * 0.25f - 1.0f;
  gs_err e = {0};
  if (gs_npy_write(p, v, ndim, shape, &e)) {
    fprintf(stderr, "mkseeds: %s\n", e.msg);
    exit(1);
  }
  free(v);
}

/* version 1.0 or 2.0, header text as given, then data bytes of zeros */
static void npy_raw(const char *name, int major, const char *hdr, size_t data_bytes) {
  size_t hl = strlen(hdr), at = 0;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)major;
  buf[7] = 0;
  at = 8;
  buf[at++] = (uint8_t)(hl & 0xff);
  buf[at++] = (uint8_t)(hl >> 8);
  if (major >= 2) {
    buf[at++] = 0;
    buf[at++] = 0;
  }
  memcpy(buf + at, hdr, hl);
  at += hl;
  memset(buf + at, 0, data_bytes);
  put("npy", name, buf, at + data_bytes);
}

static void npy_seeds(void) {
  npy_ok("ok-fc-weight.npy", 2, (int64_t[]){3, 4});
  npy_ok("ok-bias.npy", 1, (int64_t[]){5});
  npy_ok("ok-conv.npy", 4, (int64_t[]){2, 1, 2, 2});
  npy_ok("ok-scalar.npy", 0, NULL);
  npy_ok("ok-empty.npy", 2, (int64_t[]){0, 3});
  npy_raw("ok-v2-double-quotes.npy", 2,
          "{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f4\"}\n", 8);
  npy_raw("bad-f64.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", 16);
  npy_raw("bad-fortran.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n", 8);
  npy_raw("bad-truncated.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (9,), }\n", 8);
  /* the header's last bytes are digits: a number parsed past its end */
  npy_raw("bad-digits-at-end.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (12", 48);
  /* 2^62 elements of 4 bytes: a size that wraps to 0 */
  npy_raw("bad-count-wraps.npy", 1,
          "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }\n", 0);
  npy_raw("bad-shape-product-wraps.npy", 1,
          "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n", 0);
}

/* ---- IDX and CIFAR-10: hand-made files in the harnesses' framing ---- */

static size_t be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
  return 4;
}

/* An IDX file: magic 0x0000080<nd>, dims, then bytes i * 7 (or a label i % 10). */
static size_t idx_file(uint8_t *p, int nd, const uint32_t *dims, bool labels) {
  size_t at = be32(p, 0x800u | (uint32_t)nd), n = 1;
  for (int i = 0; i < nd; i++) {
    at += be32(p + at, dims[i]);
    n *= dims[i];
  }
  for (size_t i = 0; i < n; i++) p[at++] = labels ? (uint8_t)(i % 10) : (uint8_t)(i * 7);
  return at;
}

static void idx_seed(const char *name, const uint8_t want[5], int nd, const uint32_t *dims,
                     uint32_t nlabels, size_t cut) {
  uint8_t img[4096], lab[512];
  size_t il = idx_file(img, nd, dims, false), ll = idx_file(lab, 1, &nlabels, true);
  memcpy(buf, want, 5);
  size_t at = fuzz_put_part(buf, 5, img, il - cut, false);
  at = fuzz_put_part(buf, at, lab, ll, false);
  put("idx", name, buf, at);
}

static void idx_seeds(void) {
  const uint8_t img4x4[5] = {1, 4, 4, 10, 0}, flat12[5] = {1, 1, 12, 10, 1};
  idx_seed("ok-3-images-4x4", img4x4, 3, (uint32_t[]){3, 4, 4}, 3, 0);
  idx_seed("ok-4d-flat", flat12, 4, (uint32_t[]){2, 2, 2, 3}, 2, 0);
  idx_seed("bad-truncated", img4x4, 3, (uint32_t[]){3, 4, 4}, 3, 1);
  idx_seed("bad-count-mismatch", img4x4, 3, (uint32_t[]){3, 4, 4}, 2, 0);
  idx_seed("bad-shape", img4x4, 3, (uint32_t[]){3, 5, 4}, 3, 0);
  idx_seed("bad-label-range", (const uint8_t[5]){1, 4, 4, 2, 0}, 3, (uint32_t[]){3, 4, 4}, 3, 0);
  idx_seed("bad-one-file", (const uint8_t[5]){1, 4, 4, 10, 2}, 3, (uint32_t[]){3, 4, 4}, 3, 0);
  uint8_t gz[5 + 2 + 4] = {1, 4, 4, 10, 0, 4, 0, 0x1f, 0x8b, 8, 0};
  put("idx", "bad-gzip", gz, sizeof gz);
}

static void cifar_seed(const char *name, uint8_t classes, uint8_t flags, int nfiles,
                       const int *records, uint8_t first_label, size_t cut) {
  buf[0] = classes;
  buf[1] = flags;
  size_t at = 2;
  static uint8_t file[3 * 3073];
  for (int f = 0; f < nfiles; f++) {
    size_t len = (size_t)records[f] * 3073;
    for (size_t i = 0; i < len; i++) file[i] = (uint8_t)(i * 13 + (size_t)f);
    for (int r = 0; r < records[f]; r++) file[(size_t)r * 3073] = (uint8_t)((r + f) % 10);
    file[0] = first_label;
    at = fuzz_put_part(buf, at, file, len - (f == 0 ? cut : 0), false);
  }
  put("cifar", name, buf, at);
}

static void cifar_seeds(void) {
  const int two[2] = {2, 1}, one[1] = {2};
  cifar_seed("ok-one-file", 10, 1 << 2, 1, one, 3, 0);
  cifar_seed("ok-two-files", 10, 2 << 2, 2, two, 0, 0);
  cifar_seed("ok-flat", 10, 1 | 1 << 2, 1, one, 9, 0);
  cifar_seed("bad-label-10", 10, 1 << 2, 1, one, 10, 0);
  cifar_seed("bad-label-over-classes", 5, 1 << 2, 1, one, 7, 0);
  cifar_seed("bad-partial-record", 10, 1 << 2, 1, one, 0, 100);
  cifar_seed("bad-empty-name", 10, 0, 2, two, 0, 0);
  cifar_seed("bad-shape", 10, 2 | 1 << 2, 1, one, 0, 0);
  uint8_t gz[2 + 2 + 4] = {10, 1 << 2, 4, 0, 0x1f, 0x8b, 8, 0};
  put("cifar", "bad-gzip", gz, sizeof gz);
}

/* ---- model specs and flags ---- */

static void text_seed(const char *dir, const char *name, const void *prefix, size_t plen,
                      const char *text, size_t tlen) {
  memcpy(buf, prefix, plen);
  memcpy(buf + plen, text, tlen);
  put(dir, name, buf, plen + tlen);
}

static void model(const char *name, uint8_t b0, const char *spec) {
  text_seed("model", name, &b0, 1, spec, strlen(spec));
}

/* argv after "bench", NUL-separated */
static void flags(const char *name, ...) {
  va_list ap;
  va_start(ap, name);
  size_t at = 0;
  for (const char *a; (a = va_arg(ap, const char *));) {
    size_t n = strlen(a);
    memcpy(buf + at, a, n + 1);
    at += n + 1;
  }
  va_end(ap);
  put("opts", name, buf, at ? at - 1 : 0);
}

static void spec_seeds(void) {
  model("ok-mlp-default", 0, "mlp:784-2048-2048-10");
  model("ok-mlp-tiny-batch8-bf16", 2 | 7 << 2, "mlp:3-5-2");
  model("ok-lenet", 0, "lenet");
  model("ok-lenet-fp16-batch4", 1 | 3 << 2, "lenet");
  model("ok-resnet50", 0, "resnet50");
  model("ok-vgg16", 0, "vgg16");
  model("ok-bert-base", 1, "bert-base");
  model("bad-trailing-dash", 0, "mlp:4-");
  model("bad-one-size", 0, "mlp:4");
  model("bad-zero-size", 0, "mlp:4-0");
  model("bad-size-over-2-24", 0, "mlp:16777217-2");
  model("bad-sign", 0, "mlp:+4-2");
  model("bad-space", 0, "mlp: 4-2");
  model("bad-unknown", 0, "resnet");
  model("bad-out-of-memory-batch8", 7 << 2, "mlp:16777216-16777216");

  flags("ok-no-flags", NULL);
  flags("ok-sweep", "--mode=ps,ring", "--world", "1,2,4", "--model", "mlp:784-2048-10,lenet",
        "--batch", "64", "--bucket-mb", "25,1.5", "--steps", "100", "--precision", "fp16",
        "--loss-scale", "dynamic", "--timeout", "30", NULL);
  flags("ok-collective", "--mode=ring", "--collective", "allreduce", "-b", "8", "-e", "256M",
        "-f", "2", "--world", "2", "-n", "5", "-w", "1", "-c", "0", "--json", NULL);
  flags("ok-local-save", "--model", "lenet", "--data", "cifar10:data_batch_1.bin",
        "--no-shuffle", "--load-params", "init/", "--save-params", "out/", NULL);
  flags("ok-help", "-h", NULL);
  flags("ok-help-mid-cluster", "-hq", NULL);  /* leaves getopt inside "-hq" */
  flags("bad-world-0", "--world", "0", NULL);
  flags("bad-unknown-flag", "--wrold", "2", NULL);
  flags("bad-missing-value", "--world", NULL);
  flags("bad-timeout", "--timeout", "1e12", NULL);
  flags("bad-size-nan", "-b", "nan", NULL);
  flags("bad-save-sweep", "--save-params", "out/", "--mode", "ps", "--world", "1,2", NULL);
  flags("bad-local-world", "--mode", "local", "--world", "2", NULL);
  flags("bad-17-worlds", "--world", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1", NULL);
}

/* ---- protobuf envelopes, the wire framing, the rendezvous ---- */

static size_t pack(Gradsync__Envelope *env, uint8_t *out) { return gradsync__envelope__pack(env, out); }

static size_t push_env(uint8_t *out, uint32_t version, uint64_t job, uint64_t count) {
  Gradsync__Envelope env;
  Gradsync__Push p = GRADSYNC__PUSH__INIT;
  gs_wire_env(&env, job, 1);
  env.version = version;
  p.step = 3;
  p.bucket = 1;
  p.count = count;
  env.body_case = GRADSYNC__ENVELOPE__BODY_PUSH;
  env.push = &p;
  return pack(&env, out);
}

static size_t welcome_env(uint8_t *out, size_t nendpoints) {
  char *eps[2] = {"tcp://127.0.0.1:3", "tcp://127.0.0.1:4"}, *hosts[2] = {"a", "b"};
  Gradsync__Welcome w = GRADSYNC__WELCOME__INIT;
  w.world = 2;
  w.n_endpoints = nendpoints;
  w.endpoints = eps;
  w.n_hosts = 2;
  w.hosts = hosts;
  w.bootstrap.data = (uint8_t *)"blob";
  w.bootstrap.len = 4;
  Gradsync__Envelope env;
  gs_wire_env(&env, TOKEN, 0);
  env.body_case = GRADSYNC__ENVELOPE__BODY_WELCOME;
  env.welcome = &w;
  return pack(&env, out);
}

/* rank's report of steps rows and spans spans, in one part */
static size_t stats_env(uint8_t *out, uint32_t rank, uint64_t steps, uint64_t spans) {
  Gradsync__Stats st = GRADSYNC__STATS__INIT;
  st.steps = steps;
  st.spans = spans;
  st.host = "seedhost";
  st.last = true;
  Gradsync__Envelope env;
  gs_wire_env(&env, TOKEN, rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_STATS;
  env.stats = &st;
  return pack(&env, out);
}

static void proto_seeds(void) {
  uint8_t h[1024];
  put("proto", "ok-push", h, push_env(h, GS_PROTO_VERSION, 1, 16));
  put("proto", "ok-push-count-wraps", h, push_env(h, GS_PROTO_VERSION, 1, 1ull << 62));
  put("proto", "ok-register", h, fuzz_register_msg(h, 1, 2, "mlp:4-2"));
  put("proto", "ok-welcome", h, welcome_env(h, 2));
  put("proto", "ok-stats", h, stats_env(h, 1, 1, 1));
  put("proto", "ok-error", h, fuzz_error_msg(h, TOKEN, 0, "refused"));
  size_t n = push_env(h, GS_PROTO_VERSION, 1, 16);
  put("proto", "bad-truncated-push", h, n - 1);
  put("proto", "bad-wire-type-7", "\x0f\x01", 2);
}

/* wire: settings byte, then [header more][payload] */
static void wire_seed(const char *name, uint8_t settings, const void *h, size_t hl,
                      const void *p, size_t pl, bool payload) {
  buf[0] = settings;
  size_t at = fuzz_put_part(buf, 1, h, hl, payload);
  if (payload) at = fuzz_put_part(buf, at, p, pl, false);
  put("wire", name, buf, at);
}

static void wire_seeds(void) {
  uint8_t h[1024], pay[64] = {0};
  const uint8_t job_1k = 2 | 5 << 2, router = 1 | 2 | 5 << 2;
  size_t n = push_env(h, GS_PROTO_VERSION, WIRE_JOB, 16);
  wire_seed("ok-push", job_1k, h, n, pay, 64, true);
  wire_seed("ok-push-router", router, h, n, pay, 64, true);
  wire_seed("ok-header-only-no-token-check", 0, h, n, NULL, 0, false);
  wire_seed("bad-payload-over-max", 2 | 3 << 2, h, n, pay, 64, true);
  wire_seed("bad-empty-header", job_1k, h, 0, NULL, 0, false);
  wire_seed("bad-garbage-header", job_1k, "\xff\xff\xff", 3, NULL, 0, false);
  const uint8_t oversized = job_1k | 0x20;  /* no frames: only the oversized header */
  put("wire", "bad-oversized-header", &oversized, 1);
  size_t nv = push_env(h, 7, WIRE_JOB, 16);
  wire_seed("bad-version", job_1k, h, nv, NULL, 0, false);
  size_t nj = push_env(h, GS_PROTO_VERSION, 42, 16);
  wire_seed("bad-foreign-token", job_1k, h, nj, NULL, 0, false);
  Gradsync__Envelope env;
  gs_wire_env(&env, WIRE_JOB, 1);
  size_t ne = pack(&env, h);
  wire_seed("bad-empty-body", router, h, ne, NULL, 0, false);
  /* three frames, then a good message that must still arrive whole */
  n = push_env(h, GS_PROTO_VERSION, WIRE_JOB, 16);
  buf[0] = job_1k;
  size_t at = fuzz_put_part(buf, 1, h, n, true);
  at = fuzz_put_part(buf, at, pay, 8, true);
  at = fuzz_put_part(buf, at, pay, 8, false);
  at = fuzz_put_part(buf, at, h, n, true);
  at = fuzz_put_part(buf, at, pay, 64, false);
  put("wire", "bad-three-frames-then-good", buf, at);
}

/* steps rows and spans spans of rank, packed as one part into out */
static size_t measurements(uint8_t *out, size_t cap, int steps, int spans, int rank,
                           const char *span_name) {
  gs_step_row rows[4];
  gs_span sp[4];
  memset(rows, 0, sizeof rows);
  memset(sp, 0, sizeof sp);
  for (int i = 0; i < steps; i++) {
    rows[i].step = i;
    rows[i].rank = rank;
    rows[i].step_s = 0.01 * (i + 1);
    rows[i].bytes_sent = 1000u * (unsigned)i;
  }
  for (int i = 0; i < spans; i++) {
    sp[i].t0 = i;
    sp[i].t1 = i + 0.5;
    sp[i].bucket = i - 1;
    snprintf(sp[i].name, sizeof sp[i].name, "%s", span_name);
  }
  gs_rank_result r = {.rank = rank, .rows = rows, .nrows = (size_t)steps, .spans = sp,
                      .nspans = (size_t)spans};
  size_t row = 0, span = 0, len = 0;
  gs_err e = {0};
  if (gs_measurements_pack_part(&r, &row, &span, out, cap, &len, &e) < 0 ||
      row != (size_t)steps || span != (size_t)spans) {
    fprintf(stderr, "mkseeds: measurements: %s\n", e.msg);
    exit(1);
  }
  return len;
}

static void rdv_seed(const char *name, uint8_t role, const uint8_t *m, size_t ml,
                     const void *pay, size_t pl, bool payload) {
  buf[0] = role;
  size_t at = 1;
  if (m) at = fuzz_put_part(buf, at, m, ml, payload);
  if (payload) at = fuzz_put_part(buf, at, pay, pl, false);
  put("rdv", name, buf, at);
}

static void rdv_seeds(void) {
  uint8_t h[1024], m[1024];
  enum { HOST = 0, GATHER = 1, JOIN = 2 };
  rdv_seed("ok-host-register", HOST, h, fuzz_register_msg(h, 1, 2, "mlp:4-2"), NULL, 0, false);
  rdv_seed("ok-host-stray", HOST, (const uint8_t *)"junk", 4, NULL, 0, false);
  rdv_seed("bad-host-settings-differ", HOST, h, fuzz_register_msg(h, 1, 2, "lenet"), NULL, 0,
           false);
  rdv_seed("ok-host-claims-another-rank", HOST, h, fuzz_register_msg(h, 7, 2, "mlp:4-2"), NULL,
           0, false);
  rdv_seed("bad-host-world-differs", HOST, h, fuzz_register_msg(h, 1, 3, "mlp:4-2"), NULL, 0,
           false);
  size_t ml = measurements(m, sizeof m, 1, 1, 1, "forward");
  rdv_seed("ok-gather-stats", GATHER, h, stats_env(h, 1, 1, 1), m, ml, true);
  rdv_seed("ok-gather-stats-short", GATHER, h, stats_env(h, 1, 1, 1), m, ml - 1, true);
  rdv_seed("ok-gather-stats-claims-rank-2", GATHER, h, stats_env(h, 2, 1, 1), m, ml, true);
  /* 2^60 spans of 48 bytes: a size that wraps to 0 */
  rdv_seed("ok-gather-stats-count-wraps", GATHER, h, stats_env(h, 1, 0, (uint64_t)1 << 60),
           NULL, 0, false);
  rdv_seed("ok-gather-stray", GATHER, (const uint8_t *)"junk", 4, NULL, 0, false);
  rdv_seed("ok-join-welcome", JOIN, h, welcome_env(h, 2), NULL, 0, false);
  rdv_seed("bad-join-welcome-short", JOIN, h, welcome_env(h, 1), NULL, 0, false);
  rdv_seed("bad-join-error", JOIN, h, fuzz_error_msg(h, 0, 0, "refused"), NULL, 0, false);
  rdv_seed("bad-join-nothing", JOIN, NULL, 0, NULL, 0, false);
}

/* a rank's measurements: two count bytes, then one packed part */
static void meas_seed(const char *name, int steps, int spans, uint8_t hdr_steps, uint8_t hdr_spans,
                      int rank, const char *span_name) {
  buf[0] = hdr_steps;
  buf[1] = hdr_spans;
  size_t len = measurements(buf + 2, sizeof buf - 2, steps, spans, rank, span_name);
  put("meas", name, buf, len + 2);
}

static void meas_seeds(void) {
  meas_seed("ok-empty", 0, 0, 0, 0, 1, "");
  meas_seed("ok-rows-spans", 3, 2, 3, 2, 1, "forward");
  meas_seed("bad-count-differs", 3, 2, 2, 2, 1, "forward");
  meas_seed("bad-other-rank", 2, 0, 2, 0, 2, "forward");
  meas_seed("ok-longest-span-name", 1, 1, 1, 1, 1, "a-span-name-of-23-chars");
  meas_seed("ok-span-name-with-markup", 1, 1, 1, 1, 1, "<b>&\"x'</b>");
}

/* the shared-memory header: world, object size (4 bytes LE), the header */
static void shm_seed(const char *name, int world, uint64_t chunk, uint64_t nonce, int64_t adjust) {
  size_t hb = gs_shm_header_bytes(world);
  uint8_t *h = calloc(1, hb);
  gs_shm_header_write(h, world, nonce, chunk, 65536);
  uint32_t bytes = (uint32_t)((int64_t)hb + 2 * (int64_t)world * (int64_t)(chunk & 0xffffff) +
                              adjust);
  buf[0] = (uint8_t)(world - 1);
  for (int i = 0; i < 4; i++) buf[1 + i] = (uint8_t)(bytes >> (8 * i));
  size_t n = hb < 256 ? hb : 256; /* the fields; the rest of the header is zeros */
  memcpy(buf + 5, h, n);
  free(h);
  put("shm", name, buf, 5 + n);
}

static void shm_seeds(void) {
  shm_seed("ok-2-ranks", 2, 4096, FUZZ_SHM_NONCE, 0);
  shm_seed("ok-8-ranks", 8, 64, FUZZ_SHM_NONCE, 0);
  shm_seed("bad-short-object", 2, 4096, FUZZ_SHM_NONCE, -64);
  shm_seed("bad-other-nonce", 2, 4096, FUZZ_SHM_NONCE + 1, 0);
  shm_seed("bad-half-line", 2, 96, FUZZ_SHM_NONCE, 0);
  /* 2 x 8 x chunk wraps around 2^64 to 2 x 8 x 4096 */
  shm_seed("bad-size-wraps", 8, ((uint64_t)1 << 60) + 4096, FUZZ_SHM_NONCE, 0);
}

/* ---- top-k push frames: u32 count, u32 k, the frame (fuzz_topk.c) ---- */

static void topk_seed(const char *name, uint32_t count, uint32_t k, const uint32_t *idx,
                      size_t nidx, size_t values, size_t extra) {
  size_t len = 0;
  memcpy(buf + len, &count, 4), len += 4;
  memcpy(buf + len, &k, 4), len += 4;
  for (size_t j = 0; j < nidx; j++) memcpy(buf + len, &idx[j], 4), len += 4;
  for (size_t j = 0; j < values + extra; j++) {
    float v = (float)j + 0.5f;
    memcpy(buf + len, &v, 4), len += 4;
  }
  put("topk", name, buf, len);
}

static void topk_seeds(void) {
  /* count is read mod 4096 + 1 and k mod count + 2: 99 -> 100, 10 -> 10 */
  const uint32_t up[10] = {0, 3, 9, 10, 11, 40, 41, 77, 98, 99};
  topk_seed("ok-sparse", 99, 10, up, 10, 10, 0);
  topk_seed("ok-dense-form", 9, 6, NULL, 0, 10, 0);
  const uint32_t out[10] = {0, 3, 9, 10, 11, 40, 41, 77, 98, 100};
  topk_seed("bad-index-out", 99, 10, out, 10, 10, 0);
  const uint32_t rep[10] = {0, 3, 3, 10, 11, 40, 41, 77, 98, 99};
  topk_seed("bad-repeated", 99, 10, rep, 10, 10, 0);
  topk_seed("bad-short", 99, 10, up, 10, 9, 0);
  topk_seed("bad-k-over-count", 9, 11, NULL, 0, 10, 0);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mkseeds DIR   (writes DIR/<harness>/<seed>)\n");
    return 2;
  }
  root = argv[1];
  mkdir(root, 0755);
  npy_seeds();
  idx_seeds();
  cifar_seeds();
  spec_seeds();
  proto_seeds();
  wire_seeds();
  rdv_seeds();
  meas_seeds();
  shm_seeds();
  topk_seeds();
  return 0;
}
