/*===- shardc_rt.h - What emitted code calls ----------------------*- C -*-===//
 *
 * The ABI between the code shardc emits for a training step and the runtime.
 * The compiler decides everything about the step: which buffers exist, when
 * they are allocated and freed, which collective runs on which communicator
 * and when it is waited on. The runtime owns the process: MPI, the
 * communicators, the allocator, params and optimizer state, data, files and
 * the step loop.
 *
 *===----------------------------------------------------------------------===*/

#ifndef SHARDC_RT_SHARDC_RT_H
#define SHARDC_RT_SHARDC_RT_H

#include "shardc_rt/BFloat16.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shardc_rt_context shardc_rt_context;
typedef struct shardc_rt_request shardc_rt_request;

typedef enum {
  SHARDC_RT_F32 = 0,
  SHARDC_RT_I32 = 1,
  SHARDC_RT_BF16 = 2, /* bfloat16: the upper half of an f32 */
} shardc_rt_dtype;


typedef enum {
  SHARDC_RT_INIT_ZEROS = 0,
  SHARDC_RT_INIT_ONES = 1,
  SHARDC_RT_INIT_NORMAL = 2,  /* a = mean, b = std */
  SHARDC_RT_INIT_UNIFORM = 3, /* a = low, b = high */
} shardc_rt_init_kind;

/* A set of mesh axes: bit i stands for axis i. */
typedef uint32_t shardc_rt_axes;

/* The collectives, for counting the bytes each sends (shardc_rt_cuda_sent;
 * the host backend counts its own). */
typedef enum {
  SHARDC_RT_ALL_GATHER = 0,
  SHARDC_RT_REDUCE_SCATTER = 1,
  SHARDC_RT_ALL_REDUCE = 2,
} shardc_rt_collective;

/* How a tensor is split over a set of mesh axes. With no axes (0) every rank
 * holds the whole tensor. With layout dim0 the leading dimension is cut into
 * ceil(rows / group) rows per rank, the last ranks' shards padded with zero
 * rows (FSDP2's uneven dim-0 shards). */
typedef struct {
  shardc_rt_axes axes;
} shardc_rt_split;

typedef struct {
  const char *name;
  int32_t rank;
  const int64_t *shape; /* the full tensor */
  shardc_rt_init_kind init;
  double a, b;
  int32_t frozen;
  shardc_rt_split storage;   /* what this rank stores */
  shardc_rt_split optimizer; /* the part it updates (ZeRO-1/2: a shard of a
                                full param) */
  int32_t flat;              /* its unit's flat parameter, or -1 */
  /* Of the stored value: F32, or BF16 under mixed precision (param-dtype
   * bf16), where the optimizer keeps an f32 master copy of the part it
   * updates and writes the value as the master rounded. */
  shardc_rt_dtype dtype;
} shardc_rt_param_info;

/* FSDP1's flat parameter of a unit: the members flattened and concatenated
 * in order, zero-padded to `group` equal pieces; this rank holds piece
 * groupIndex(split). It has its members' dtype. */
typedef struct {
  const char *unit;
  int32_t num_members;
  const int32_t *members; /* param indices, in flat order */
  shardc_rt_split split;
  /* 1: the piece is the members' storage (ZeRO-3, HSDP); 0: the members are
   * stored whole and the piece is what this rank's optimizer updates
   * (ZeRO-1, ZeRO-2). */
  int32_t stores;
} shardc_rt_flat_info;

typedef struct {
  const char *name;
  shardc_rt_dtype dtype;
  int32_t rank;
  const int64_t *shape; /* the global batch; ranks take consecutive rows */
  int64_t bound;        /* integer inputs: values lie in [0, bound); 2^31
                           where no op bounds them */
} shardc_rt_input_info;

typedef struct {
  /* What --shardc-ledger predicts for one rank, in bytes. */
  int64_t params, grads, optimizer, model_state, activations, peak;
  int64_t all_gather, reduce_scatter, all_reduce; /* sent per step */
  /* Model FLOPs per step (the ledger's modelFlops): the forward's matrix
   * products, times 3 for the forward and backward. */
  int64_t model_flops;
  /* The peak of the evaluation step (shardc-eval-step), in bytes. */
  int64_t eval_peak;
  /* Hardware FLOPs per step (the ledger's hardwareFlops): model_flops plus
   * the forward ops the backward recomputes. */
  int64_t hardware_flops;
  /* offload_optimizer: the bytes copied between host and device per step
   * (gradients out, updated values in, an f32 param's value both ways; with
   * offload_params, gradients out and each gather's shard in). The
   * `optimizer` bytes (and `params`) are then host memory, not in `peak`. */
  int64_t host_copies;
} shardc_rt_prediction;

