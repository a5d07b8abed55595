/* driver.c: replays corpus files through a harness without libFuzzer, so
 * that every build (gcc too, with or without sanitizers) runs the fuzz
 * corpora as regression tests.
 *
 *   fuzz_<name> FILE|DIR...
 *
 * Each file is read into a buffer of exactly its size (a sanitizer sees
 * any read past the end) and passed to LLVMFuzzerTestOneInput once, in
 * name order. The file's name sets what it promises (fuzz.h). A harness
 * that finds a problem aborts; the driver fails when no input ran.
 * GS_FUZZ_VERBOSE=1 prints each verdict (what a seed is refused for). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path, const char *name) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    fclose(f);
    return -1;
  }
  size_t n = (size_t)st.st_size;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf || (n && fread(buf, 1, n, f) != n)) {
    fprintf(stderr, "cannot read %s\n", path);
    free(buf);
    fclose(f);
    return -1;
  }
  fclose(f);
  fuzz_expected = !strncmp(name, "ok-", 3)    ? FUZZ_ACCEPT
                  : !strncmp(name, "bad-", 4) ? FUZZ_REJECT
                                              : FUZZ_ANY;
  fprintf(stderr, "%s\n", path);
  LLVMFuzzerTestOneInput(buf, n);
  fuzz_expected = FUZZ_ANY;
  free(buf);
  return 0;
}

static int only_files(const struct dirent *d) { return d->d_name[0] != '.'; }

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE|DIR... (replays fuzz inputs through the harness)\n",
            argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int ran = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
      bad++;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      const char *base = strrchr(argv[i], '/');
      if (run_file(argv[i], base ? base + 1 : argv[i]) < 0) bad++;
      else ran++;
      continue;
    }
    struct dirent **list;
    int n = scandir(argv[i], &list, only_files, alphasort);
    if (n < 0) {
      fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
      bad++;
      continue;
    }
    for (int j = 0; j < n; j++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], list[j]->d_name);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        if (run_file(path, list[j]->d_name) < 0) bad++;
        else ran++;
      }
      free(list[j]);
    }
    free(list);
  }
  printf("%d inputs ran clean%s\n", ran, bad ? ", some could not be read" : "");
  if (ran == 0) fprintf(stderr, "no input found: the corpus is missing or empty\n");
  return ran > 0 && bad == 0 ? 0 : 1;
}
