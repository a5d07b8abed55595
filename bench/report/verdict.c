/* verdict.c: the few sentences a run ends with, computed from what it
 * measured, never from what the design expects.
 *
 * The comparison is ring against ps at the largest world both ran (the
 * first model, batch and bucket size): the ratio of the records'
 * throughputs (the medians of their repetitions) and its range over the
 * repetitions (ring's slowest over ps's fastest, ring's fastest over ps's
 * slowest); when the two modes' ranges of throughput overlap, the
 * difference is called within noise instead of a ratio.
 *
 * Each run's bottleneck is the one its measurements show:
 *   the master's link   ps on emulated hosts, host 0's link busy (either
 *                       direction) at least BUSY of the measured steps
 *                       and carrying at least 1.5x a worker's link;
 *   the links           every link busy at least BUSY;
 *   the master's CPU    ps whose rank 0 is busy (compute, reduction,
 *                       optimizer) IMBALANCE x the mean rank or more;
 *   the shared cores    more ranks on this machine than cores: they take
 *                       turns on the cores, communication included;
 *   compute             the exposed communication under WAIT of the step;
 *   communication       otherwise.
 * On loopback with more ranks than cores the verdict first says that the
 * comparison is not meaningful there, and why, before any figure. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench/report/report.h"

#define BUSY 0.75
#define IMBALANCE 1.15
#define WAIT 0.2

typedef struct text {
  char *s;
  size_t cap, n;
} text;

static void say(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(text *t, const char *fmt, ...) {
  if (t->n >= t->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  if (w > 0) t->n += (size_t)w < t->cap - t->n ? (size_t)w : t->cap - t->n - 1;
}

/* ranks of the run that share this machine's cores: all of them on
 * emulated hosts, else the most on one host */
static int ranks_here(const gs_summary *r) {
  if (r->hosts > 0) return r->world;
  int most = 0;
  for (int a = 0; a < r->world; a++) {
    int same = 0;
    for (int b = 0; b < r->world; b++) same += !strcmp(r->per_rank[a].host, r->per_rank[b].host);
    if (same > most) most = same;
  }
  return most;
}

static double wait_share(const gs_summary *r) {
  double w = 0, st = 0;
  for (int i = 0; i < r->world; i++) {
    w += r->per_rank[i].comm_wait_s;
    st += r->per_rank[i].step_s;
  }
  return st > 0 ? w / st : 0;
}

static double hidden_share(const gs_summary *r) {
  double h = 0, w = 0;
  for (int i = 0; i < r->world; i++) {
    h += r->per_rank[i].comm_hidden_s;
    w += r->per_rank[i].comm_wait_s + r->per_rank[i].reduce_s;
  }
  return h + w > 0 ? h / (h + w) : 0;
}

/* host 0's busy share and its bytes over the other links' mean; the other
 * links' busy range; the spread of every link's bytes (max / min - 1) */
static void link_figures(const gs_summary *r, double *busy0, double *vs, double *lo,
                         double *hi, double *spread) {
  *busy0 = *vs = *lo = *hi = *spread = NAN;
  int n = r->nlinks < r->hosts ? r->nlinks : r->hosts;
  if (n < 2) return;
  double b0 = r->links[0].tx_bytes + r->links[0].rx_bytes, others = 0, bmin = INFINITY, bmax = 0;
  *busy0 = r->links[0].busy;
  *lo = *hi = r->links[0].busy;
  for (int i = 0; i < n; i++) {
    double b = r->links[i].tx_bytes + r->links[i].rx_bytes;
    if (i) others += b / (n - 1);
    if (b < bmin) bmin = b;
    if (b > bmax) bmax = b;
    if (r->links[i].busy < *lo) *lo = r->links[i].busy;
    if (r->links[i].busy > *hi) *hi = r->links[i].busy;
  }
  *vs = others > 0 ? b0 / others : NAN;
  *spread = bmin > 0 ? bmax / bmin - 1 : NAN;
}

static const char *bottleneck(const gs_summary *r, long cores) {
  double busy0, vs, lo, hi, spread;
  link_figures(r, &busy0, &vs, &lo, &hi, &spread);
  bool master = r->mode == GS_MODE_PS && isfinite(r->master_bytes_vs_worker);
  if (master && isfinite(busy0) && busy0 >= BUSY && vs >= 1.5) return "the master's link";
  if (isfinite(lo) && lo >= BUSY) return "the links";
  if (master && r->imbalance >= IMBALANCE && !(cores > 0 && ranks_here(r) > cores))
    return "the master's CPU";
  if (cores > 0 && ranks_here(r) > cores) return "the shared cores";
  if (wait_share(r) < WAIT) return "compute";
  return "communication";
}

