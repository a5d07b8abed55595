/* signals.c: how every role of bench stops when asked (job.h): SIGINT and
 * SIGTERM set gs_interrupted, which every wait polls, so a run stops at
 * its next wait with what it measured kept; SIGPIPE is ignored, so a peer
 * gone is an error of the write, not a death. */
#include <signal.h>
#include <string.h>

#include "bench/job/job.h"

static void on_signal(int sig) { gs_interrupted = sig; }

int gs_interrupt_status(void) { return 128 + (gs_interrupted > 0 ? gs_interrupted : SIGINT); }

void gs_bench_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}
