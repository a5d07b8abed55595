/* test_hier.c: the hierarchical all-reduce (allreduce.h gs_algo hier),
 * rank per process on this machine, the hosts told apart by host tags
 * (gs_comm_opts.host_tag: ranks with different tags do not share memory).
 *
 *   test_hier sums W L   W ranks, L per host (host = rank / L), auto and
 *                        hier (both must run hier), one round and rounds
 *                        of 4 KiB, in place and out of place: fp32 random
 *                        values with the bits of the documented order
 *                        (hier.c) on every rank, src untouched, and within
 *                        1e-5 of the flat ring (relative to the sum of
 *                        magnitudes); the ring between hosts moves
 *                        2(H-1)/H of each member's part
 *   test_hier pick       auto leaves one host to shm and one rank per host
 *                        to the flat algorithms; --algo hier with hosts of
 *                        unequal sizes is a clear error on every rank
 *   test_hier killed     a rank killed in the middle: every other rank, on
 *                        its host and on the other, stops before the
 *                        timeout, naming it; nothing is left in /dev/shm */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "allreduce_harness.h"

static gs_kernels *K;
#define MAXN 20011u

typedef struct topo {
  int L;
} topo;

static void part(size_t n, int N, int j, size_t *off, size_t *len) {
  size_t q = n / (size_t)N, rem = n % (size_t)N, uj = (size_t)j;
  *len = q + (uj < rem);
  *off = uj * q + (uj < rem ? uj : rem);
}

/* element i of an all-reduce of n floats in rounds of per, on H hosts of
 * L ranks: in member order inside each host, then around the hosts from
 * the piece's own host, each adding its partial to what arrived */
static float ref_hier(uint64_t seed, int H, int L, size_t n, size_t per, size_t i) {
  size_t off = i / per * per, len = n - off < per ? n - off : per, j = i - off;
  int l = 0;
  size_t po = 0, pl = 0;
  for (l = 0; l < L; l++) {
    part(len, L, l, &po, &pl);
    if (j < po + pl) break;
  }
  int q = 0;
  for (q = 0; q < H; q++) {
    size_t qo, ql;
    part(pl, H, q, &qo, &ql);
    if (j - po < qo + ql) break;
  }
  float acc = 0;
  for (int k = 0; k < H; k++) {
    int h = (q + k) % H;
    float p = th_randf(seed, h * L, i);
    for (int m = 1; m < L; m++) p += th_randf(seed, h * L + m, i);
    acc = k == 0 ? p : p + acc;
  }
  return acc;
}

static void tag_opts(gs_comm_opts *o, int rank, int world, int L, gs_algo a, char *tag) {
  th_ring_opts(o, rank, world, MAXN, K);
  o->algo = a;
  o->local_ranks = L;
  snprintf(tag, 16, "h%d", rank / L);
  o->host_tag = tag;
}

