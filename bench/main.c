/* main.c: the bench executable. For now it trains in one process; the
 * multi-process launcher (--mode ps|ring) takes over this file. */
#include "bench/single.h"

int main(int argc, char **argv) { return gs_bench_single_main(argc, argv); }
