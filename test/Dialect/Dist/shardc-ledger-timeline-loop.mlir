// The timeline of a micro-batch loop (grad-accum=K) plays its runs until
// they repeat, then adds the rest at once: any count takes a few runs'
// time, with the figures of playing all K (which the numbers below are,
// to their digits: played run by run, 65536 runs take a second).

// zero3 over 2 ranks, each micro-batch's gradients reduce-scattered inside
// the loop (grad-sync=microbatch) and waited at its end: 65536 runs, the
// reduce-scatters' 983.04 ms all exposed.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=65536 grad-sync=microbatch machine=h100 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=RUNS
// RUNS: "exposed_ms": 983.07043290
// RUNS: "reduce_scatter_ms": 983.04072817
// RUNS: "step_ms": 4389.0496218
// RUNS: "ms": 983.04043288
// RUNS-NEXT: "what": "reduce_scatter before the end of a micro-batch"

// 2^37 micro-batches of one row each: before, a hang of days.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=137438953472 grad-sync=microbatch machine=h100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: step 2061591092.994

train.model @huge_batch batch 274877906944 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<274877906944x1xf32>
  %y = train.input "y" : tensor<274877906944xi32>
  %w = train.param "w" init(#train.zeros) : tensor<2x1xf32>
  %h = train.linear %x, %w : (tensor<274877906944x1xf32>, tensor<2x1xf32>) -> tensor<274877906944x2xf32>
  %loss = train.cross_entropy %h, %y : (tensor<274877906944x2xf32>, tensor<274877906944xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
