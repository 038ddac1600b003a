// REQUIRES: cuda-compiler
// The CUDA step of every strategy: FileCheck the streams, events and NCCL
// calls in the schedule's order, then compile and link it for sm_90.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s
// RUN: shardc-opt %s --shardc-pipeline="strategy=hsdp mesh=2x2 output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=HSDP
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=2 output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=DDP
// One rank in bf16: each gradient's reduction is a conversion to f32, no
// NCCL call, and every update one multi-tensor launch.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=1 param-dtype=bf16 output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=ONE-BF16 --implicit-check-not=ncclReduceScatter --implicit-check-not=ncclAllReduce
// ONE-BF16: shardc_rt_cuda_convert_bf16_f32(K, [[G:v[0-9]+]], {{v[0-9]+}}, {{[0-9]+}});
// ONE-BF16: shardc_rt_adamw_group(ctx,
// grad-sync=microbatch: each micro-batch's reduce-scatters run in the loop,
// on the communication stream, and the loop sums their shards once the
// compute stream has waited for them.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2 grad-sync=microbatch output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=MICRO
// MICRO:      for (int64_t mb = 0; mb < 2; ++mb) {
// MICRO:      SHARDC_NCCL(ncclReduceScatter([[G:v[0-9]+]], [[S:v[0-9]+]], 9, ncclFloat, ncclAvg, nccl1, comm1));
// MICRO:      SHARDC_NCCL(ncclReduceScatter(
// MICRO:      SHARDC_CUDA(cudaStreamWaitEvent(compute,
// MICRO:      shardc_rt_cuda_accumulate_f32(K, {{v[0-9]+}}, [[S]], 9);
// MICRO-NOT:  ncclReduceScatter
// MICRO:      shardc_rt_adamw_group(ctx,
// offload-optimizer: the step calls the same updates after the same waits
// (the runtime copies their gradients to the host, updates there and copies
// the values back on the compute stream); the model says so, with the
// ledger's host copies per step last in its predictions.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 offload-optimizer=true output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=OFFLOAD
// OFFLOAD:      SHARDC_CUDA(cudaStreamWaitEvent(compute,
// OFFLOAD:      shardc_rt_adamw(ctx, 0, {{v[0-9]+}}, SHARDC_RT_F32, nullptr); // l0.w
// OFFLOAD:      model.offload_optimizer = 1;
// OFFLOAD:      model.predicted = {{{.*}}, [[COPIES:[1-9][0-9]*]]};
// offload-params: each gather first copies its shard from host memory
// into its slot of the result, on the gather's stream once the compute
// stream is there, then gathers in place; the model says so.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 offload-optimizer=true offload-params=true output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=HOSTPARAMS
// HOSTPARAMS:      [[W:v[0-9]+]] = static_cast<shardc_rt_bf16 *>(shardc_rt_param(ctx, 0)); // l0.w
// HOSTPARAMS:      shardc_rt_bf16 *[[OUT:v[0-9]+]] = static_cast<shardc_rt_bf16 *>(shardc_rt_alloc(ctx, 36));
// HOSTPARAMS:      SHARDC_CUDA(cudaStreamWaitEvent(comm1, [[READY:.*]], 0));
// HOSTPARAMS-NEXT: shardc_rt_cuda_collective_start(ctx, 1u, "l0.w .. l0.b (2)");
// HOSTPARAMS-NEXT: SHARDC_NCCL(ncclGroupStart());
// HOSTPARAMS-NEXT: void *[[SLOT:slot[0-9]+]] = shardc_rt_cuda_copy_to_gather_slot(ctx, 1u, [[OUT]], [[W]], 18);
// HOSTPARAMS-NEXT: SHARDC_NCCL(ncclAllGather([[SLOT]], [[OUT]], 9, ncclBfloat16, nccl1, comm1));
// HOSTPARAMS:      model.offload_params = 1;
// RUN: rm -rf %t && mkdir -p %t
// RUN: %shardc build %s --target cuda --strategy ddp --mesh 2 --quiet -o %t/ddp
// RUN: %shardc build %s --target cuda --strategy zero1 --mesh 2 --quiet -o %t/zero1
// RUN: %shardc build %s --target cuda --strategy zero2 --mesh 2 --layout flat --quiet -o %t/zero2
// RUN: %shardc build %s --target cuda --strategy zero3 --mesh 2 --grad-accum 2 --quiet -o %t/zero3
// RUN: %shardc build %s --target cuda --strategy zero3 --mesh 2 --grad-accum 2 --grad-sync microbatch --quiet -o %t/zero3-microbatch
// RUN: %shardc build %s --target cuda --strategy hsdp --mesh 2x2 --layout flat --quiet -o %t/hsdp
// RUN: %shardc build %s --target cuda --strategy zero3 --mesh 2 --param-dtype bf16 --quiet -o %t/zero3-bf16
// RUN: %shardc build %s --target cuda --strategy zero2 --mesh 2 --layout flat --param-dtype bf16 --reduce-dtype bf16 --grad-accum 2 --quiet -o %t/zero2-bf16
// RUN: %shardc build %s --target cuda --strategy ddp --mesh 2 --param-dtype bf16 --quiet -o %t/ddp-bf16
// RUN: %shardc build %s --target cuda --strategy zero3 --mesh 2 --param-dtype bf16 --offload-optimizer true --quiet -o %t/zero3-bf16-offload
// RUN: %shardc build %s --target cuda --strategy hsdp --mesh 2x2 --layout flat --offload-optimizer true --offload-params true --quiet -o %t/hsdp-offload-params
// RUN: ls %t | FileCheck %s --check-prefix=BUILT
// The tiny GPT calls every fused kernel (train-fuse), and links, in f32 and bf16.
// RUN: rm -rf %t.gpt && mkdir -p %t.gpt
// RUN: %shardc emit %S/../../../examples/tiny-gpt.mlir --target cuda --strategy zero3 --mesh 2 --quiet -o %t.gpt/step.cu
// RUN: FileCheck %s --check-prefix=GPT --input-file=%t.gpt/step.cu
// RUN: %shardc build %S/../../../examples/tiny-gpt.mlir --target cuda --strategy zero3 --mesh 2 --quiet -o %t.gpt/f32
// RUN: %shardc build %S/../../../examples/tiny-gpt.mlir --target cuda --strategy zero3 --mesh 2 --param-dtype bf16 --quiet -o %t.gpt/bf16
// reshard-after-forward=2 over mesh [node 2, local 2]: after a unit's
// forward the compute stream copies the rank's piece over `local` of each
// gathered param its backward reads, which the backward gathers on the
// `local` communicator (mask 2).
// RUN: %shardc emit %S/../../../examples/tiny-gpt.mlir --target cuda --strategy zero3 --mesh 4 --reshard-after-forward 2 --quiet -o %t.gpt/reshard.cu
// RUN: FileCheck %s --check-prefix=RESHARD --input-file=%t.gpt/reshard.cu
// RUN: %shardc build %S/../../../examples/tiny-gpt.mlir --target cuda --strategy zero3 --mesh 4 --reshard-after-forward 2 --param-dtype bf16 --quiet -o %t.gpt/reshard-bf16
// RUN: ls %t.gpt | FileCheck %s --check-prefix=GPT-BUILT
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=BF16

