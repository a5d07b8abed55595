/* mpi_allreduce.c: Open MPI's MPI_Allreduce measured the way gradsync's ring
 * is (bench/coll/perf.c): float32 sum, sizes -b..-e by factor -f, -w warm-up
 * and -n timed iterations per size, dst poisoned before and checked against
 * the exact sum after every iteration (rank r contributes ((i + 7r) mod 11)
 * - 5 to element i), time = max over ranks of the mean iteration time,
 * printed as nccl-tests does. A peer benchmark, not part of gradsync.
 *
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl tcp,self \
 *          ./mpi_allreduce -b 8 -e 256M -f 2 -n 20 -w 5 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  size_t minb = 8, maxb = 256u << 20;
  double factor = 2;
  int iters = 20, warmup = 5, ch;
  const char *title = "Open MPI MPI_Allreduce";
  while ((ch = getopt(argc, argv, "b:e:f:n:w:t:")) != -1) {
    switch (ch) {
    case 'b': minb = parse_size(optarg); break;
    case 'e': maxb = parse_size(optarg); break;
    case 'f': factor = atof(optarg); break;
    case 'n': iters = atoi(optarg); break;
    case 'w': warmup = atoi(optarg); break;
    case 't': title = optarg; break;
    default:
      if (rank == 0) fprintf(stderr, "usage: mpi_allreduce [-b B] [-e B] [-f F] [-n N] [-w N] [-t title]\n");
      MPI_Finalize();
      return 2;
    }
  }
  size_t maxn = maxb / 4;
  float *src = malloc(maxn * 4), *dst = malloc(maxn * 4);
  if (!src || !dst) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < maxn; i++) src[i] = (float)((int)((i + 7u * (size_t)rank) % 11u) - 5);
  float expect[11];
  for (int j = 0; j < 11; j++) {
    float s = 0;
    for (int r = 0; r < world; r++) s += (float)((int)((j + 7u * (size_t)r) % 11u) - 5);
    expect[j] = s;
  }
  if (rank == 0) {
    printf("# %s: all-reduce (sum) of float32, %d ranks, %d iterations after %d warm-up\n",
           title, world, iters, warmup);
    printf("# algbw = size / time; busbw = algbw x 2(n-1)/n = algbw x %.3f (GB/s = 1e9 bytes/s)\n",
           world > 1 ? 2.0 * (world - 1) / world : 0.0);
    printf("#%11s %12s %6s %6s %11s %8s %8s %8s\n", "size", "count", "type", "redop", "time",
           "algbw", "busbw", "#wrong");
    printf("#%11s %12s %6s %6s %11s %8s %8s %8s\n", "(B)", "(elements)", "", "", "(us)",
           "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }
  size_t prev = 0;
  for (double b = (double)minb; b <= (double)maxb + 0.5; b *= factor) {
    size_t bytes = (size_t)b / 4 * 4;
    if (bytes == 0 || bytes == prev) continue;
    prev = bytes;
    size_t n = bytes / 4;
    double total = 0;
    unsigned long long wrong = 0;
    for (int it = -warmup; it < iters; it++) {
      memset(dst, 0xff, bytes);
      double t0 = MPI_Wtime();
      MPI_Allreduce(src, dst, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double dt = MPI_Wtime() - t0;
      if (it >= 0) {
        total += dt;
        for (size_t i = 0, j = 0; i < n; i++, j = j == 10 ? 0 : j + 1) wrong += dst[i] != expect[j];
      }
    }
    double mean = total / iters, tmax;
    unsigned long long wsum;
    MPI_Allreduce(&mean, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&wrong, &wsum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      double algbw = bytes / tmax / 1e9;
      printf("%12zu %12zu %6s %6s %11.2f %8.3f %8.3f %8llu\n", bytes, n, "float", "sum",
             tmax * 1e6, algbw, algbw * (world > 1 ? 2.0 * (world - 1) / world : 0.0), wsum);
      fflush(stdout);
    }
  }
  free(src);
  free(dst);
  MPI_Finalize();
  return 0;
}
