/* model.h: the networks a trainer trains (internal to worker/).
 *
 * A model is a list of tensors laid out back to back in ONE flat parameter
 * buffer, in PyTorch's parameters() order with state_dict names and shapes
 * (fc1.weight [out, in], fc1.bias [out], conv1.weight [out, in, kh, kw]...),
 * plus forward and backward over that buffer and one flat gradient buffer of
 * the same layout. The model owns its activations and scratch on the
 * kernels' device; the trainer owns the parameters and gradients.
 *
 * Specs:
 *   mlp:IN-H1-...-OUT   Linear layers with ReLU between them (fc1, fc2, ...)
 *   lenet               the seeds' CIFAR-10 net: conv1 3->6 5x5, ReLU, max-pool
 *                       2, conv2 6->16 5x5, ReLU, max-pool 2, flatten (NCHW),
 *                       fc1 400->120, ReLU, fc2 120->84, ReLU, fc3 84->10
 *   resnet50, vgg16, bert-base, vgg11, profile:FILE
 *                       profiles (profile.c, a network as tools/profile_model.py
 *                       measured it): the real tensors, emulated compute,
 *                       pseudo-gradients, dummy loss 0.
 * The loss is softmax cross-entropy, mean over the batch.
 *
 * Backward writes the gradients from the last tensor to the first and calls
 * the hook once per tensor, strictly in descending tensor order, after the
 * layer that owns it has finished reading its parameters (the trainer may
 * hand a bucket to a backend that updates those parameters at once).
 *
 * Mixed precision (compute F16 / BF16): the forward converts the fp32
 * master parameters to low-precision copies; Linear layers run gemm_lp on
 * low-precision weights and activations (fp32 accumulation), convolutions
 * run the fp32 GEMM on values rounded through the dtype (the same numbers on
 * a CPU, where gemm_lp widens to fp32 anyway); every layer output and every
 * incoming gradient is rounded through the dtype, biases included, as
 * autocast would store them. Gradients of parameters are written in fp32. */
#ifndef GS_MODEL_H
#define GS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef struct gs_tensor {
  char name[64];
  int ndim;
  int64_t shape[4];
  size_t offset, count;   /* elements of the flat buffer */
  /* PyTorch's default initialization: uniform(-bound, bound) with bound =
   * 1/sqrt(fan_in) for nn.Linear / nn.Conv2d weights and biases
   * (kaiming_uniform_(a=sqrt(5))), or a constant (norm layers: 1 and 0). */
  bool init_uniform;
  float init_bound, init_const;
  /* profiles: multiply-adds per sample of the layer work that produces
   * this gradient (0 elsewhere: real models are timed, not counted) */
  double macs;
  /* profiles: the measured time charged to this tensor at the profile's
   * batch: its layer's forward (on one tensor of the layer), and the
   * backward spent before its gradient is ready since the one before */
  double fwd_s, bwd_s;
} gs_tensor;

/* Backward's per-tensor notice that a gradient is final; non-zero stops
 * backward and is returned. */
typedef int (*gs_grad_hook)(void *ctx, int tensor, gs_err *e);

typedef struct gs_model gs_model;
typedef struct gs_model_ops {
  /* logits and the mean loss of the batch in m->input / m->labels; *loss
   * and *correct are written by the time the kernels' next sync returns
   * (xent_forward's contract), which also reports a bad label */
  int (*forward)(gs_model *m, const float *params, int batch, float *loss, int *correct,
                 gs_err *e);
  /* gradients of loss * scale, after a forward of the same batch */
  int (*backward)(gs_model *m, const float *params, float *grads, int batch, float scale,
                  gs_grad_hook hook, void *ctx, gs_err *e);
  void (*destroy)(gs_model *m);
} gs_model_ops;

