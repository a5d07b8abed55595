/* test_device_data.c: the trainer's data path on a table that claims to be
 * a GPU (tests/ps/fakedev.c, which checks that every op it watches gets
 * device pointers). On a device the dataset's pixels and labels, the
 * epoch's shuffled indices and evaluation's indices live in device memory
 * and gather_batch builds each batch there (worker/trainer.c); on the CPU
 * the host arrays are used directly. Both must train to the same bits:
 *  - 9 steps of batch 48 over 100 samples, shuffled: three epochs, each
 *    ending with a short batch of 4, so the indices are uploaded anew;
 *  - parameters bitwise equal, evaluation's accuracy and loss equal;
 *  - no op got a host pointer where a device one belongs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tests/ps/fakedev.h"
#include "worker/worker.h"

static float *train(gs_kernels *k, double *acc, double *loss) {
  gs_train_opts o;
  gs_train_opts_default(&o);
  o.model = "mlp:784-32-10";
  o.batch = 48;
  o.steps = 9;
  o.seed = 3;
  o.synthetic_samples = 100;
  gs_err e = {0};
  gs_trainer *t = NULL;
  CHECK_OK(gs_trainer_create(&o, k, &t, &e), &e);
  if (!t) return NULL;
  gs_sync_config c = {.rank = 0, .world = 1};
  gs_trainer_sync_config(t, &c);
  gs_sync *s = NULL;
  CHECK_OK(gs_sync_single(&c, &s, &e), &e);
  if (s) {
    CHECK_OK(gs_trainer_run(t, s, NULL, NULL, &e), &e);
    s->ops->close(s, true, &e);
  }
  size_t n;
  const gs_step_row *rows = gs_trainer_rows(t, &n);
  CHECK(n == 9 && rows[2].samples == 4 && rows[8].samples == 4 && rows[8].epoch == 2,
        "%zu rows; steps 3, 9 of %d and %d samples, last epoch %d", n, n > 2 ? rows[2].samples : -1,
        n > 8 ? rows[8].samples : -1, n > 8 ? (int)rows[8].epoch : -1);
  CHECK_OK(gs_trainer_evaluate(t, 0, acc, loss, &e), &e);
  float *p = calloc(gs_trainer_nparams(t), sizeof *p);
  CHECK_OK(gs_trainer_copy_params(t, p, &e), &e);
  gs_trainer_destroy(t);
  return p;
}

int main(void) {
  gs_err e = {0};
  gs_kernels *cpu = gs_kernels_cpu(1, &e), *dev = fakedev_create(&e);
  CHECK(cpu && dev, "%s", e.msg);
  if (!cpu || !dev) return 1;
  double acc1 = -1, loss1 = -1, acc2 = -2, loss2 = -2;
  float *p1 = train(cpu, &acc1, &loss1), *p2 = train(dev, &acc2, &loss2);
  size_t n = (size_t)784 * 32 + 32 + 32 * 10 + 10;
  CHECK(p1 && p2 && !memcmp(p1, p2, n * sizeof *p1),
        "parameters differ between the host and the device data paths");
  CHECK(acc1 == acc2 && loss1 == loss2, "evaluation: %.6f / %.9g vs %.6f / %.9g", acc1, loss1,
        acc2, loss2);
  CHECK(fakedev_violations() == 0, "%d op(s) got a host pointer where a device one belongs",
        fakedev_violations());
  printf("device data path: 9 steps over 3 epochs, bitwise the host path's parameters; "
         "evaluation %.4f / %.6f\n", acc2, loss2);
  free(p1);
  free(p2);
  dev->destroy(dev);
  cpu->destroy(cpu);
  return check_failures ? 1 : 0;
}