// GPT: shardc_rt_cuda_add_layernorm_f32(K,
// GPT: shardc_rt_cuda_linear_gelu_f32(K,
// GPT: shardc_rt_cuda_matmul_gelu_grad_f32(K,
// GPT: shardc_rt_cuda_layernorm_grad_add_f32(K,
// GPT: shardc_rt_cuda_matmul_bias_grad_f32(K,
// GPT-BUILT: bf16
// GPT-BUILT: f32
// GPT-BUILT: reshard-bf16
// RESHARD:      ncclComm_t nccl2 = shardc_rt_cuda_comm(ctx, 2u);
// RESHARD:      const int64_t [[FIRST:first[0-9]+]] = shardc_rt_group_index(ctx, 2u) * 8192;
// RESHARD-NEXT: const int64_t [[TAKEN:taken[0-9]+]] = [[FIRST]] >= 16384 ? 0 : [[FIRST]] + 8192 > 16384 ? 16384 - [[FIRST]] : 8192;
// RESHARD-NEXT: shardc_rt_cuda_copy_f32(K, [[KEPT:v[0-9]+]], [[FULL:v[0-9]+]] + [[FIRST]], [[TAKEN]]);
// RESHARD-NEXT: shardc_rt_cuda_fill_f32(K, [[KEPT]] + [[TAKEN]], 0.0f, 8192 - [[TAKEN]]);
// RESHARD-NEXT: shardc_rt_free(ctx, [[FULL]]);
// RESHARD:      SHARDC_NCCL(ncclAllGather([[KEPT]], {{v[0-9]+}}, 8192, ncclFloat, nccl2, comm2));

