/* opts_internal.h: internal to bench/: the row of opts.c's flag table,
 * which opts_help.c prints as --help. */
#ifndef GS_BENCH_OPTS_INTERNAL_H
#define GS_BENCH_OPTS_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include "bench/internal.h"

typedef struct flag flag;
typedef int (*flag_fn)(gs_opts *o, const flag *f, const char *arg, gs_err *e);

struct flag {
  const char *name;   /* --name */
  char letter;        /* -x as well, or 0 */
  const char *arg;    /* what the value is, for --help; NULL: a switch */
  const char *def;    /* the default as the value would be typed, applied
                         at start by parse; NULL: none */
  const char *show;   /* --help's [default] when def cannot say it */
  const char *help;
  flag_fn parse;
  size_t off;         /* the gs_opts member the parser writes */
  size_t width;       /* its size, where parsers serve more than one type */
  size_t count_off;   /* lists: the member counting their items */
  double lo, hi;      /* numbers: the accepted range (switches: the value set) */
};

/* opts_help.c: --help from the table's nflags rows */
void gs_opts_print_help(FILE *f, const flag *flags, size_t nflags);

#endif
