// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" --mlir-print-debuginfo | shardc-translate --shardc-to-host-cpp | FileCheck %s
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=2 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=DDP
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero2 mesh=2 grad-accum=2 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=ACCUM
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 layout=flat output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=FLAT
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero2 mesh=2 layout=flat output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=FLAT2
// RUN: not shardc-translate --shardc-to-host-cpp %s 2>&1 | FileCheck %s --check-prefix=UNSHARDED
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=BF16
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 fuse=false output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=UNFUSED
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=2 param-dtype=bf16 reduce-dtype=bf16 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=BF16-WIRE
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 recompute=l0 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=RECOMPUTE
// The runtime builds one mesh's communicators: a collective or a shard on
// another mesh is refused, not run over @mesh's.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | sed -e 's/^  dist.mesh @mesh .*$/&\n  dist.mesh @other axes ["shard"] shape [2]/' -e '0,/all_gather_start %%1 on @mesh/s//all_gather_start %%1 on @other/' | not shardc-translate --shardc-to-host-cpp 2>&1 | FileCheck %s --check-prefix=OTHER-MESH
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | sed -e 's/^  dist.mesh @mesh .*$/&\n  dist.mesh @other axes ["shard"] shape [2]/' -e '0,/mesh = @mesh/s//mesh = @other/' | not shardc-translate --shardc-to-cuda 2>&1 | FileCheck %s --check-prefix=OTHER-SHARD
// OTHER-MESH: error: 'dist.all_gather_start' op is on mesh @other, but the emitted step runs over one mesh, @mesh
// OTHER-SHARD: error: 'train.param' op is on mesh @other, but the emitted step runs over one mesh, @mesh
// offload-params: each gather copies its shard from host memory into its
// slot of the result and gathers in place (the runtime's call does both).
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 offload-optimizer=true offload-params=true output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=HOSTPARAMS --implicit-check-not=shardc_rt_all_gather_start
// HOSTPARAMS:      float *[[W:v[0-9]+]] = static_cast<float *>(shardc_rt_param(ctx, 0)); // l0.w
// HOSTPARAMS:      float *[[OUT:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 72));
// HOSTPARAMS-NEXT: shardc_rt_request *{{r[0-9]+}} = shardc_rt_all_gather_from_host_start(ctx, 1u, SHARDC_RT_F32, [[W]], [[OUT]], 9, "l0.w");
// HOSTPARAMS:      model.offload_params = 1;