// CHECK: #include "shardc_rt/shardc_rt_cuda.h"
// CHECK-LABEL: void step(shardc_rt_context *ctx, float *loss) {
// CHECK-NEXT: shardc_rt_cuda_kernels *K = shardc_rt_cuda_kernels_of(ctx);
// CHECK-NEXT: cudaStream_t compute = shardc_rt_cuda_compute_stream(ctx);
// CHECK-NEXT: ncclComm_t nccl1 = shardc_rt_cuda_comm(ctx, 1u);
// CHECK-NEXT: cudaStream_t comm1 = shardc_rt_cuda_comm_stream(ctx, 1u);
// The unit's gathers, started one after the other: the communication
// stream waits for the compute stream's event, gathers both params in one
// NCCL group (one launch), counts the bytes they send ((2 - 1) x (9 + 3)
// f32), and records the one event the unit waits on, once.
// CHECK: float *[[WF:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 72));
// CHECK-NEXT: float *[[BF:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 24));
// CHECK-NEXT: SHARDC_CUDA(cudaEventRecord(shardc_rt_cuda_event(ctx, [[E0:[0-9]+]]), compute));
// CHECK-NEXT: SHARDC_CUDA(cudaStreamWaitEvent(comm1, shardc_rt_cuda_event(ctx, [[E0]]), 0));
// Its start and end are marked on the stream for --trace.
// CHECK-NEXT: shardc_rt_cuda_collective_start(ctx, 1u, "l0.w .. l0.b (2)");
// CHECK-NEXT: SHARDC_NCCL(ncclGroupStart());
// CHECK-NEXT: SHARDC_NCCL(ncclAllGather([[W:v[0-9]+]], [[WF]], 9, ncclFloat, nccl1, comm1));
// CHECK-NEXT: SHARDC_NCCL(ncclAllGather({{v[0-9]+}}, [[BF]], 3, ncclFloat, nccl1, comm1));
// CHECK-NEXT: SHARDC_NCCL(ncclGroupEnd());
// CHECK-NEXT: shardc_rt_cuda_sent(ctx, SHARDC_RT_ALL_GATHER, 1u, SHARDC_RT_F32, 12, 2);
// CHECK-NEXT: SHARDC_CUDA(cudaEventRecord(shardc_rt_cuda_event(ctx, [[E1:[0-9]+]]), comm1));
// CHECK-NEXT: SHARDC_CUDA(cudaStreamWaitEvent(compute, shardc_rt_cuda_event(ctx, [[E1]]), 0));
// CHECK-NEXT: // unit "l0"
// CHECK-NEXT: shardc_rt_region_begin(ctx, "forward l0");
// The linear and its GELU are one kernel (a GEMM epilogue): the
// preactivation and the activation are both written.
// CHECK-NEXT: float *[[PRE:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 40));
// CHECK-NEXT: float *[[ACT:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 40));
// CHECK-NEXT: shardc_rt_cuda_linear_gelu_f32(K, {{v[0-9]+}}, [[WF]], {{v[0-9]+}}, [[PRE]], [[ACT]], 2, 3, 5);
// The loss and the logits' gradient: one kernel, written over the logits.
// CHECK: float *[[DL:v[0-9]+]] = [[ACT]]; // in place: [[ACT]] dies here
// CHECK-NEXT: shardc_rt_cuda_cross_entropy_and_grad_f32(K, {{v[0-9]+}}, [[ACT]], {{v[0-9]+}}, {{v[0-9]+}}, [[DL]], 2, 5, 5);
// The gradients: 15 and 5 elements reduce-scattered into 9- and 3-element
// shards need padded staging copies, each made (and its gradient freed)
// before the one NCCL group of both, and freed at its wait; the compute
// stream waits for the group's event once.
// CHECK: float *[[ST:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 72));
// CHECK-NEXT: shardc_rt_cuda_copy_f32(K, [[ST]], {{v[0-9]+}}, 15);
// CHECK: float *[[STB:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 24));
// CHECK-NEXT: shardc_rt_cuda_copy_f32(K, [[STB]], {{v[0-9]+}}, 5);
// CHECK: SHARDC_NCCL(ncclGroupStart());
// CHECK-NEXT: SHARDC_NCCL(ncclReduceScatter([[ST]], {{v[0-9]+}}, 9, ncclFloat, ncclAvg, nccl1, comm1));
// CHECK-NEXT: SHARDC_NCCL(ncclReduceScatter([[STB]], {{v[0-9]+}}, 3, ncclFloat, ncclAvg, nccl1, comm1));
// CHECK-NEXT: SHARDC_NCCL(ncclGroupEnd());
// CHECK-NEXT: shardc_rt_cuda_sent(ctx, SHARDC_RT_REDUCE_SCATTER, 1u, SHARDC_RT_F32, 12, 2);
// CHECK-NEXT: SHARDC_CUDA(cudaEventRecord(shardc_rt_cuda_event(ctx, [[E2:[0-9]+]]), comm1));
// CHECK-NEXT: SHARDC_CUDA(cudaStreamWaitEvent(compute, shardc_rt_cuda_event(ctx, [[E2]]), 0));
// CHECK-NEXT: shardc_rt_free(ctx, [[ST]]);
// CHECK-NEXT: shardc_rt_adamw(ctx, 0,
// CHECK-NOT: cudaStreamWaitEvent(compute, shardc_rt_cuda_event(ctx, [[E2]])
// CHECK: shardc_rt_free(ctx, [[STB]]);
// CHECK-NEXT: shardc_rt_adamw(ctx, 1,
// CHECK: SHARDC_NCCL(ncclAllReduce({{v[0-9]+}}, [[L:v[0-9]+]], 1, ncclFloat, ncclAvg, nccl1, comm1));
// CHECK: SHARDC_CUDA(cudaMemcpyAsync(loss, [[L]], sizeof(float), cudaMemcpyDeviceToHost, compute));
// CHECK-NEXT: shardc_rt_free(ctx, [[L]]);
// CHECK-NEXT: }
// CHECK: model.num_events = {{[1-9][0-9]*}};
// CHECK-NOT: cudaDeviceSynchronize