struct gs_model {
  const gs_model_ops *ops;
  gs_kernels *k;
  gs_dtype compute;
  int max_batch;
  int ntensors;
  gs_tensor *tensors;
  size_t nparams;
  int in_c, in_h, in_w;   /* one sample; an MLP is 1 x 1 x IN */
  bool flat;              /* takes any sample shape with in_size values */
  size_t in_size;         /* 0: takes no data (profiles) */
  int classes;
  float *input;           /* device, max_batch x in_size */
  int32_t *labels;        /* device, max_batch */
  int64_t step;           /* set by the trainer (profiles' pseudo-gradients) */
  int prof_batch;         /* profiles: the batch they were measured at, and */
  double prof_fwd_s, prof_bwd_s; /* ... forward and backward per sample there */
  int rank;
  char desc[160];
};

/* A model from its spec, for batches of up to max_batch. compute_ms,
 * compute_scale (gs_model_create_scaled) and seed only matter to profiles. */
int gs_model_create(const char *spec, gs_kernels *k, int max_batch, gs_dtype compute,
                    double compute_ms, uint64_t seed, gs_model **out, gs_err *e);
void gs_model_destroy(gs_model *m);
/* PyTorch's default initialization of every tensor into host memory
 * (nparams floats), from the seed's init streams (rng.h). */
void gs_model_init_params(const gs_model *m, uint64_t seed, float *host);

/* Sequential networks, for mlp / lenet and for tests of layer mixes. */
typedef enum gs_layer_kind {
  GS_L_LINEAR,   /* out features; flattens its input */
  GS_L_CONV,     /* out channels, kernel x kernel, stride 1, no padding */
  GS_L_RELU,
  GS_L_POOL,     /* 2x2 max, stride 2 */
  GS_L_FLATTEN,
} gs_layer_kind;
typedef struct gs_layer_def {
  gs_layer_kind kind;
  int out, kernel;
} gs_layer_def;
/* Input c x h x w per sample; flat: the data may have any shape of that
 * size. Parameters are named conv1, conv2, ... and fc1, fc2, ... */
int gs_model_create_seq(const gs_layer_def *defs, int ndefs, int c, int h, int w, bool flat,
                        gs_kernels *k, int max_batch, gs_dtype compute, gs_model **out,
                        gs_err *e);

/* seq.c (spec = the text after "mlp:") */
int gs_model_create_mlp(const char *spec, gs_kernels *k, int max_batch, gs_dtype compute,
                        gs_model **out, gs_err *e);
int gs_model_create_lenet(gs_kernels *k, int max_batch, gs_dtype compute, gs_model **out,
                          gs_err *e);

/* profile.c: name is a built-in profile or profile:FILE */
bool gs_profile_known(const char *name);
int gs_model_create_profile(const char *name, gs_kernels *k, int max_batch, gs_dtype compute,
                            double compute_ms, uint64_t seed, gs_model **out, gs_err *e);
/* compute_scale > 0: every measured time x compute_scale at max_batch (from
 * the profile's batch) instead of compute_ms per step; 0: as above */
int gs_model_create_scaled(const char *name, gs_kernels *k, int max_batch, gs_dtype compute,
                           double compute_ms, double compute_scale, uint64_t seed, gs_model **out,
                           gs_err *e);

/* tensors.c, shared by seq.c and profile.c: append a tensor (offset assigned in
 * order). Returns its index or a negative code. */
int gs_model_add_tensor(gs_model *m, const char *name, int ndim, const int64_t *shape,
                        bool uniform, float bound_or_const, gs_err *e);

/* A directory of .npy files, one per tensor (checkpoint.c): save replaces
 * dir atomically (it may exist only holding .npy files), load reads each
 * tensor with its shape checked. host holds every tensor at its offset. */
int gs_ckpt_save(const char *dir, const gs_tensor *tensors, int ntensors, const float *host,
                 gs_err *e);
int gs_ckpt_load(const char *dir, const gs_tensor *tensors, int ntensors, float *host,
                 gs_err *e);

#endif