// A unit of 5 rows sharded over 2 ranks: 3-row shards, the second padded.
// CHECK-LABEL: const shardc_rt_param_info kParams[] = {
// CHECK-NEXT: {"l0.w", 2, kParamShape0, SHARDC_RT_INIT_NORMAL, 0.{{0+}}e+00, 5.{{0+}}e-01, 0, {1u}, {1u}, -1, SHARDC_RT_F32},
// CHECK-NEXT: {"l0.b", 1, kParamShape1, SHARDC_RT_INIT_ZEROS, 0, 0, 0, {1u}, {1u}, -1, SHARDC_RT_F32},
// Class labels lie below the logits' width.
// CHECK: {"y", SHARDC_RT_I32, 1, kInputShape1, 5},
// CHECK-LABEL: void step(shardc_rt_context *ctx, float *loss) {
// CHECK: float *[[W:v[0-9]+]] = static_cast<float *>(shardc_rt_param(ctx, 0)); // l0.w
// CHECK: float *[[X:v[0-9]+]] = static_cast<float *>(shardc_rt_input(ctx, 0)); // x
// The gathered buffer holds both padded shards: 2 x 9 floats.
// CHECK: float *[[WF:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 72));
// CHECK-NEXT: shardc_rt_request *[[RW:r[0-9]+]] = shardc_rt_all_gather_start(ctx, 1u, SHARDC_RT_F32, [[W]], [[WF]], 9, "l0.w");
// CHECK: shardc_rt_wait(ctx, [[RW]]);
// Each unit's forward and backward is a region of --trace's timeline.
// CHECK: // unit "l0"
// CHECK-NEXT: shardc_rt_region_begin(ctx, "forward l0");
// The linear and its GELU are one fused kernel (train-fuse), writing the
// preactivation and the activation; the gathered weight is freed right
// after its last use, the unit.
// CHECK: shardc_rt_linear_gelu_f32([[X]], [[WF]], {{v[0-9]+}}, [[L:v[0-9]+]], {{v[0-9]+}}, 2, 3, 5);
// CHECK-NEXT: shardc_rt_region_end(ctx);
// CHECK-NEXT: shardc_rt_free(ctx, [[WF]]);
// Unfused: the linear writes the preactivation, the GELU reads it.
// UNFUSED: shardc_rt_linear_f32({{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, [[L:v[0-9]+]], 2, 3, 5);
// UNFUSED: shardc_rt_gelu_f32([[L]], {{v[0-9]+}}, 10);
// The loss and the logits' gradient come from one kernel (train-fuse),
// which checks the labels and names the loss's place when one is bad.
// CHECK: shardc_rt_cross_entropy_and_grad_f32(
// CHECK-NEXT: shardc_rt_bad_index(ctx, "train.cross_entropy_and_grad at {{.*}}step-emitter-host.mlir:{{[0-9]+}}:{{[0-9]+}}", bad);
// Unfused, the pair.
// UNFUSED: shardc_rt_cross_entropy_f32({{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 2, 5, 5)
// UNFUSED: shardc_rt_cross_entropy_grad_f32({{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 2, 5, 5)
// CHECK: // backward "l0"
// CHECK-NEXT: shardc_rt_region_begin(ctx, "backward l0");
// The 5x3 weight gradient is reduce-scattered from 15 floats, padded to
// 2 x 9 in a staging copy, into a 9-float shard; the gradient is freed once
// copied, the copy at the wait.
// CHECK: float *[[P:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 72));
// CHECK-NEXT: shardc_rt_copy_f32([[P]], [[G:v[0-9]+]], 15);
// CHECK-NEXT: shardc_rt_fill_f32([[P]] + 15, 0.0f, 3);
// CHECK: shardc_rt_request *[[RS:r[0-9]+]] = shardc_rt_reduce_scatter_start(ctx, 1u, SHARDC_RT_F32, [[P]], [[GS:v[0-9]+]], 9, 1, "l0.w");
// CHECK-NEXT: shardc_rt_free(ctx, [[G]]);
// CHECK: shardc_rt_wait(ctx, [[RS]]);
// CHECK-NEXT: shardc_rt_free(ctx, [[P]]);
// CHECK-NEXT: shardc_rt_adamw(ctx, 0, [[GS]], SHARDC_RT_F32, nullptr); // l0.w
// CHECK-NEXT: shardc_rt_free(ctx, [[GS]]);
// CHECK: shardc_rt_all_reduce_start(ctx, 1u, SHARDC_RT_F32, {{v[0-9]+}}, [[LOSS:v[0-9]+]], 1, 1, "loss");
// CHECK: *loss = [[LOSS]][0];
// CHECK: model.strategy = "zero3";
// CHECK: model.microbatches = 1;
// CHECK: model.step = step;
// CHECK: return shardc_rt_main(argc, argv, &model);

// DDP packs both gradients into one bucket, all-reduces it and updates
// from views into it, both params in one multi-tensor AdamW; the bucket is
// freed after it.
// DDP: float *[[B:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 80));
// DDP: shardc_rt_copy_f32([[B]] + 0,
// DDP: shardc_rt_copy_f32([[B]] + 15,
// For --trace, each collective says what it carries: a bucket its first
// and last params and how many.
// DDP: shardc_rt_all_reduce_start(ctx, 1u, SHARDC_RT_F32, [[B]], [[R:v[0-9]+]], 20, 1, "l0.w .. l0.b (2)");
// DDP: const shardc_rt_adamw_update updates[] = {
// DDP-NEXT: {0, 0, ([[R]] + 0), SHARDC_RT_F32, nullptr}, // l0.w
// DDP-NEXT: {1, 0, ([[R]] + 15), SHARDC_RT_F32, nullptr}, // l0.b
// DDP-NEXT: };
// DDP-NEXT: shardc_rt_adamw_group(ctx, 2, updates);
// DDP-NEXT: }
// DDP-NEXT: shardc_rt_free(ctx, [[R]]);
// DDP-NOT: shardc_rt_adamw(