static void rate_of(const gs_summary *r, char *buf, size_t cap) {
  if (r->hosts <= 0) {
    snprintf(buf, cap, "loopback");
    return;
  }
  char rate[32];
  gs_rate_text(r->link_rate_bps, rate, sizeof rate);
  snprintf(buf, cap, "%s links", rate);
}

/* what a run's bottleneck means, in its own figures */
static void evidence(text *t, const gs_summary *r, const char *bn, long cores, gs_verdict *v) {
  double busy0, vs, lo, hi, spread;
  link_figures(r, &busy0, &vs, &lo, &hi, &spread);
  const char *mode = gs_mode_name(r->mode);
  if (r->mode == GS_MODE_PS && isfinite(busy0) && isfinite(vs)) {
    v->ps_link_busy = busy0;
    v->ps_link_bytes_vs_worker = vs;
    say(t, " %s: host 0's link busy %.0f%% of the step, carrying %.2fx what a worker's link "
        "carries", mode, 100 * busy0, vs);
  } else if (r->mode == GS_MODE_ALLREDUCE && isfinite(lo)) {
    v->ring_link_busy_lo = lo;
    v->ring_link_busy_hi = hi;
    v->ring_link_bytes_spread = spread;
    if (hi - lo < 0.005) say(t, " %s: every link busy %.0f%%", mode, 100 * lo);
    else say(t, " %s: every link busy %.0f-%.0f%%", mode, 100 * lo, 100 * hi);
    if (spread < 0.01) say(t, ", the same bytes on each (within 1%%)");
    else say(t, ", the same bytes on each (within %.0f%%)", 100 * spread);
  } else if (r->mode == GS_MODE_PS && isfinite(r->master_bytes_vs_worker)) {
    say(t, " %s: rank 0 busy %.0f ms per step against %.0f ms on average (imbalance %.2f), "
        "moving %.2fx a worker's bytes", mode, 1e3 * r->per_rank[0].busy_s,
        1e3 * r->per_rank[0].busy_s / r->imbalance, r->imbalance, r->master_bytes_vs_worker);
  } else {
    say(t, " %s: exposed communication %.0f%% of the step", mode, 100 * wait_share(r));
  }
  if (r->mode == GS_MODE_ALLREDUCE && r->overlap) {
    v->ring_hidden_share = hidden_share(r);
    say(t, ", %.0f%% of its communication behind backward", 100 * v->ring_hidden_share);
  }
  if (!strcmp(bn, "the shared cores"))
    say(t, "; bottleneck: the shared cores (%d ranks on %ld)", ranks_here(r), cores);
  else
    say(t, "; bottleneck: %s", bn);
  say(t, ".");
}