// HSDP has a communicator per group: the shard axis, the replicate axis, both.
// HSDP-DAG: ncclComm_t nccl1 = shardc_rt_cuda_comm(ctx, 1u);
// HSDP-DAG: ncclComm_t nccl2 = shardc_rt_cuda_comm(ctx, 2u);
// HSDP-DAG: ncclComm_t nccl3 = shardc_rt_cuda_comm(ctx, 3u);
// HSDP: ncclReduceScatter({{.*}}, nccl2, comm2)
// HSDP: ncclAllReduce({{.*}}, nccl1, comm1)
// HSDP: ncclAllReduce({{.*}}, 1, ncclFloat, ncclAvg, nccl3, comm3)

// DDP packs one bucket on the compute stream and all-reduces it once; the
// compute stream waits for it, then updates both params in one multi-tensor
// AdamW.
// DDP: shardc_rt_cuda_copy_f32(K, [[B:v[0-9]+]] + 0,
// DDP: SHARDC_NCCL(ncclAllReduce([[B]], [[R:v[0-9]+]], 20, ncclFloat, ncclAvg, nccl1, comm1));
// DDP-NEXT: shardc_rt_cuda_sent(ctx, SHARDC_RT_ALL_REDUCE, 1u, SHARDC_RT_F32, 20, 1);
// DDP-NEXT: SHARDC_CUDA(cudaEventRecord(shardc_rt_cuda_event(ctx, [[E:[0-9]+]]), comm1));
// DDP: SHARDC_CUDA(cudaStreamWaitEvent(compute, shardc_rt_cuda_event(ctx, [[E]]), 0));
// DDP: {0, 0, ([[R]] + 0), SHARDC_RT_F32, nullptr}, // l0.w
// DDP-NEXT: {1, 0, ([[R]] + 15), SHARDC_RT_F32, nullptr}, // l0.b
// DDP-NEXT: };
// DDP-NEXT: shardc_rt_adamw_group(ctx, 2, updates);
// DDP-NOT: ncclAllGather