static int body_sums(th_shared *sh, int rank, int world, void *arg) {
  const topo *t = arg;
  const int L = t->L, H = world / L;
  gs_err e = {0};
  const size_t lens[] = {1, (size_t)world + 1, 1000, 4099, MAXN};
  const size_t nlens = sizeof lens / sizeof *lens;
  int bad = 0, slot = 0;
  float *src = gs_alloc(MAXN * sizeof(float), &e), *dst = gs_alloc(MAXN * sizeof(float), &e);
  float *flat = gs_alloc(MAXN * sizeof(float), &e);
  if (!src || !dst || !flat) return th_report(sh, rank, &e);
  char tag[16];
  /* the flat ring, for the comparison */
  gs_comm_opts fo;
  gs_comm *fr;
  tag_opts(&fo, rank, world, L, GS_ALGO_RING, tag);
  if (th_ring_open(sh, 0, &fo, &fr, &e) < 0) return th_report(sh, rank, &e);
  /* auto with one round per collective; hier with rounds of 4 KiB */
  for (int c = 0; c < 2; c++) {
    gs_comm_opts o;
    tag_opts(&o, rank, world, L, c == 0 ? GS_ALGO_AUTO : GS_ALGO_HIER, tag);
    if (c == 1) setenv("GS_SHM_CHUNK", "4K", 1);
    size_t per = c == 1 ? 1024 : MAXN;
    gs_comm *r;
    int rc = th_ring_open(sh, c + 1, &o, &r, &e);
    unsetenv("GS_SHM_CHUNK");
    if (rc < 0) return th_report(sh, rank, &e);
    for (size_t li = 0; li < nlens; li++) {
      size_t n = lens[li];
      if (gs_comm_algo(r, n) != GS_ALGO_HIER) {
        fprintf(stderr, "rank %d: %s on %d hosts of %d runs %s, not hier\n", rank,
                gs_algo_name(o.algo), H, L, gs_algo_name(gs_comm_algo(r, n)));
        bad++;
      }
      for (int inplace = 0; inplace < 2; inplace++, slot++) {
        uint64_t seed = (uint64_t)slot + 1;
        for (size_t i = 0; i < n; i++) src[i] = th_randf(seed, rank, i);
        if (gs_comm_allreduce(fr, src, flat, n, slot, 0, NULL, &e) < 0)
          return th_report(sh, rank, &e);
        float *out = inplace ? src : dst;
        if (!inplace) memset(dst, 0xff, n * sizeof(float));
        gs_comm_stats st = {0};
        if (gs_comm_allreduce(r, src, out, n, slot, 0, &st, &e) < 0)
          return th_report(sh, rank, &e);
        size_t wrong = 0, first = 0, far = 0;
        for (size_t i = 0; i < n; i++) {
          if (out[i] != ref_hier(seed, H, L, n, per, i) && wrong++ == 0) first = i;
          double mag = 0;
          for (int q = 0; q < world; q++) mag += fabs(th_randf(seed, q, i));
          far += fabs((double)out[i] - flat[i]) > 1e-5 * mag;
        }
        if (!inplace)
          for (size_t i = 0; i < n; i++)
            if (src[i] != th_randf(seed, rank, i)) {
              fprintf(stderr, "rank %d: out of place changed src[%zu]\n", rank, i);
              bad++;
              break;
            }
        if (wrong || far) {
          fprintf(stderr, "rank %d: %s length %zu %s: %zu elements differ from the documented "
                  "order (first [%zu]), %zu more than 1e-5 from the flat ring\n", rank,
                  gs_algo_name(o.algo), n, inplace ? "in place" : "out of place", wrong, first,
                  far);
          bad++;
        }
        /* the ring between hosts: 2(H-1)/H of each round's part, payload
         * only (headers on top) */
        double payload = 0;
        for (size_t off = 0; off < n; off += per) {
          size_t len = n - off < per ? n - off : per, po, pl;
          part(len, L, rank % L, &po, &pl);
          for (int k = 0; k < H && H > 1; k++) {
            size_t qo, ql;
            part(pl, H, k, &qo, &ql);
            payload += (double)ql * sizeof(float);
          }
        }
        payload = H > 1 ? payload * 2.0 * (H - 1) / H : 0;
        if ((double)st.bytes_sent < payload || (double)st.bytes_sent > payload * 1.3 + 4096) {
          fprintf(stderr, "rank %d: length %zu: sent %llu bytes, the ring between hosts needs "
                  "%.0f of payload\n", rank, n, (unsigned long long)st.bytes_sent, payload);
          bad++;
        }
        sh->u64[rank][slot] = th_hash(out, n * sizeof(float));
      }
    }
    gs_comm_close(r, true, NULL);
  }
  gs_comm_close(fr, true, NULL);
  sh->u64[rank][TH_SLOTS - 1] = (uint64_t)slot;
  gs_free(src);
  gs_free(dst);
  gs_free(flat);
  return bad;
}

/* every rank's results the same bits */
static void sums(int world, int L) {
  topo t = {L};
  th_shared *sh = th_run(world, body_sums, &t, 240, NULL);
  CHECK(sh && th_failures(sh) == 0, "world %d, %d per host: a rank failed", world, L);
  for (int r = 1; sh && r < world; r++)
    for (uint64_t s = 0; s < sh->u64[0][TH_SLOTS - 1]; s++)
      CHECK(sh->u64[r][s] == sh->u64[0][s], "world %d: rank %d's result %llu differs from rank "
            "0's", world, r, (unsigned long long)s);
  if (sh) th_free(sh);
}

typedef struct pick_case {
  int L;            /* ranks per host; 0: all on one host, no tags */
  gs_algo a;
} pick_case;

static int body_pick(th_shared *sh, int rank, int world, void *arg) {
  const pick_case *c = arg;
  gs_err e = {0};
  char tag[16];
  gs_comm_opts o;
  if (c->L > 0) tag_opts(&o, rank, world, c->L, c->a, tag);
  else {
    th_ring_opts(&o, rank, world, MAXN, K);
    o.algo = c->a;
  }
  gs_comm *r = NULL;
  int rc = th_ring_open(sh, 0, &o, &r, &e);
  sh->u64[rank][0] = (uint64_t)-rc;
  sh->u64[rank][1] = rc == GS_OK ? (uint64_t)gs_comm_algo(r, MAXN) : (uint64_t)-1;
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  gs_comm_close(r, rc == GS_OK, NULL);
  return 0;
}

