// The timeline (--shardc-ledger="machine=..."): the scheduled step played
// on a compute stream and a stream per communicator, priced by a roofline
// of the machine's figures.

// The small MLP of shardc-ledger.mlir (a batch of 16), zero3 over 4 ranks in a node of 8
// (h200: 360 GB/s of NCCL bus bandwidth, 15 us per launch). Its kernels
// take nanoseconds, so each NCCL launch is waited on in full: fc0's two
// gathers (one launch, 60 bytes sent), fc1's gather (36 bytes), fc1's
// reduce-scatter (waited on after fc0's backward, which hides nothing),
// fc0's two (one launch), and the loss's all-reduce: 5 launches, 0.075 ms.
// all_gather: 2 x 15 us + 96 B / 360 GB/s = 0.0300002667 ms.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 machine=h200" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT:      timeline on h200, 8 ranks per node ms (a calibrated roofline, not a measurement)
// TEXT-NEXT: compute 0.000 matmuls 0.000, the rest 0.000
// TEXT-NEXT: all_gather 0.030 on the communicators' streams
// TEXT-NEXT: reduce_scatter 0.030
// TEXT-NEXT: all_reduce 0.015
// TEXT-NEXT: exposed communication 0.075 the compute stream waiting on collectives
// TEXT-NEXT: step 0.075 MFU 0.0%
// TEXT-NEXT: wait 0.030 reduce_scatter before the optimizer step
// TEXT-NEXT: wait 0.015 all_gather before unit 'fc0' forward
// TEXT-NEXT: wait 0.015 all_reduce before the end of the step
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 machine=h200 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=JSON
// JSON:      "timeline": {
// JSON-NEXT:   "all_gather_ms": 0.03000026666
// JSON-NEXT:   "all_reduce_ms": 0.01500001666
// JSON-NEXT:   "exposed_ms": 0.0750003
// JSON-NEXT:   "machine": "h200",
// JSON:        "ranks_per_node": 8,
// JSON:        "waits": [
// JSON-NEXT:     {
// JSON-NEXT:       "ms": 0.03000010
// JSON-NEXT:       "what": "reduce_scatter before the optimizer step"

// Two micro-batches, each reducing its gradients (grad-sync=microbatch):
// the loss's all-reduce once, the rest twice: 9 launches, fc0's
// reduce-scatters waited on as each micro-batch ends.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 grad-accum=2 grad-sync=microbatch machine=h200" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ACCUM
// ACCUM: exposed communication 0.135
// ACCUM: wait 0.030 reduce_scatter before the end of a micro-batch

// Over 16 ranks in nodes of 8, the groups span nodes: 45 GB/s. fc0's
// gathers send 15 x 20 B, fc1's 15 x 12 B: 2 x 15 us + 480 B / 45 GB/s
// = 0.0300106667 ms. In nodes of 16, 360 GB/s again: 0.0300013333 ms.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=16 machine=h200 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=NETWORK
// NETWORK: "all_gather_ms": 0.03001066666
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=16 machine=h200 ranks-per-node=16 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=NODE16
// NODE16: "all_gather_ms": 0.03000133333
// NODE16: "ranks_per_node": 16,

// An A100 node: 230 GB/s inside it, 2 x 15 us + 96 B / 230 GB/s =
// 0.0300004174 ms; 22 GB/s across nodes, 2 x 15 us + 480 B / 22 GB/s =
// 0.0300218182 ms.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 machine=a100 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=A100
// A100: "all_gather_ms": 0.03000041739
// A100: "machine": "a100",
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=16 machine=a100 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=A100-NETWORK
// A100-NETWORK: "all_gather_ms": 0.03002181818

// In nodes of 2, the 4 ranks' groups cross a node's edge: 45 GB/s,
// 2 x 15 us + 96 B / 45 GB/s = 0.0300021333 ms.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 machine=h200 ranks-per-node=2 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=NODE2
// NODE2: "all_gather_ms": 0.03000213333

// Each all-reduce is its own NCCL launch, as the CUDA target issues them:
// ddp without buckets, 3 gradients and the loss, 4 x 15 us.
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=4 bucket-mb=0 machine=h200" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALL-REDUCES
// ALL-REDUCES: all_reduce 0.060

// Errors, and the option without a machine.
// RUN: not shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 machine=b200" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: unknown machine 'b200': expected one of h100, h200, a100
// RUN: not shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 machine=h200 ranks-per-node=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4" --shardc-schedule --shardc-ledger="machine=h200 ranks-per-node=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANKS
// RANKS: error: expected ranks-per-node >= 1 (0: the machine's), got -1
// RUN: not shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 machine=h200 ranks-per-node=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARTIAL
// PARTIAL: error: 'train.model' op spans 4 ranks, which do not fill nodes of 3 (ranks-per-node of machine 'h200'): expected a multiple of 3, or at most one node
// strategy=auto refuses it before its search, which would name a choice.
// RUN: not shardc-opt %s --shardc-pipeline="strategy=auto mesh=4 machine=h200 ranks-per-node=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARTIAL --implicit-check-not=remark
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 ranks-per-node=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=IGNORED
// IGNORED: warning: ranks-per-node: ignored without machine
// RUN: not shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=4 offload-optimizer=true machine=h200" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFFLOAD
// OFFLOAD: error: 'train.model' op offloads its optimizer to the host (offload-optimizer), whose updates run at the CPU's speed: machine 'h200' does not price them

// The driver takes the same options.
// RUN: %shardc build %s --strategy zero3 --mesh 4 --machine h200 -o %t.exe 2>&1 | FileCheck %s --check-prefix=DRIVER
// DRIVER: timeline on h200, 8 ranks per node
// RUN: not %shardc build %s --strategy zero3 --mesh 4 --machine h200 --ranks-per-node many -o %t.exe 2>&1 | FileCheck %s --check-prefix=DRIVER-RANKS
// DRIVER-RANKS: shardc: --ranks-per-node: expected an integer >= 1, got 'many'

train.model @mlp batch 16 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<16x4xf32>
  %y = train.input "y" : tensor<16xi32>
  %h = train.unit "fc0" (%x) : (tensor<16x4xf32>) -> tensor<16x3xf32> {
  ^bb0(%a: tensor<16x4xf32>):
    %w = train.param "fc0.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<3x4xf32>
    %b = train.param "fc0.bias" init(#train.zeros) : tensor<3xf32>
    %o = train.linear %a, %w, %b : (tensor<16x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<16x3xf32>
    %g = train.gelu %o : tensor<16x3xf32>
    train.yield %g : tensor<16x3xf32>
  }
  %logits = train.unit "fc1" (%h) : (tensor<16x3xf32>) -> tensor<16x2xf32> {
  ^bb0(%a: tensor<16x3xf32>):
    %w = train.param "fc1.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<2x3xf32>
    %o = train.linear %a, %w : (tensor<16x3xf32>, tensor<2x3xf32>) -> tensor<16x2xf32>
    train.yield %o : tensor<16x2xf32>
  }
  %loss = train.cross_entropy %logits, %y : (tensor<16x2xf32>, tensor<16xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
