/* host_rates.c: links that differ from the others: "H=RATE[,H=RATE...]"
 * gives host H's link its own rate (both directions), the way a cluster
 * with one slow or shared uplink looks. The table is what the cluster
 * (hosts.c) shapes each link with and what every reader of a link's busy
 * time (links.c, watch.c's callers) divides by. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/hosts/hosts.h"

int gs_host_rates_parse(const char *s, gs_host_rates *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  if (!s || !*s || strlen(s) > 1000)
    return GS_FAIL(e, GS_EINVAL, "--link-host '%.40s': give HOST=RATE[,HOST=RATE...], e.g. "
                   "3=100mbit", s ? s : "");
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '='), *end = NULL;
    long h = eq ? strtol(item, &end, 10) : -1;
    if (!eq || end != eq || eq == item || h < 0 || h >= GS_HOSTS_MAX)
      return GS_FAIL(e, GS_EINVAL, "--link-host %s: '%s' is not HOST=RATE with HOST a host "
                     "number 0..%d (e.g. 3=100mbit)", s, item, GS_HOSTS_MAX - 1);
    if (out->n == GS_HOST_RATES_MAX)
      return GS_FAIL(e, GS_EINVAL, "--link-host %s: at most %d hosts may differ", s,
                     GS_HOST_RATES_MAX);
    for (int i = 0; i < out->n; i++)
      if (out->host[i] == (int)h)
        return GS_FAIL(e, GS_EINVAL, "--link-host %s: host %ld is given twice", s, h);
    uint64_t bps;
    gs_err pe = {0};
    if (gs_hosts_parse_rate(eq + 1, &bps, &pe) < 0)
      return GS_FAIL(e, GS_EINVAL, "--link-host %s: host %ld: %s", s, h, pe.msg);
    if (bps < 8000)
      return GS_FAIL(e, GS_EINVAL, "--link-host %s: host %ld's rate %s is too low (at least "
                     "8kbit)", s, h, eq + 1);
    out->host[out->n] = (int)h;
    out->bps[out->n++] = bps;
  }
  if (out->n == 0)
    return GS_FAIL(e, GS_EINVAL, "--link-host '%s': give HOST=RATE[,HOST=RATE...], e.g. "
                   "3=100mbit", s);
  return GS_OK;
}

uint64_t gs_host_rates_of(const gs_host_rates *r, int h, uint64_t dflt) {
  for (int i = 0; r && i < r->n; i++)
    if (r->host[i] == h) return r->bps[i];
  return dflt;
}

int gs_host_rates_max_host(const gs_host_rates *r) {
  int m = -1;
  for (int i = 0; r && i < r->n; i++)
    if (r->host[i] > m) m = r->host[i];
  return m;
}

void gs_host_rates_text(const gs_host_rates *r, char *buf, size_t cap) {
  size_t n = 0;
  if (cap) buf[0] = 0;
  for (int i = 0; r && i < r->n && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%d=%llubit", i ? "," : "", r->host[i],
                          (unsigned long long)r->bps[i]);
}