static void pick(void) {
  /* world 4: one host (shm); four hosts of one (the flat choice by size:
   * rd); two of two, under auto and hier */
  const pick_case cases[] = {{0, GS_ALGO_AUTO}, {1, GS_ALGO_AUTO}, {2, GS_ALGO_AUTO},
                             {2, GS_ALGO_HIER}};
  const gs_algo want[] = {GS_ALGO_SHM, th_algo("rd"), GS_ALGO_HIER, GS_ALGO_HIER};
  for (int k = 0; k < 4; k++) {
    th_shared *sh = th_run(4, body_pick, (void *)&cases[k], 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "pick %d: a rank crashed", k);
    for (int r = 0; sh && r < 4; r++)
      CHECK(sh->u64[r][0] == 0 && sh->u64[r][1] == (uint64_t)want[k],
            "pick %d: rank %d runs %s (rc -%llu: %s), not %s", k, r,
            gs_algo_name((gs_algo)sh->u64[r][1]), (unsigned long long)sh->u64[r][0], sh->msg[r],
            gs_algo_name(want[k]));
    if (sh) th_free(sh);
  }
  pick_case uneven = {2, GS_ALGO_HIER};
  th_shared *sh = th_run(3, body_pick, &uneven, 60, NULL);
  CHECK(sh && th_failures(sh) == 0, "uneven: a rank crashed");
  for (int r = 0; sh && r < 3; r++) {
    printf("uneven, rank %d: %s\n", r, sh->msg[r]);
    CHECK(sh->u64[r][0] != 0 && strstr(sh->msg[r], "same number") &&
          strstr(sh->msg[r], "--algo ring"), "uneven hosts: rank %d: '%s'", r, sh->msg[r]);
  }
  if (sh) th_free(sh);
}

#define KILL_TIMEOUT_MS 8000

static int body_killed(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  char tag[16];
  gs_comm_opts o;
  tag_opts(&o, rank, world, 2, GS_ALGO_HIER, tag);
  o.timeout_ms = KILL_TIMEOUT_MS;
  gs_comm *r;
  if (th_ring_open(sh, 0, &o, &r, &e) < 0) return th_report(sh, rank, &e);
  static float buf[4096];
  int rc = GS_OK;
  double t_kill = 0;
  for (int64_t s = 0; s < 100000 && rc == GS_OK; s++) {
    if (rank == 3 && s == 20) raise(SIGKILL);
    for (int i = 0; i < 4096; i++) buf[i] = (float)rank;
    t_kill = gs_now();
    rc = gs_comm_allreduce(r, buf, buf, 4096, s, 0, NULL, &e);
  }
  sh->u64[rank][0] = (uint64_t)-rc;
  sh->f64[rank][0] = gs_now() - t_kill; /* the failing collective's wait */
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  gs_comm_close(r, rc == GS_OK, NULL);
  return 0;
}

static int gradsync_shm_names(void) {
  DIR *d = opendir("/dev/shm");
  int n = 0;
  for (struct dirent *de; d && (de = readdir(d));) n += strstr(de->d_name, "gradsync") != NULL;
  if (d) closedir(d);
  return n;
}

static void killed(void) {
  int before = gradsync_shm_names();
  th_shared *sh = th_run(4, body_killed, NULL, 60, NULL);
  CHECK(sh != NULL, "killed: no run");
  for (int r = 0; sh && r < 3; r++) {
    printf("rank %d after %.2f s: %s\n", r, sh->f64[r][0], sh->msg[r]);
    CHECK(sh->status[r] == 0 && sh->u64[r][0] != 0, "killed: rank %d did not stop", r);
    CHECK(strstr(sh->msg[r], "rank 3") != NULL, "killed: rank %d does not name rank 3: '%s'", r,
          sh->msg[r]);
    CHECK(sh->f64[r][0] < KILL_TIMEOUT_MS * 1e-3, "killed: rank %d waited %.2f s, past the "
          "timeout", r, sh->f64[r][0]);
  }
  CHECK(gradsync_shm_names() == before, "killed: names left in /dev/shm");
  if (sh) th_free(sh);
}

int main(int argc, char **argv) {
  K = th_start();
  if (!K) return 1;
  const char *what = argc > 1 ? argv[1] : "sums";
  if (!strcmp(what, "sums")) {
    int w = argc > 2 ? atoi(argv[2]) : 4, L = argc > 3 ? atoi(argv[3]) : 2;
    sums(w, L);
  } else if (!strcmp(what, "pick")) {
    pick();
  } else if (!strcmp(what, "killed")) {
    killed();
  } else {
    fprintf(stderr, "usage: test_hier sums W L | pick | killed\n");
    return 2;
  }
  return check_done(what);
}