void gs_verdict_of(const gs_summary *runs, size_t n, long cores, const char *link,
                   gs_verdict *v) {
  memset(v, 0, sizeof *v);
  v->ratio = v->ratio_lo = v->ratio_hi = NAN;
  v->ps_link_busy = v->ps_link_bytes_vs_worker = NAN;
  v->ring_link_busy_lo = v->ring_link_busy_hi = v->ring_link_bytes_spread = NAN;
  v->ring_hidden_share = NAN;
  v->meaningful = true;
  text t = {v->text, sizeof v->text, 0};
  const gs_summary *ps = NULL, *ring = NULL, *first = NULL;
  for (size_t i = 0; i < n; i++)
    if (runs[i].mode != GS_MODE_SINGLE && runs[i].world > 1 && !first) first = &runs[i];
  for (size_t i = 0; first && i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->mode != GS_MODE_ALLREDUCE || r->world < 2) continue;
    const gs_summary *p = gs_summary_find(runs, n, GS_MODE_PS, r->world, r);
    if (p && r->hosts == p->hosts && (!ring || r->world > ring->world)) {
      ring = r;
      ps = p;
    }
  }
  if (!first) {
    say(&t, "Nothing to compare: no run had more than one rank.");
    return;
  }
  const gs_summary *top = ring ? ring : first;
  int here = ranks_here(top);
  bool crowded = cores > 0 && here > cores;
  if (top->hosts <= 0 && crowded) {
    v->meaningful = false;
    say(&t, "Not a meaningful comparison here: at world %d, %d ranks share %ld core%s over "
        "loopback, so their communication is memory copies by the cores that also compute, "
        "and the figures measure the OS scheduler as much as the synchronization. Where the "
        "ranks talked: %s. As measured anyway:", top->world, here, cores, cores > 1 ? "s" : "",
        link);
  }
  char where[64];
  rate_of(top, where, sizeof where);
  if (ring) {
    double plo, phi, rlo, rhi;
    gs_summary_spread(ps, &plo, &phi);
    gs_summary_spread(ring, &rlo, &rhi);
    v->world = ring->world;
    v->hosts = ring->hosts;
    v->ratio = ring->throughput_samples_per_s / ps->throughput_samples_per_s;
    v->ratio_lo = rlo / phi;
    v->ratio_hi = rhi / plo;
    v->within_noise = rlo <= phi && plo <= rhi;
    int reps = ring->nrepeats < ps->nrepeats ? ring->nrepeats : ps->nrepeats;
    say(&t, "%sworld %d on %s: ", t.n ? " " : "", ring->world, where);
    if (v->within_noise && reps > 1)
      say(&t, "ring and ps are within noise of each other (ring %.0f-%.0f, ps %.0f-%.0f "
          "samples/s over %d runs each; median ratio %.2fx).", rlo, rhi, plo, phi, reps,
          v->ratio);
    else if (reps > 1)
      say(&t, "ring %.2fx the throughput of ps (medians of %d runs each; %.2f-%.2fx from the "
          "slowest to the fastest).", v->ratio, reps, v->ratio_lo, v->ratio_hi);
    else
      say(&t, "ring %.2fx the throughput of ps (one run each: --repeat K shows the spread).",
          v->ratio);
    snprintf(v->ps_bottleneck, sizeof v->ps_bottleneck, "%s", bottleneck(ps, cores));
    snprintf(v->ring_bottleneck, sizeof v->ring_bottleneck, "%s", bottleneck(ring, cores));
    evidence(&t, ps, v->ps_bottleneck, cores, v);
    evidence(&t, ring, v->ring_bottleneck, cores, v);
  } else {
    v->world = top->world;
    v->hosts = top->hosts;
    say(&t, "%s%s at world %d on %s: %.0f samples/s (no %s run beside it to compare with).",
        t.n ? " " : "", gs_mode_name(top->mode), top->world, where,
        top->throughput_samples_per_s, top->mode == GS_MODE_PS ? "ring" : "ps");
    char *bn = top->mode == GS_MODE_PS ? v->ps_bottleneck : v->ring_bottleneck;
    snprintf(bn, sizeof v->ps_bottleneck, "%s", bottleneck(top, cores));
    evidence(&t, top, bn, cores, v);
  }
  gs_stale_verdict(runs, n, v->text, sizeof v->text);
}

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

json_t *gs_verdict_json(const gs_verdict *v) {
  return json_pack("{s:s, s:i, s:i, s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
                   "s:s, s:s}", "text", v->text, "world", v->world, "hosts", v->hosts,
                   "meaningful", v->meaningful, "within_noise", v->within_noise, "ratio",
                   num(v->ratio), "ratio_lo", num(v->ratio_lo), "ratio_hi", num(v->ratio_hi),
                   "ps_link_busy", num(v->ps_link_busy), "ps_link_bytes_vs_worker",
                   num(v->ps_link_bytes_vs_worker), "ring_link_busy_lo",
                   num(v->ring_link_busy_lo), "ring_link_busy_hi", num(v->ring_link_busy_hi),
                   "ring_link_bytes_spread", num(v->ring_link_bytes_spread),
                   "ring_hidden_share", num(v->ring_hidden_share), "ps_bottleneck",
                   v->ps_bottleneck, "ring_bottleneck", v->ring_bottleneck);
}

void gs_verdict_print(FILE *f, const char *txt) {
  fprintf(f, "\n== verdict ==\n");
  /* wrapped at 100 columns */
  const char *p = txt;
  while (*p) {
    size_t len = strlen(p);
    if (len > 100) {
      len = 100;
      while (len > 0 && p[len] != ' ') len--;
      if (len == 0) len = 100;
    }
    fprintf(f, "  %.*s\n", (int)len, p);
    p += len;
    while (*p == ' ') p++;
  }
}
