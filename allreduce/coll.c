/* coll.c: what each collective is, one row per collective as nccl-tests
 * describes its tests (allreduce.h gs_coll_desc): its name, how a size
 * maps to the elements a rank holds, the bus-bandwidth factor, and which
 * value every element of a rank's result must hold. The backends run the
 * rows through tables of their own indexed by the same enum (ring_coll.c,
 * nccl/nccl_coll.c); the collective benchmark times and checks them. */
#include <string.h>

#include "allreduce/allreduce.h"

static double all_links(int n) { return 2.0 * (n - 1) / n; }
static double one_part(int n) { return (double)(n - 1) / n; }
static double whole(int n) { return 1.0; }

static int reduced(size_t i, size_t part, int me, int root) { return GS_HOLDS_REDUCED; }
static int my_part_reduced(size_t i, size_t part, int me, int root) {
  return i / part == (size_t)me ? GS_HOLDS_REDUCED : GS_HOLDS_NOTHING;
}
static int owners_part(size_t i, size_t part, int me, int root) { return (int)(i / part); }
static int roots(size_t i, size_t part, int me, int root) { return root; }
static int reduced_on_root(size_t i, size_t part, int me, int root) {
  return me == root ? GS_HOLDS_REDUCED : GS_HOLDS_NOTHING;
}

static const gs_coll_desc rows[] = {
  [GS_COLL_ALL_REDUCE] = {"all_reduce", false, true, false, "2(n-1)/n", all_links, reduced, ""},
  [GS_COLL_REDUCE_SCATTER] = {"reduce_scatter", true, true, false, "(n-1)/n", one_part,
                              my_part_reduced, " of its part"},
  [GS_COLL_ALL_GATHER] = {"all_gather", true, false, false, "(n-1)/n", one_part, owners_part,
                          "every rank's part"},
  [GS_COLL_BROADCAST] = {"broadcast", false, false, true, "1", whole, roots,
                         "the root's vector"},
  [GS_COLL_REDUCE] = {"reduce", false, true, true, "1", whole, reduced_on_root, " on the root"},
};

const gs_coll_desc *gs_coll_of(gs_coll c) {
  return (unsigned)c <= GS_COLL_REDUCE ? &rows[c] : NULL;
}

const char *gs_coll_name(gs_coll c) {
  const gs_coll_desc *d = gs_coll_of(c);
  return d ? d->name : "unknown";
}

int gs_coll_parse(const char *s) {
  if (s && !strcmp(s, "allreduce")) return GS_COLL_ALL_REDUCE;
  for (int c = 0; s && c <= GS_COLL_REDUCE; c++)
    if (!strcmp(s, rows[c].name)) return c;
  return -1;
}

double gs_coll_busbw_factor(gs_coll c, int world) {
  const gs_coll_desc *d = gs_coll_of(c);
  return d ? d->busbw(world) : 1.0;
}
