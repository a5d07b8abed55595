/* link_text.c: how the report names the links for people: a rate
 * ("1 Gbit/s") and the sentence saying where the ranks talk and why
 * (emulated hosts and their links, or loopback and why), which heads the
 * sweep, report.json ("links_chosen") and report.html. */
#include <stdio.h>
#include <string.h>

#include "bench/report/report.h"

void gs_rate_text(double bps, char *buf, size_t cap) {
  if (bps >= 1e9) snprintf(buf, cap, "%.4g Gbit/s", bps / 1e9);
  else if (bps >= 1e6) snprintf(buf, cap, "%.4g Mbit/s", bps / 1e6);
  else snprintf(buf, cap, "%.4g kbit/s", bps / 1e3);
}

const char *gs_link_sentence(const gs_opts *o, char *buf, size_t cap) {
  char rate[256], per[48] = "1 per rank";
  gs_rate_text((double)o->link_bps, rate, sizeof rate);
  if (o->hosts) snprintf(per, sizeof per, "%d per run", o->hosts);
  const char *why = o->link_why;
  if (!strncmp(why, "emulated hosts: ", 16)) why += 16;
  for (int i = 0; i < o->link_host.n && strlen(rate) + 48 < sizeof rate; i++) {
    char own[32]; /* --link-host: "1 Gbit/s (host 3: 100 Mbit/s)" */
    gs_rate_text((double)o->link_host.bps[i], own, sizeof own);
    snprintf(rate + strlen(rate), sizeof rate - strlen(rate), "%s%d: %s", i ? ", " : " (host ",
             o->link_host.host[i], own);
  }
  if (o->link_host.n) snprintf(rate + strlen(rate), sizeof rate - strlen(rate), ")");
  char cpus[64] = "";
  if (o->host_cpus > 0) snprintf(cpus, sizeof cpus, ", %g cores each", o->host_cpus);
  switch (o->link_choice) {
  case GS_LINK_GIVEN:
  case GS_LINK_AUTO_HOSTS:
    if (o->latency_s > 0)
      snprintf(buf, cap, "emulated hosts: %s%s, %s links, %g us one way (--link none for "
               "loopback)", per, cpus, rate, o->latency_s * 1e6);
    else
      snprintf(buf, cap, "emulated hosts: %s%s, %s links (--link none for loopback)", per, cpus,
               rate);
    break;
  case GS_LINK_AUTO_LOOPBACK:
    if (*why)
      snprintf(buf, cap, "loopback, no emulated hosts: %s", why);
    else
      snprintf(buf, cap, "loopback: one process, no link to emulate");
    break;
  case GS_LINK_NONE:
    snprintf(buf, cap, "loopback (--link none): the ranks talk through this machine's memory");
    break;
  default: /* a job another launcher started: its ranks' own network */
    snprintf(buf, cap, "the network the launcher's ranks share (no emulated hosts)");
  }
  return buf;
}