// Micro-batches: accumulators before the loop, slices of the inputs in it,
// the sums reduced after it. ZeRO-2 updates its shard and gathers it back.
// ACCUM: for (int64_t mb = 0; mb < 2; ++mb) {
// ACCUM: shardc_rt_linear_gelu_f32(({{v[0-9]+}} + mb * 3),
// ACCUM: shardc_rt_accumulate_f32(
// ACCUM: }
// ACCUM: shardc_rt_reduce_scatter_start(
// ACCUM: shardc_rt_adamw_shard(ctx, 0,
// ACCUM: shardc_rt_all_gather_start(
// ACCUM: shardc_rt_set_param(ctx, 0,
// The runtime's rank-count advice divides by the micro-batches.
// ACCUM: model.microbatches = 2;

// FSDP1: the unit's 20 elements in one flat parameter, 10 per rank; its
// members are not read, its gather is unpacked into views.
// FLAT: {"l0.w", {{.*}}, {1u}, {1u}, 0, SHARDC_RT_F32},
// FLAT: const int32_t kFlatMembers0[] = {0, 1};
// FLAT: {"l0", 2, kFlatMembers0, {1u}, 1},
// FLAT-NOT: shardc_rt_param(
// FLAT: float *[[F:v[0-9]+]] = static_cast<float *>(shardc_rt_flat_param(ctx, 0)); // unit "l0"
// FLAT: float *[[G:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 80));
// FLAT-NEXT: shardc_rt_request *[[R:r[0-9]+]] = shardc_rt_all_gather_start(ctx, 1u, SHARDC_RT_F32, [[F]], [[G]], 10, "l0");
// FLAT: shardc_rt_wait(ctx, [[R]]);
// FLAT: shardc_rt_linear_gelu_f32({{v[0-9]+}}, ([[G]] + 0), ([[G]] + 15),
// FLAT: float *[[P:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 80));
// FLAT-NEXT: shardc_rt_copy_f32([[P]] + 0, {{v[0-9]+}}, 15);
// FLAT-NEXT: shardc_rt_copy_f32([[P]] + 15, {{v[0-9]+}}, 5);
// FLAT: shardc_rt_reduce_scatter_start(ctx, 1u, SHARDC_RT_F32, [[P]], [[S:v[0-9]+]], 10, 1, "l0");
// FLAT: shardc_rt_adamw_flat(ctx, 0, [[S]], SHARDC_RT_F32, nullptr, nullptr); // unit "l0"
// FLAT: model.num_flats = 1;

// ZeRO-2 with a flat bucket: whole params, the optimizer's piece updated,
// gathered and written back.
// FLAT2: {"bucket0", 2, kFlatMembers0, {1u}, 0},
// FLAT2: shardc_rt_adamw_flat(ctx, 0, {{v[0-9]+}}, SHARDC_RT_F32, nullptr, [[U:v[0-9]+]]); // unit "bucket0"
// FLAT2: shardc_rt_all_gather_start(ctx, 1u, SHARDC_RT_F32, [[U]], [[W:v[0-9]+]], 10, "bucket0");
// FLAT2: shardc_rt_set_param(ctx, 0, ([[W]] + 0)); // l0.w
// FLAT2: shardc_rt_set_param(ctx, 1, ([[W]] + 15)); // l0.b

