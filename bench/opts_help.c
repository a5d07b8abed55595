/* opts_help.c: bench --help, printed from opts.c's flag table (each
 * flag's letter, name, argument, help and default, wrapped at 66 columns),
 * then examples and the launch conventions. */
#include <stdbool.h>
#include <string.h>

#include "bench/opts_internal.h"

void gs_opts_print_help(FILE *f, const flag *flags, size_t nflags) {
  fprintf(f,
          "usage: bench [flags]\n"
          "Measure a DataParallel-style parameter server (ps) against DDP-style ring\n"
          "all-reduce (ring) on the same model, data and machine.\n\n");
  for (size_t i = 0; i < nflags; i++) {
    const flag *x = &flags[i];
    char left[64], text[600];
    const char *def = x->show ? x->show : x->def;
    snprintf(left, sizeof left, "%s%c%s--%s%s%s", x->letter ? "-" : "", x->letter ? x->letter : ' ',
             x->letter ? ", " : "   ", x->name, x->arg ? " " : "", x->arg ? x->arg : "");
    snprintf(text, sizeof text, "%s%s%s%s", x->help, def ? " [" : "", def ? def : "",
             def ? "]" : "");
    /* wrap the text at 66 columns after the flag column */
    const char *p = text;
    bool first = true;
    while (*p) {
      size_t n = strlen(p);
      if (n > 66) {
        n = 66;
        while (n > 0 && p[n] != ' ') n--;
        if (n == 0) n = 66;
      }
      fprintf(f, "  %-28s %.*s\n", first ? left : "", (int)n, p);
      p += n;
      while (*p == ' ') p++;
      first = false;
    }
  }
  fprintf(f,
          "\nExamples:\n"
          "  bench                                  ps vs ring, default model, worlds 1, 2, 4, on\n"
          "        emulated 1 Gbit/s links where root (else loopback, saying why), 3 times each\n"
          "  bench --mode=ps --world 1,2,4          scaling of the parameter server\n"
          "  bench --mode=ring --collective allreduce -b 8 -e 256M -f 2 --world 2\n"
          "  bench --mode=local --model lenet --data cifar10:data_batch_1.bin --save-params p\n"
          "  bench --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 10.0.0.1 \\\n"
          "        --master-port 29500 --mode ring   (and --node-rank 1 on the other machine)\n"
          "  bench --calibrate --model resnet50      this machine's constants for the cost model\n"
          "  bench --project --world 8,64,512,4096 --hosts-per 8 --link 100gbit --latency 5us \\\n"
          "        --model resnet50 --calibration F  the cost model's prediction (no rank starts)\n"
          "  bench --hosts 2 --link 1gbit -- python3 train.py   a program of your own, a rank per\n"
          "        host of 2 emulated ones, with torchrun's variables (RANK, MASTER_ADDR, ...)\n"
          "Launch conventions: started by torchrun (RANK, WORLD_SIZE), Open MPI mpirun\n"
          "(OMPI_COMM_WORLD_*), MPICH mpiexec (PMI_RANK, PMI_SIZE) or Slurm srun\n"
          "(SLURM_PROCID, SLURM_NTASKS), bench joins as that one rank, with MASTER_ADDR /\n"
          "MASTER_PORT naming rank 0's rendezvous (README.md: Launching on several machines).\n");
}
