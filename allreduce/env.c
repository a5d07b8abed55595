/* env.c: the ring's tuning, from its options, else the environment, else
 * the defaults; and the process-wide malloc setting a program running the
 * ring asks for (gs_comm_tune_malloc). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/comm.h"

#define DEFAULT_CHUNK ((size_t)512 << 10)
#define DEFAULT_SMALL ((size_t)64 << 10)
#define DEFAULT_SOCKBUF 0 /* the kernel's autotuning: less system time than 4 MiB */
#define DEFAULT_INFLIGHT 2
/* Before sleeping on a receive, poll this long (yielding the core), in the
 * collectives small enough for it (comm.c). */
#define DEFAULT_SPIN_US 100

void gs_comm_tuning(const gs_comm_opts *o, gs_comm *r) {
  r->chunk_bytes = o->chunk_bytes ? o->chunk_bytes
                                   : gs_env_bytes("GS_RING_CHUNK", DEFAULT_CHUNK);
  r->small_bytes = o->small_bytes ? o->small_bytes
                                  : gs_env_bytes("GS_RING_SMALL", DEFAULT_SMALL);
  r->io_threads = o->io_threads > 0 ? o->io_threads
                                    : (int)gs_env_bytes("GS_RING_IO_THREADS", 1);
  r->sockbuf = o->sockbuf != 0 ? o->sockbuf
                               : (int)gs_env_bytes("GS_RING_SOCKBUF", DEFAULT_SOCKBUF);
  r->spin_us = o->spin_us > 0 ? o->spin_us
                              : (int)gs_env_bytes("GS_RING_SPIN_US", DEFAULT_SPIN_US);
  /* With more ranks than cores a polling rank takes the core from the
   * thread that would bring its message. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const char *spin_env = getenv("GS_RING_SPIN_US");
  if (o->spin_us <= 0 && !(spin_env && *spin_env) && cores > 0 && o->local_ranks > cores)
    r->spin_us = 0;
  r->inflight = o->inflight > 0 ? o->inflight
                                : (int)gs_env_bytes("GS_RING_INFLIGHT", DEFAULT_INFLIGHT);
  size_t ws = gs_dtype_size(o->wire);
  if (r->chunk_bytes < ws) r->chunk_bytes = ws;
  if (r->chunk_bytes > ((size_t)1 << 30)) r->chunk_bytes = (size_t)1 << 30;
}

void gs_comm_tune_malloc(void) {
  const char *s = getenv("GS_RING_MALLOPT");
  if (s && !strcmp(s, "0")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  /* glibc's largest */
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}
