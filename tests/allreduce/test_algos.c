/* test_algos.c: the table of algorithms (allreduce/algos.c), which alone
 * says what algorithms there are: every row's word parses back to its
 * number and the launcher's constants are the rows they name; those
 * numbers and the phases' (both on the wire: the handshake compares the
 * algorithm, every chunk carries its phase) are the ones they always were;
 * no two rows share a phase; the choice names only rows that run (every
 * row a request prepares, picks when ready, or falls back on has
 * functions, and a row that is no algorithm is never prepared). */
#include <string.h>

#include "allreduce/allreduce.h"
#include "allreduce/comm.h"
#include "tests/check.h"

int main(void) {
  int n = 0;
  const gs_algo_row *t = gs_algo_table(&n);
  REQUIRE(t && n > 0 && n <= 32, "a table of %d rows", n);
  /* the handshake's numbers and the chunks' phases, as they always were */
  static const struct {
    const char *name;
    int num;
    uint32_t phases[GS_ALGO_PHASES + 1]; /* 99: no more */
  } wire[] = {{"ring", 0, {0, 1, 2, 5, 6, 99}}, {"rd", 1, {3, 99}}, {"direct", 2, {4, 99}},
              {"auto", 3, {99}},                {"shm", 4, {99}},   {"hier", 5, {7, 99}}};
  for (size_t w = 0; w < sizeof wire / sizeof *wire; w++) {
    int a = gs_algo_parse(wire[w].name);
    CHECK(a == wire[w].num, "'%s' is algorithm %d, not %d", wire[w].name, a, wire[w].num);
    if (a < 0 || a >= n) continue;
    int i = 0;
    for (; i < GS_ALGO_PHASES && t[a].phase[i].name; i++)
      CHECK(t[a].phase[i].wire == wire[w].phases[i], "%s's phase %d ('%s') is %u on the wire, "
            "not %u", wire[w].name, i, t[a].phase[i].name, t[a].phase[i].wire,
            wire[w].phases[i]);
    CHECK(wire[w].phases[i] == 99, "%s has %d phases, fewer than it had", wire[w].name, i);
  }
  CHECK(GS_ALGO_RING == gs_algo_parse("ring") && GS_ALGO_AUTO == gs_algo_parse("auto") &&
        GS_ALGO_SHM == gs_algo_parse("shm") && GS_ALGO_HIER == gs_algo_parse("hier"),
        "allreduce.h's constants are not their rows");
  CHECK(gs_algo_parse("tree") == -1 && gs_algo_parse(NULL) == -1, "a word of no row parsed");
  CHECK(!strcmp(gs_algo_name(n), "unknown") && !strcmp(gs_algo_name(-1), "unknown"),
        "a number of no row has a name");
  for (int a = 0; a < n; a++) {
    const gs_algo_row *r = &t[a];
    CHECK(r->name && gs_algo_parse(r->name) == a && !strcmp(gs_algo_name(a), r->name),
          "row %d's word does not parse back to it", a);
    CHECK(r->ops || (!r->under && !r->when_ready), "row %s has no functions but is prepared",
          r->name);
    CHECK(!r->ops || (r->ops->prepare && r->ops->allreduce), "row %s cannot run", r->name);
    CHECK(r->small >= 0 && r->small < n && t[r->small].ops && r->large >= 0 && r->large < n &&
          t[r->large].ops, "row %s falls back on a row that does not run", r->name);
    CHECK(!r->small_max || (t[r->small].under & GS_ALGO_BIT(a)),
          "under %s, %s runs unprepared", r->name, t[r->small].name);
    CHECK(t[r->large].under & GS_ALGO_BIT(a), "under %s, %s runs unprepared", r->name,
          t[r->large].name);
    for (int i = 0; i < GS_ALGO_PHASES && r->phase[i].name; i++)
      for (int b = 0; b < n; b++)
        for (int j = 0; j < GS_ALGO_PHASES && t[b].phase[j].name; j++)
          CHECK((a == b && i == j) || t[b].phase[j].wire != r->phase[i].wire,
                "%s's '%s' and %s's '%s' are both phase %u", r->name, r->phase[i].name,
                t[b].name, t[b].phase[j].name, r->phase[i].wire);
  }
  printf("%d rows: ", n);
  for (int a = 0; a < n; a++) printf("%s%s", a ? ", " : "", t[a].name);
  printf("\n");
  return check_done("algos");
}
