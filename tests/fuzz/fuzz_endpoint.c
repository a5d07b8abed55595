/* fuzz_endpoint.c: a data port's endpoint as a rank reads it from the
 * welcome (proto/proto.h gs_endpoint_split): "address#<32 hex digits>".
 *
 * Input: the endpoint's text (cut at its first NUL). Split into a small
 * buffer and a large one, the verdicts must agree with an independent
 * reading: 1 when the text has a '#' followed by exactly 32 hex digits and
 * the address fits (the address then is the text before the '#', the
 * nonce those digits), 0 when it has no '#' and fits, -1 otherwise; the
 * address is always terminated within the buffer. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/proto.h"

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* the verdict from the text alone */
static int expected(const char *s, size_t cap, uint8_t nonce[GS_PORT_NONCE_BYTES]) {
  const char *hash = strchr(s, '#');
  size_t alen = hash ? (size_t)(hash - s) : strlen(s);
  if (alen >= cap) return -1;
  if (!hash) return 0;
  const char *h = hash + 1;
  if (strlen(h) != 2 * GS_PORT_NONCE_BYTES) return -1;
  for (int i = 0; i < GS_PORT_NONCE_BYTES; i++) {
    int a = hexval(h[2 * i]), b = hexval(h[2 * i + 1]);
    if (a < 0 || b < 0) return -1;
    nonce[i] = (uint8_t)(a << 4 | b);
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  FUZZ_CHECK(s != NULL, "out of memory%s", "");
  memcpy(s, data, size);
  s[size] = 0;
  size_t caps[2] = {16, GS_ENDPOINT_MAX};
  for (int k = 0; k < 2; k++) {
    char addr[GS_ENDPOINT_MAX + 1];
    memset(addr, 'X', sizeof addr);
    uint8_t got[GS_PORT_NONCE_BYTES] = {0}, want[GS_PORT_NONCE_BYTES] = {0};
    int rc = gs_endpoint_split(s, addr, caps[k], got), e = expected(s, caps[k], want);
    FUZZ_CHECK(rc == e, "'%.80s' (cap %zu): %d, expected %d", s, caps[k], rc, e);
    if (rc >= 0) {
      FUZZ_CHECK(memchr(addr, 0, caps[k]) != NULL, "the address is not terminated%s", "");
      const char *hash = strchr(s, '#');
      size_t alen = hash ? (size_t)(hash - s) : strlen(s);
      FUZZ_CHECK(strlen(addr) == alen && !memcmp(addr, s, alen), "the address is not the "
                 "text before the '#'%s", "");
    }
    if (rc == 1) FUZZ_CHECK(!memcmp(got, want, sizeof got), "the nonce differs%s", "");
  }
  gs_err e = {0};
  gs_err *ep = &e;
  int ok = strchr(s, '#') && expected(s, GS_ENDPOINT_MAX, (uint8_t[GS_PORT_NONCE_BYTES]){0}) == 1;
  fuzz_verdict(ok ? 0 : GS_FAIL(ep, GS_EINVAL, "no endpoint with a port nonce"),
               &e, "gs_endpoint_split");
  free(s);
  return 0;
}
