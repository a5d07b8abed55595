/* check.h: the one assertion family of gradsync's C tests (as nccl-tests'
 * CHECK macros: every failure names file:line and the condition).
 *
 *   CHECK(cond[, fmt, ...])    a property under test: a failure is printed
 *                              and counted, and the test goes on, so one
 *                              run shows every broken property
 *   REQUIRE(cond[, fmt, ...])  the same, then exit(1): setup that what
 *                              follows depends on, and checks inside
 *                              forked ranks, whose exit status is the verdict
 *   CHECK_OK(call, err)        a call returning a GS_E* code must return 0;
 *                              the failure prints err->msg
 *   check_done(name)           the tally; main returns it (0: all passed)
 *
 * Header-only: each test program keeps its own counters. */
#ifndef GS_TESTS_CHECK_H
#define GS_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures, check_count;

__attribute__((format(printf, 4, 5), unused)) static void check_failf(const char *file, int line,
                                                                      const char *cond,
                                                                      const char *fmt, ...) {
  fprintf(stderr, "%s:%d: CHECK(%s) failed: ", file, line, cond);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  check_failures++;
}

__attribute__((unused)) static void check_fail0(const char *file, int line, const char *cond) {
  fprintf(stderr, "%s:%d: CHECK(%s) failed\n", file, line, cond);
  check_failures++;
}

#define CHECK(cond, ...)                                                              \
  do {                                                                                \
    check_count++;                                                                    \
    if (!(cond)) {                                                                    \
      __VA_OPT__(check_failf(__FILE__, __LINE__, #cond, __VA_ARGS__); if (0))         \
      check_fail0(__FILE__, __LINE__, #cond);                                         \
    }                                                                                 \
  } while (0)

#define REQUIRE(cond, ...)                                                            \
  do {                                                                                \
    int check_before_ = check_failures;                                               \
    CHECK(cond __VA_OPT__(, __VA_ARGS__));                                            \
    if (check_failures != check_before_) exit(1);                                     \
  } while (0)

#define CHECK_OK(call, err)                                                           \
  do {                                                                                \
    int check_rc_ = (call);                                                           \
    CHECK(check_rc_ == 0, "%s returned %d: %s", #call, check_rc_, (err)->msg);        \
  } while (0)

__attribute__((unused)) static int check_done(const char *name) {
  if (check_failures) fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures,
                              check_count);
  else printf("%s: %d checks passed\n", name, check_count);
  return check_failures ? 1 : 0;
}

#endif