// BUILT: ddp
// BUILT-NEXT: ddp-bf16
// BUILT-NEXT: hsdp
// BUILT-NEXT: hsdp-offload-params
// BUILT-NEXT: zero1
// BUILT-NEXT: zero2
// BUILT-NEXT: zero2-bf16
// BUILT-NEXT: zero3
// BUILT-NEXT: zero3-bf16
// BUILT-NEXT: zero3-bf16-offload
// BUILT-NEXT: zero3-microbatch

// Mixed precision: params gathered in bf16, bf16 GEMMs, each bf16 gradient
// cast on the compute stream into an f32 staging copy that NCCL
// reduce-scatters in f32 and that is freed after the compute stream waits.
// BF16: SHARDC_NCCL(ncclAllGather({{v[0-9]+}}, [[WF:v[0-9]+]], 9, ncclBfloat16, nccl1, comm1));
// BF16: shardc_rt_cuda_linear_gelu_bf16(K, {{v[0-9]+}}, [[WF]],
// BF16: float *[[ST:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 72));
// BF16-NEXT: shardc_rt_cuda_convert_bf16_f32(K, [[ST]], {{v[0-9]+}}, 15);
// BF16-NEXT: shardc_rt_cuda_fill_f32(K, [[ST]] + 15, 0.0f, 3);
// BF16: SHARDC_NCCL(ncclReduceScatter([[ST]], {{v[0-9]+}}, 9, ncclFloat, ncclAvg, nccl1, comm1));
// BF16-NEXT: SHARDC_NCCL(ncclReduceScatter({{v[0-9]+}}, {{v[0-9]+}}, 3, ncclFloat, ncclAvg, nccl1, comm1));
// BF16-NEXT: SHARDC_NCCL(ncclGroupEnd());
// BF16-NEXT: shardc_rt_cuda_sent(ctx, SHARDC_RT_REDUCE_SCATTER, 1u, SHARDC_RT_F32, 12, 2);
// BF16-NEXT: SHARDC_CUDA(cudaEventRecord(shardc_rt_cuda_event(ctx, [[E:[0-9]+]]), comm1));
// BF16: SHARDC_CUDA(cudaStreamWaitEvent(compute, shardc_rt_cuda_event(ctx, [[E]]), 0));
// BF16-NEXT: shardc_rt_free(ctx, [[ST]]);
// BF16: shardc_rt_adamw(ctx, 0, {{v[0-9]+}}, SHARDC_RT_F32, nullptr); // l0.w

module {
  train.model @tiny batch 4 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
    %x = train.input "x" : tensor<4x3xf32>
    %y = train.input "y" : tensor<4xi32>
    %h = train.unit "l0"(%x) : (tensor<4x3xf32>) -> tensor<4x5xf32> {
    ^bb0(%a: tensor<4x3xf32>):
      %w = train.param "l0.w" init(#train.normal<std = 0.5>) : tensor<5x3xf32>
      %b = train.param "l0.b" init(#train.zeros) : tensor<5xf32>
      %l = train.linear %a, %w, %b : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
      %g = train.gelu %l : tensor<4x5xf32>
      train.yield %g : tensor<4x5xf32>
    }
    %loss = train.cross_entropy %h, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
    train.return %loss : tensor<f32>
  }
}
