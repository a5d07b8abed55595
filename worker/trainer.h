/* trainer.h: the trainer's state, inside worker/ only: the training loop
 * (trainer.c) and evaluation (evaluate.c) share it. */
#ifndef GS_WORKER_TRAINER_H
#define GS_WORKER_TRAINER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "worker/data.h"
#include "worker/model.h"
#include "worker/sampler.h"
#include "worker/worker.h"

struct gs_trainer {
  gs_train_opts o;
  char *model_spec, *data_spec, *freeze_spec;
  gs_kernels *k;
  gs_model *m;
  gs_dataset *d;          /* NULL for profiles */
  gs_sampler sampler;
  float *params, *grads;  /* device */
  gs_bucket *buckets;      /* over the parameters that train (tparams when some are frozen) */
  int nbuckets;
  gs_compress_tensor *ctensors;  /* the tensors that train as matrices, for compression */
  int nctensors;
  int *tensor_bucket;     /* bucket of each tensor */
  size_t *bucket_left;    /* tensors still to come this step, per bucket */
  int next_ready;         /* first bucket not yet handed over */
  gs_scaler scaler;
  float scale;            /* loss scale of the next step */
  int64_t step, epoch, pos;
  double last_backward_s; /* the previous step's backward (stragglers' base) */
  int64_t *shard;         /* this epoch's indices */
  /* The dataset, this epoch's indices and evaluation's indices where the
   * kernels run: on a GPU device memory (the data uploaded once, the
   * indices once per epoch), so a step reads no host data and waits on no
   * copy, as PyTorch does with a dataset held on the GPU; on the CPU the
   * host arrays themselves. */
  const uint8_t *dpixels;
  const int32_t *dlabels;
  int64_t *dshard, *didx;
  bool device_data;
  gs_sync *sync;          /* during run */
  double wall_offset;     /* gs_wall() - gs_now() */
  gs_step_row *rows;
  size_t nrows, caprows;
  pthread_mutex_t span_lock;
  gs_span *spans;
  size_t nspans, capspans;
  char desc[600];
  /* --freeze (freeze.c): NULL / 0 without it. frozen[i]: tensor i does not
   * train; toff[i]: where a tensor that trains starts in the compact copy
   * tparams / tgrads (ntrain floats each), which the backend is given */
  bool *frozen;
  size_t *toff;
  size_t ntrain;
  float *tparams, *tgrads;
};

/* freeze.c: mark the tensors of spec's layers ("fc1,conv2"; NULL or "":
 * none) and make the compact copy of the others (after the parameters are
 * initialized); GS_EINVAL naming a layer the model lacks, or a spec that
 * freezes everything. */
int gs_freeze_setup(gs_trainer *t, const char *spec, gs_err *e);
/* tensor i's gradient (final) into the compact gradients */
void gs_freeze_grad(gs_trainer *t, int i);
/* the compact parameters back into the model's buffer (queued on the
 * kernels' stream); nothing without --freeze */
void gs_freeze_params_out(const gs_trainer *t);
void gs_freeze_free(gs_trainer *t);

#endif
