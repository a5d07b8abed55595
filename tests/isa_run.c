/* isa_run.c: run a test under the code path GS_ISA names, or skip it.
 *
 *     GS_ISA=avx2 isa_run PROGRAM [ARGS...]
 *
 * The end-to-end tests run once per CPU code path (scalar, avx2, avx512)
 * through this wrapper: where this CPU lacks the path it prints a line
 * saying so and exits 77 (meson's skip), so a path is never left untested
 * without a word; otherwise it execs the test, which inherits GS_ISA. An
 * unknown name is a failure, not a skip. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: GS_ISA=scalar|avx2|avx512 isa_run PROGRAM [ARGS...]\n");
    return 2;
  }
  const char *name = NULL;
  gs_err e = {0};
  if (gs_isa_select(&name, &e) < 0) {
    if (e.code == GS_EDEVICE) {
      printf("skipped: %s\n", e.msg);
      return 77;
    }
    fprintf(stderr, "isa_run: %s\n", e.msg);
    return 1;
  }
  printf("isa_run: code path %s: %s\n", name, argv[1]);
  fflush(stdout);
  execvp(argv[1], argv + 1);
  fprintf(stderr, "isa_run: cannot run %s: %s\n", argv[1], strerror(errno));
  return 1;
}
