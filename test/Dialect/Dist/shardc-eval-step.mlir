// The evaluation step: what the loss depends on, in the step's schedule.

// ZeRO-3 with two micro-batches: the forward's gathers (prefetched a unit
// ahead) stay, in the loop; units yield only their outputs (not the
// pre-activation kept for the backward); the loss is no longer fused with
// its gradient; the backward's re-gathers, the reduce-scatters and the
// updates go, and so do the frees (a buffer dies after its last use). The
// parameter declarations stay.
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2" --shardc-eval-step 2>/dev/null | FileCheck %s --check-prefix=Z3
// Z3-LABEL: train.model @mlp
// Z3-COUNT-4: train.param
// Z3:         train.microbatches 2(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32> {
// Z3-COUNT-2: dist.all_gather_start
// Z3-COUNT-2: dist.wait
// Z3-COUNT-2: dist.all_gather_start
// Z3:         train.unit "layers.0"({{.*}}) : (tensor<2x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x16xf32>
// Z3:           train.linear_gelu
// Z3-NEXT:      train.yield %result : tensor<2x16xf32>
// Z3-NOT:     dist.free
// Z3-COUNT-2: dist.wait
// Z3:         train.unit "layers.1"
// Z3-NOT:     dist.free
// Z3:         %[[LOSS:.*]] = train.cross_entropy
// Z3-NEXT:    %[[SCALED:.*]] = train.scale %[[LOSS]] by 5.000000e-01
// Z3-NEXT:    train.yield %[[SCALED]] : tensor<f32>
// Z3-NEXT:  }
// Z3-NEXT:  %[[MEAN:.*]] = dist.all_reduce %{{.*}} on @mesh ["shard"] avg
// Z3-NEXT:  train.return %[[MEAN]]
// Z3-NOT:   dist.
// Z3-NOT:   train.

// Nothing of the backward or the update is left in any of them.
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2" --shardc-eval-step 2>/dev/null | FileCheck %s --check-prefix=FWD
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 --max-grad-norm 1 | shardc-opt --shardc-pipeline="strategy=ddp mesh=2" --shardc-eval-step 2>/dev/null | FileCheck %s --check-prefix=FWD
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero1 mesh=2 layout=flat" --shardc-eval-step 2>/dev/null | FileCheck %s --check-prefix=FWD
// RUN: shardc-gen gpt --layers 2 --hidden 32 --heads 2 --vocab 64 --seq 16 --batch 8 | shardc-opt --shardc-pipeline="strategy=hsdp mesh=2x2 param-dtype=bf16 reduce-dtype=bf16" --shardc-eval-step 2>/dev/null | FileCheck %s --check-prefix=FWD
// FWD-NOT: train.backward
// FWD-NOT: reduce_scatter
// FWD-NOT: train.adamw
// FWD-NOT: dist.adamw
// FWD-NOT: dist.set_param
// FWD-NOT: dist.sum_squares
// FWD-NOT: dist.clip_coefficient
// FWD-NOT: _grad {{%|"}}
// FWD:     train.return

// ZeRO-2 keeps its params whole: its evaluation step communicates only the
// loss.
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero2 mesh=2" --shardc-eval-step 2>/dev/null | FileCheck %s --check-prefix=Z2
// Z2-NOT: dist.all_gather
// Z2:     dist.all_reduce
// Z2-NOT: dist.all_gather

// The ledger of the evaluation step: no grads or optimizer state, nothing
// of the backward on the wire, its forward's FLOPs once (4608 / 3), and a
// peak of 1676 bytes, which with the 848 bytes of optimizer state it leaves
// untouched is what the training step's ledger predicts for it.
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2" 2>/dev/null | shardc-opt --shardc-eval-step --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=LEDGER
// LEDGER:      "all_gather_count": 8,
// LEDGER:      "all_reduce_count": 1,
// LEDGER:      "reduce_scatter_count": 0
// LEDGER:      "grads_bytes": 0,
// LEDGER-NEXT: "hardware_flops": 1536,
// LEDGER-NEXT: "model_flops": 1536,
// LEDGER:      "optimizer_bytes": 0,
// LEDGER:      "peak_bytes": 1676
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=STEP
// STEP:      "eval_peak_bytes": 2524,
// STEP:      "optimizer_bytes": 848,
// STEP:      "peak_bytes": 3372
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT:      peak 3372
// TEXT-NEXT: eval peak 2524
// TEXT:      model FLOPs 4608 (forward + backward, for MFU)

// A unit the loss does not read keeps its params, so it stays, emptied:
// a param's unit must exist (the step, then its ledger, verify).
// RUN: shardc-opt %S/Inputs/unit-off-the-loss.mlir --shardc-eval-step | FileCheck %s --check-prefix=OFF-LOSS
// RUN: shardc-opt %S/Inputs/unit-off-the-loss.mlir --shardc-ledger -o /dev/null
// OFF-LOSS:      train.param "w" of unit "u"
// OFF-LOSS-NEXT: train.unit "u"() : () -> () {
// OFF-LOSS-NEXT:   train.yield
// OFF-LOSS-NEXT: }