typedef struct shardc_rt_model {
  const char *name, *strategy;
  int32_t mesh_rank;
  const char *const *axis_names;
  const int64_t *mesh_shape;
  const shardc_rt_param_info *params;
  int32_t num_params;
  const shardc_rt_input_info *inputs;
  int32_t num_inputs;
  const shardc_rt_flat_info *flats;
  int32_t num_flats;
  int32_t num_events; /* target=cuda: the events the step records */
  /* The micro-batches each rank's batch is cut into (grad-accum; 0 or 1:
   * none). */
  int64_t microbatches;
  double lr, beta1, beta2, eps, weight_decay;
  /* lr's schedule (train.adamw's): linear warm-up over `warmup` steps, then
   * a cosine decay to min_lr at step decay_steps (0: none). */
  int64_t warmup, decay_steps;
  double min_lr;
  /* Gradient clipping (train.adamw's max_grad_norm; 0: none): the step's
   * shardc_rt_clip_coefficient computes the norm, which the log reports. */
  double max_grad_norm;
  /* The weight decay applies to params of this rank or more (train.adamw's
   * decay_min_rank; 0: every param). */
  int64_t decay_min_rank;
  /* 1: the optimizer state (moments, f32 masters) lives in host memory and
   * every update runs on the host CPU, from gradients copied there; the
   * values it writes are copied back (shardc-shard offload-optimizer,
   * DeepSpeed's ZeRO-Offload). */
  int32_t offload_optimizer;
  /* 1 (with offload_optimizer): the stored params (ZeRO-3's and HSDP's
   * shards, flat or not) live in host memory too, where the updates write
   * them; each gather copies its shard into its slot of the gathered buffer
   * and gathers in place (shardc_rt_all_gather_from_host_start; shardc-shard
   * offload-params, FSDP2's CPUOffloadPolicy). */
  int32_t offload_params;
  shardc_rt_prediction predicted;
  /* One training step: reads params and inputs, ends with the optimizer
   * updates; writes the loss. */
  void (*step)(shardc_rt_context *, float *loss);
  /* The step's forward and loss alone, in its schedule: the loss on the
   * current inputs under the current params, nothing updated (--eval-every). */
  void (*eval_step)(shardc_rt_context *, float *loss);
} shardc_rt_model;

/* The executable's main: flags, MPI, init, the step loop, files. */
int shardc_rt_main(int argc, char **argv, const shardc_rt_model *model);

/*--- Memory -------------------------------------------------------------*/

/* Uninitialised bytes from the caching allocator, counted towards the
 * high-water mark. */
void *shardc_rt_alloc(shardc_rt_context *ctx, int64_t bytes);
void shardc_rt_free(shardc_rt_context *ctx, void *ptr);

/* A region of the step (a unit's forward or backward, "forward h.0"), for
 * --trace's timeline: regions nest, and each one begun ends in the step. */
void shardc_rt_region_begin(shardc_rt_context *ctx, const char *name);
void shardc_rt_region_end(shardc_rt_context *ctx);

/* This rank's stored part of param i (see shardc_rt_param_info::storage), of
 * the param's dtype. */
void *shardc_rt_param(shardc_rt_context *ctx, int32_t index);

/* This rank's rows of input i for the current step, of the input's dtype (a
 * BF16 input is read as f32 and rounded), in a fresh buffer that the step
 * frees. */
void *shardc_rt_input(shardc_rt_context *ctx, int32_t index);

/* Fails the job: an index input (a token id, a class label) at `position`
 * of the op's input was out of range. */
void shardc_rt_bad_index(shardc_rt_context *ctx, const char *op,
                         int64_t position);

/*--- Collectives: non-blocking, completed by shardc_rt_wait -------------*/

/* Buffers hold elements of `dtype` (F32 or BF16), which is also the type on
 * the wire and the one sums are rounded to; casting to it and padding are the
 * caller's. `what` says what the collective carries, for --trace (a param,
 * a unit, "loss"; "" for nothing in particular). */

/* out = the concatenation of every group member's `count` elements of in. */
shardc_rt_request *shardc_rt_all_gather_start(shardc_rt_context *ctx,
                                              shardc_rt_axes axes,
                                              shardc_rt_dtype dtype,
                                              const void *in, void *out,
                                              int64_t count, const char *what);
/* offload_params: the same, where this member's `count` elements are a
 * stored param in host memory at `host_in`: copied into this member's slot
 * of out (counted as a host copy), then gathered in place. */
