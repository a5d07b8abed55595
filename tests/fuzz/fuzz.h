/* fuzz.h: what the fuzz harnesses share (internal to tests/fuzz/).
 *
 * Each harness defines LLVMFuzzerTestOneInput and is linked twice: with
 * libFuzzer (-fsanitize=fuzzer, clang builds with -Dfuzz=true) to search,
 * and with driver.c in every build to replay the corpus in
 * tests/fuzz/corpus/<name>/ as a regression test.
 *
 * A harness checks properties, not just "no crash": FUZZ_CHECK aborts with
 * the condition, so libFuzzer saves the input and the driver fails. Every
 * reader's verdict goes through fuzz_verdict: success, or a negative code
 * with a message in the gs_err. The driver tells the harness what a corpus
 * file promises by its name: "ok-*" must be accepted, "bad-*" rejected
 * (so a seed that stops parsing after a format change is noticed); other
 * names (found crashers) only have to run clean. */
#ifndef GS_FUZZ_H
#define GS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define FUZZ_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond)) fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);             \
  } while (0)
void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));

/* What the current input promises (set by driver.c; FUZZ_ANY under
 * libFuzzer). */
typedef enum fuzz_expect { FUZZ_ANY, FUZZ_ACCEPT, FUZZ_REJECT } fuzz_expect;
extern fuzz_expect fuzz_expected;

/* The main verdict of one input: rc is 0, or negative with e filled with
 * a readable message. Checks the corpus file's promise too. */
void fuzz_verdict(int rc, const gs_err *e, const char *what);
/* The same for a secondary call (no promise attached). */
void fuzz_check_err(int rc, const gs_err *e, const char *what);

/* Inputs made of parts. A part is a 2-byte little-endian header, bit 15
 * "another part of the same message follows" and bits 0..14 the length,
 * then that many bytes (fewer when the input ends first). */
typedef struct fuzz_part {
  const uint8_t *data;
  size_t len;
  bool more;
} fuzz_part;
/* Split in into at most max parts; returns how many. */
size_t fuzz_split(const uint8_t *in, size_t n, fuzz_part *parts, size_t max);
/* Append one part to buf (for the seed writer); returns the new length. */
size_t fuzz_put_part(uint8_t *buf, size_t at, const void *data, size_t len, bool more);

/* An in-memory file (memfd) holding data, readable at path
 * ("/proc/self/fd/N") by anything that opens files; close with
 * fuzz_file_close. */
typedef struct fuzz_file {
  int fd;
  char path[48];
} fuzz_file;
void fuzz_file_open(fuzz_file *f, const void *data, size_t len);
void fuzz_file_close(fuzz_file *f);

/* msgs.c: valid messages, packed into out (1 KiB is plenty): rank's
 * registration for a job of world ranks running "mode=ps\nmodel=MODEL\n"
 * (the settings of fuzz_rdv.c's rank 0 with model mlp:4-2), and an Error
 * carrying message. The job tokens the harnesses check: */
#define FUZZ_RDV_TOKEN 0x7465737474657374ull
#define FUZZ_WIRE_JOB 0x5eed5eed0badf00dull
#define FUZZ_SHM_NONCE 0x5eedf00dull
size_t fuzz_register_msg(uint8_t *out, uint32_t rank, uint32_t world, const char *model);
size_t fuzz_error_msg(uint8_t *out, uint64_t job, uint32_t rank, const char *message);

/* data_check.c: a dataset that gs_data_open accepted holds exactly n
 * samples of c x h x w bytes equal to pixels, labels equal to labels (all
 * below classes), and batches them as byte / 255. */
struct gs_dataset;
struct gs_data_want;
/* gs_data_open(spec) with its verdict checked; the dataset or NULL. */
struct gs_dataset *fuzz_open_dataset(const char *spec, const struct gs_data_want *want,
                                     const char *what);
void fuzz_check_dataset(const struct gs_dataset *d, int64_t n, int c, int h, int w,
                        const uint8_t *pixels, const uint8_t *labels, int classes);

#endif