// UNSHARDED: error: 'train.model' op is not sharded: run --shardc-shard (and --shardc-schedule) first
// Mixed precision (FSDP2's MixedPrecisionPolicy(param_dtype=bf16,
// reduce_dtype=f32)): params, inputs and activations in bf16, the loss in
// f32; each bf16 gradient is cast to an f32 staging copy, padded to the
// equal pieces, and freed (as FSDP2 frees the unsharded gradient once
// copied into the reduce-scatter input); the copy is reduce-scattered in
// f32 and freed at the wait; the f32 shard updates the f32 master.
// BF16: {"l0.w", 2, kParamShape0, {{.*}}, -1, SHARDC_RT_BF16},
// BF16: {"x", SHARDC_RT_BF16, 2, kInputShape0, 0},
// BF16: shardc_rt_bf16 *[[W:v[0-9]+]] = static_cast<shardc_rt_bf16 *>(shardc_rt_param(ctx, 0)); // l0.w
// BF16: shardc_rt_bf16 *[[WF:v[0-9]+]] = static_cast<shardc_rt_bf16 *>(shardc_rt_alloc(ctx, 36));
// BF16-NEXT: shardc_rt_all_gather_start(ctx, 1u, SHARDC_RT_BF16, [[W]], [[WF]], 9, "l0.w");
// BF16: shardc_rt_linear_gelu_bf16(
// BF16: shardc_rt_fill_f32([[SEED:v[0-9]+]], 1.{{0+}}e+00f, 1);
// BF16-NEXT: float *[[L:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 4));
// BF16-NEXT: shardc_rt_bf16 *[[DL:v[0-9]+]] = [[LOGITS:v[0-9]+]]; // in place: [[LOGITS]] dies here
// BF16-NEXT: shardc_rt_cross_entropy_and_grad_bf16([[SEED]], [[LOGITS]], {{v[0-9]+}}, [[L]], [[DL]], 2, 5, 5)
// BF16: shardc_rt_matmul_bias_grad_bf16({{v[0-9]+}}, {{v[0-9]+}}, [[G:v[0-9]+]], {{v[0-9]+}}, 5, 2, 3, 1, 0);
// BF16: float *[[S:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 72));
// BF16-NEXT: shardc_rt_convert_bf16_f32([[S]], [[G]], 15);
// BF16-NEXT: shardc_rt_fill_f32([[S]] + 15, 0.0f, 3);
// BF16-NEXT: float *[[GS:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 36));
// BF16-NEXT: shardc_rt_request *[[R:r[0-9]+]] = shardc_rt_reduce_scatter_start(ctx, 1u, SHARDC_RT_F32, [[S]], [[GS]], 9, 1, "l0.w");
// BF16-NEXT: shardc_rt_free(ctx, [[G]]);
// BF16: shardc_rt_wait(ctx, [[R]]);
// BF16-NEXT: shardc_rt_free(ctx, [[S]]);
// BF16: shardc_rt_adamw(ctx, 0, [[GS]], SHARDC_RT_F32, nullptr); // l0.w

// reduce-dtype=bf16: the bucket travels in bf16 and the optimizer reads bf16.
// BF16-WIRE: shardc_rt_all_reduce_start(ctx, 1u, SHARDC_RT_BF16, [[B:v[0-9]+]], [[R:v[0-9]+]], 20, 1, "l0.w .. l0.b (2)");

// A recomputed forward is a region of the unit's backward, for --trace.
// RECOMPUTE: shardc_rt_region_begin(ctx, "backward l0");
// RECOMPUTE-NEXT: shardc_rt_region_begin(ctx, "recompute l0");
// RECOMPUTE-NEXT: float *{{v[0-9]+}} = static_cast<float *>(shardc_rt_alloc(ctx, 40));
// RECOMPUTE-NEXT: shardc_rt_linear_f32(
// RECOMPUTE: shardc_rt_region_end(ctx);
// RECOMPUTE: shardc_rt_region_end(ctx);
// BF16-WIRE: {0, 0, ([[R]] + 0), SHARDC_RT_BF16, nullptr}, // l0.w
// BF16-WIRE-NEXT: {1, 0, ([[R]] + 15), SHARDC_RT_BF16, nullptr}, // l0.b

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
