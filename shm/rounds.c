/* rounds.c: the all-reduce through the segment (shm.h gs_shm_allreduce):
 * no socket, no I/O thread, no wake-up per hop, which is what a ZeroMQ hop
 * costs on one machine.
 *
 * The buffer goes through in rounds of at most `chunk` bytes per member,
 * over two sets of N slots (rounds alternate sets):
 *
 *   round k, set k%2      member 0      member 1     ...   member N-1
 *   copy in               slot 0 = v0   slot 1 = v1        slot N-1
 *   barrier
 *   reduce (split)        part 0 of slot 0 = ((v0 + v1) + v2) + ... (member
 *                         m sums part m of every slot, in member order)
 *   [part]                the user's change of its part (hier: the sum
 *                         over the hosts)
 *   barrier
 *   copy out              dst = slot 0 (every member)
 *
 * Without a change of the parts (no [part]) the split round moves less:
 * member m copies in every part but part m, which no other member reads,
 * and sums part m reading its own values straight from its src, into its
 * slot's part m and its dst at once; after the barrier it copies the
 * others' parts from their slots. Per byte about half the copies (and
 * half the traffic between the cores) of a member summing everything.
 *
 * With one barrier ("whole", up to `whole` bytes), every member sums all
 * of the round itself, in the same order, and copies out its own result:
 * half the waits, N times the reads; it wins at small sizes, where the
 * wait costs more than the bytes. Either way every member ends with the
 * same bits, run after run.
 *
 * Two sets make one barrier enough between rounds: a member writes set s
 * again in round k+2 only after passing round k+1's barrier, which every
 * member reaches after it has read set s in round k. */
#include <string.h>

#include "shm/shm_internal.h"

/* The set of slots this round writes. */
static char *next_set(gs_shm *s) {
  return s->slots + (size_t)(s->rounds++ & 1) * (size_t)s->N * s->chunk;
}

/* dst op= src, n elements: training's sum through the table's add_lp (the
 * path the tests compare), every other op and type through gs_reduce_host
 * (checked by the caller: it cannot fail here) */
static void combine(const gs_shm *s, gs_redop op, size_t n, void *dst, const void *src) {
  if (op == GS_REDOP_SUM && s->c.dtype == GS_F32) s->c.k->add_lp(s->c.k, GS_F32, n, dst, src);
  else (void)gs_reduce_host(op, s->c.dtype, n, dst, src, NULL);
}

/* dst (n elements) = the op, in member order, of the n elements at off in
 * every slot of set; blocks small enough to stay in the first-level cache
 * across the N - 1 combines */
static void sum(const gs_shm *s, gs_redop op, char *set, size_t off, size_t n, void *dst) {
  const size_t es = s->es, blk = 4096 / es;
  for (size_t b = 0; b < n; b += blk) {
    size_t m = n - b < blk ? n - b : blk;
    char *out = (char *)dst + b * es;
    const size_t at = (off + b) * es;
    if (out != set + at) memcpy(out, set + at, m * es);
    for (int i = 1; i < s->N; i++) combine(s, op, m, out, set + (size_t)i * s->chunk + at);
  }
}

/* The split round without a part change (every member's own part summed
 * straight from its src, the others' parts read back from their slots):
 * member m copies in every part but its own (which no one else reads), sums
 * part m in member order, reading its own values from src and the others'
 * from their slots, into its slot's part m (where it copied nothing) and
 * its dst, then, after the wait, copies every other part q from slot q.
 * Per byte that is about half the copies of the whole round, and the same
 * bits: each element is summed once, by one member, in member order. */
static int split_round(gs_shm *s, gs_shm_run *run, const char *src, char *dst, size_t len,
                       double *red, gs_err *e) {
  const int N = s->N, me = s->me;
  const size_t es = s->es;
  char *set = next_set(s), *mine = set + (size_t)me * s->chunk;
  size_t po, pl;
  gs_part_range(len, N, me, &po, &pl);
  memcpy(mine, src, po * es);
  memcpy(mine + (po + pl) * es, src + (po + pl) * es, (len - po - pl) * es);
  int rc = gs_shm_barrier(s, e);
  if (rc < 0) return rc;
  double a = gs_now();
  /* in 4 KiB blocks, summed in the slot's free part (the first-level
   * cache holds it across the N - 1 combines), then copied to dst: dst
   * may be src (in place), read already for that block */
  const size_t blk = 4096 / es;
  for (size_t b = po; b < po + pl; b += blk) {
    size_t m = po + pl - b < blk ? po + pl - b : blk;
    char *out = mine + b * es;
    const size_t at = b * es;
    memcpy(out, me == 0 ? src + at : set + at, m * es);
    for (int i = 1; i < N; i++)
      combine(s, run->op, m, out, i == me ? src + at : set + (size_t)i * s->chunk + at);
    memcpy(dst + at, out, m * es);
  }
  *red += gs_now() - a;
  if ((rc = gs_shm_barrier(s, e)) < 0) return rc;
  for (int q = 0; q < N; q++) {
    size_t qo, ql;
    gs_part_range(len, N, q, &qo, &ql);
    if (q != me) memcpy(dst + qo * es, set + (size_t)q * s->chunk + qo * es, ql * es);
  }
  run->sent += (len - pl) * es;
  run->recv += (pl * (size_t)(N - 1) + (len - pl)) * es;
  return GS_OK;
}

int gs_shm_allreduce(gs_shm *s, gs_shm_run *run, const void *src, void *dst, size_t n,
                     gs_err *e) {
  const int N = s->N, me = s->me;
  const size_t es = s->es, per = s->chunk / es;
  s->step = run->step;
  s->bucket = run->bucket;
  /* the same on every member: they all pass the same n, and the creator
   * set the threshold in the header */
  const bool whole = !run->part && n * es <= s->whole;
  double red = 0;
  int rc = GS_OK;
  for (size_t off = 0; off < n && rc == GS_OK; off += per) {
    size_t len = n - off < per ? n - off : per;
    if (!whole && !run->part) {
      rc = split_round(s, run, (const char *)src + off * es, (char *)dst + off * es, len, &red,
                       e);
      continue;
    }
    char *set = next_set(s);
    memcpy(set + (size_t)me * s->chunk, (const char *)src + off * es, len * es);
    if ((rc = gs_shm_barrier(s, e)) < 0) break;
    size_t po = 0, pl = len; /* what this member sums: all, or its part */
    if (!whole) gs_part_range(len, N, me, &po, &pl);
    double a = gs_now();
    sum(s, run->op, set, po, pl, whole ? (char *)dst + off * es : set + po * es);
    red += gs_now() - a;
    if (!whole) {
      if ((rc = run->part(run->ctx, set + po * es, pl, e)) < 0) break;
      if ((rc = gs_shm_barrier(s, e)) < 0) break;
      memcpy((char *)dst + off * es, set, len * es);
    }
    run->sent += len * es;
    run->recv += len * es * (size_t)(whole ? N - 1 : 1);
  }
  run->reduce_s += red;
  return rc;
}