shardc_rt_request *shardc_rt_all_gather_from_host_start(
    shardc_rt_context *ctx, shardc_rt_axes axes, shardc_rt_dtype dtype,
    const void *host_in, void *out, int64_t count, const char *what);
/* in holds group x count elements; out = this member's count elements of
 * the sum (or average) over the group. */
shardc_rt_request *
shardc_rt_reduce_scatter_start(shardc_rt_context *ctx, shardc_rt_axes axes,
                               shardc_rt_dtype dtype, const void *in, void *out,
                               int64_t count, int32_t average,
                               const char *what);
shardc_rt_request *
shardc_rt_all_reduce_start(shardc_rt_context *ctx, shardc_rt_axes axes,
                           shardc_rt_dtype dtype, const void *in, void *out,
                           int64_t count, int32_t average, const char *what);
void shardc_rt_wait(shardc_rt_context *ctx, shardc_rt_request *request);

/* This rank's index in the group of ranks spanning `axes`. */
int64_t shardc_rt_group_index(shardc_rt_context *ctx, shardc_rt_axes axes);

/*--- Optimizer ------------------------------------------------------------*/

/* Gradients are F32 or BF16 (`grad_dtype`); an `updated` output has the
 * param's dtype. A BF16 param is updated in its f32 master copy, and its
 * value (and `updated`) become the master rounded. Where `clip` is not null
 * the update takes the gradient times *clip (shardc_rt_clip_coefficient's
 * result); null takes it as it is. */

/* AdamW on param i's stored part, with a gradient of the same size. */
void shardc_rt_adamw(shardc_rt_context *ctx, int32_t index, const void *grad,
                     shardc_rt_dtype grad_dtype, const float *clip);
/* One update of shardc_rt_adamw_group: param `index`'s stored part (as
 * shardc_rt_adamw) or, where `flat` is non-zero, the stored piece of flat
 * parameter `index` (as shardc_rt_adamw_flat without an output). */
typedef struct {
  int32_t index;
  int32_t flat;
  const void *grad;
  shardc_rt_dtype grad_dtype;
  const float *clip;
} shardc_rt_adamw_update;
/* The `count` updates at once, each with the result it has alone: one
 * multi-tensor launch on the GPU (torch's fused AdamW) instead of one each. */
void shardc_rt_adamw_group(shardc_rt_context *ctx, int32_t count,
                           const shardc_rt_adamw_update *updates);
/* AdamW on the shard of param i this rank owns (its optimizer split), from
 * that shard's gradient; writes the updated shard to `updated`. */
void shardc_rt_adamw_shard(shardc_rt_context *ctx, int32_t index,
                           const void *grad, shardc_rt_dtype grad_dtype,
                           const float *clip, void *updated);
/* This rank's piece of flat parameter g (shardc_rt_flat_info). */
void *shardc_rt_flat_param(shardc_rt_context *ctx, int32_t group);
/* AdamW on this rank's piece of flat parameter g from the piece's gradient;
 * writes the updated piece to `updated` unless it is null. */
void shardc_rt_adamw_flat(shardc_rt_context *ctx, int32_t group,
                          const void *grad, shardc_rt_dtype grad_dtype,
                          const float *clip, void *updated);

/* Gradient clipping, as torch.nn.utils.clip_grad_norm_. */

/* `count` elements of `dtype` (F32 or BF16) in step memory. */
typedef struct {
  const void *data;
  shardc_rt_dtype dtype;
  int64_t count;
} shardc_rt_tensor_ref;
/* *sum = the sum of x * x over every element of the `count` tensors,
 * accumulated in double (in a fixed order: the same on every run) and
 * rounded to f32. */
void shardc_rt_sum_squares(shardc_rt_context *ctx, int32_t count,
                           const shardc_rt_tensor_ref *tensors, float *sum);
/* The most sums shardc_rt_clip_coefficient takes: a step has one per group
 * of ranks its gradients' pieces span, a handful (the compiler refuses more).
 */
#define SHARDC_RT_MAX_CLIP_SUMS 16
/* norm = sqrt(*sums[0] + ... + *sums[count - 1]) (1 to
 * SHARDC_RT_MAX_CLIP_SUMS sums) and
 * *coef = min(1, max_norm / (norm + 1e-6)); the step's norm is what the log
 * reports as grad_norm. */
void shardc_rt_clip_coefficient(shardc_rt_context *ctx, int32_t count,
                                const float *const *sums, double max_norm,
                                float *coef);
/* Overwrites param i's stored (whole) value with `full`, of its dtype. */
void shardc_rt_set_param(shardc_rt_context *ctx, int32_t index,
                         const void *full);

#ifdef __cplusplus
}
#endif

#endif /* SHARDC_RT_SHARDC_RT_H */
