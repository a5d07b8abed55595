/* single.h: `bench` in one process (world 1, the local backend). The
 * multi-process launcher calls gs_bench_single_main when no --mode is
 * given or for --world 1 runs it wants in-process. */
#ifndef GS_BENCH_SINGLE_H
#define GS_BENCH_SINGLE_H

/* Parse argv (getopt_long, argv[0] is the program name), train, print
 * progress and a final throughput line. Returns the process exit status:
 * 0 ok, 1 runtime error, 2 usage error (the message names the flag). */
int gs_bench_single_main(int argc, char **argv);

#endif
