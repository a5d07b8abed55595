/* main.c: bench's entry. Everything it does is a role of the command line
 * (cli/roles.c picks it); here only what must happen before anything
 * else in the process. */
#include "allreduce/allreduce.h"
#include "bench/cli/cli.h"

int main(int argc, char **argv) {
  gs_comm_tune_malloc(); /* the ring's received chunks stay in the heap */
  return gs_bench_main(argc, argv);
}
