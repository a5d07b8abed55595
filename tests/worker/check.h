/* check.h: the few assertion macros of the worker tests. A failed CHECK
 * prints file:line and the condition (and a formatted detail for CHECKF),
 * counts the failure and goes on, so one run shows every broken property;
 * main returns check_report(). */
#ifndef GS_TEST_CHECK_H
#define GS_TEST_CHECK_H

#include <stdio.h>

static int check_failures;

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
      check_failures++;                                                         \
    }                                                                           \
  } while (0)

#define CHECKF(cond, ...)                                                       \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);  \
      fprintf(stderr, __VA_ARGS__);                                             \
      fputc('\n', stderr);                                                      \
      check_failures++;                                                         \
    }                                                                           \
  } while (0)

/* a call returning a gs error code must succeed; prints the message */
#define CHECK_OK(call, err)                                                     \
  do {                                                                          \
    int rc_ = (call);                                                           \
    if (rc_ != 0) {                                                             \
      fprintf(stderr, "%s:%d: %s failed (%d): %s\n", __FILE__, __LINE__, #call,  \
              rc_, (err)->msg);                                                 \
      check_failures++;                                                         \
    }                                                                           \
  } while (0)

static inline int check_report(const char *name) {
  if (check_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
  else printf("%s: all checks passed\n", name);
  return check_failures ? 1 : 0;
}

#endif
