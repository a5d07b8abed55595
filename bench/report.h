/* report.h (internal to bench/): the launcher's side: run every
 * combination of the sweep, then turn the runs' summaries into
 * report.json, the comparison table, the SVG charts and the merged trace;
 * and the collective benchmark's entry. */
#ifndef GS_BENCH_REPORT_H
#define GS_BENCH_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "bench/summary.h"

/* Launch every run of the sweep; returns the process exit code. */
int gs_sweep_main(gs_opts *o, int argc, char **argv);

/* header.c: the sweep's header (links, runs, each model's bucket plan);
 * the sentence saying where the ranks talk and why (report.json's
 * "links_chosen"); a link rate for people ("1 Gbit/s"). */
void gs_sweep_header(FILE *f, const gs_opts *o);
#define GS_LINK_SENTENCE_MAX 1400
const char *gs_link_sentence(const gs_opts *o, char *buf, size_t cap);
void gs_rate_text(double bps, char *buf, size_t cap);

/* verdict.c: what the sweep found, in a few plain sentences computed from
 * its runs (the records of gs_summary_repeats): ring against ps at the
 * largest world both ran, with the spread of the repetitions, and the
 * bottleneck each run measured (a link's busy share and bytes, the
 * master's CPU, cores shared by the ranks, or none); on loopback with more
 * ranks than cores, first that the comparison is not meaningful there and
 * why. cores: this machine's online cores; link: gs_link_sentence's. The
 * figures it quotes are in its JSON (report.json's "verdict"). */
typedef struct gs_verdict {
  char text[2048];
  int world;                  /* the world compared; 0: no pair of ps and ring */
  int hosts;                  /* its emulated hosts (0: loopback) */
  bool meaningful;            /* false: loopback with more ranks than cores */
  bool within_noise;          /* the repetitions' ranges of ps and ring overlap */
  double ratio, ratio_lo, ratio_hi; /* ring / ps throughput: medians; slowest/fastest */
  double ps_link_busy, ps_link_bytes_vs_worker; /* host 0's link in ps (NaN: loopback) */
  double ring_link_busy_lo, ring_link_busy_hi, ring_link_bytes_spread;
  double ring_hidden_share;   /* the ring's communication that ran behind backward */
  char ps_bottleneck[48], ring_bottleneck[48];
} gs_verdict;
void gs_verdict_of(const gs_summary *runs, size_t n, long cores, const char *link,
                   gs_verdict *v);
json_t *gs_verdict_json(const gs_verdict *v);
/* The verdict's text, wrapped, after a title line. */
void gs_verdict_print(FILE *f, const char *text);

/* report.json from the runs' summaries, the peers' rows (peer.c; NULL:
 * none), the environment and the configuration (a new reference; NULL with
 * e set). */
json_t *gs_report_json(const gs_opts *o, const gs_summary *runs, size_t n, json_t *peers,
                       bool interrupted, gs_err *e);
/* Write report.json, the SVG charts and trace.json into dir. */
int gs_report_write(const char *dir, const gs_opts *o, const gs_summary *runs, size_t n,
                    json_t *peers, bool interrupted, gs_err *e);
/* The collective benchmark's report: busbw.svg and report.html from the
 * tables of dir that invocation run_id wrote (every collective of it; none
 * of an earlier invocation into the same directory); nothing when there is
 * none. */
int gs_report_collective(const char *dir, const gs_opts *o, const char *run_id, gs_err *e);
/* A run's ranks on one host outnumber this machine's online cores: a
 * notice for the comparison (the runs then measure scheduling as much as
 * synchronization) written into buf, or false with buf empty. */
bool gs_oversubscribed(const gs_summary *runs, size_t n, char *buf, size_t cap);
/* --report DIR: print the tables of DIR/report.json's runs to out and draw
 * its charts again; every metric must be in the file (GS_EPROTO naming the
 * missing one otherwise). */
int gs_report_redraw(const char *dir, FILE *out, gs_err *e);
/* Free n summaries and the array. */
void gs_summaries_free(gs_summary *runs, size_t n);
/* --version: version, git revision, build type, CPU code path, libraries,
 * and whether a GPU is usable (or why not). */
void gs_version_print(FILE *f);

/* --peer torch (peer.c): whether the peer can run what o asks (a usage
 * error GS_EINVAL otherwise, torch missing included), and one run of it at
 * world with o->train's model, batch and bucket: its result as a row of
 * report.json's "peers" (a new reference). */
extern const char *const GS_PEER_LABEL;
int gs_peer_check(const gs_opts *o, gs_err *e);
int gs_peer_run(const gs_opts *o, int world, json_t **row, gs_err *e);

/* Why mode cannot run collective coll (NULL: it can): the sweep skips such
 * pairs of a --collective list. */
const char *gs_collective_skip(const gs_opts *o, int coll, gs_mode mode);
/* The collective benchmark (collective.c), as one rank of a job. */
int gs_collective_rank(const gs_opts *o, gs_mode mode, const gs_rank_env *env);

#endif
