/* fuzz_shm.c: the shared-memory object's header as a rank that maps rank
 * 0's object reads it (shm/shm.h gs_shm_header_check).
 *
 * Input: the world size (one byte, 1..8), the object's size in bytes (4
 * bytes, little-endian, at most 1 MiB), then the object's first bytes (the
 * rest zeros). The nonce the handshake named is FUZZ_SHM_NONCE. An
 * accepted header must describe exactly this object: slots of a whole
 * number of 64-byte lines, at least one line and at most 1 GiB, and the
 * header's size plus 2 x world x slot equal to the object's size, computed
 * here without overflow. */
#include <stdlib.h>
#include <string.h>

#include "shm/shm.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5) return 0;
  int world = 1 + data[0] % 8;
  uint32_t bytes = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 |
                   (uint32_t)data[4] << 24;
  if (bytes > (1u << 20)) bytes = 1u << 20;
  uint8_t *seg = calloc(1, bytes + 1);
  FUZZ_CHECK(seg != NULL, "out of memory%s", "");
  size_t n = size - 5 < bytes ? size - 5 : bytes;
  memcpy(seg, data + 5, n);
  size_t chunk = 0, whole = 0;
  bool ok = gs_shm_header_check(seg, bytes, world, FUZZ_SHM_NONCE, &chunk, &whole);
  if (ok) {
    unsigned __int128 want = (unsigned __int128)gs_shm_header_bytes(world) +
                             (unsigned __int128)2 * (unsigned)world * chunk;
    FUZZ_CHECK(chunk >= 64 && chunk % 64 == 0 && chunk <= (1u << 30) && want == bytes,
               "accepted a header of %zu-byte slots for a %u-byte object of %d ranks", chunk,
               bytes, world);
  }
  gs_err e = {0};
  fuzz_verdict(ok ? 0 : GS_FAIL(&e, GS_EPROTO, "not this job's object"), &e,
               "gs_shm_header_check");
  free(seg);
  return 0;
}
