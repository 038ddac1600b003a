// offload-optimizer=true (ZeRO-Offload): shardc-shard marks the model
// `dist.offload_optimizer`; the ledger counts the optimizer state as host
// memory, off the device's peak, and the bytes each step copies between host
// and device: each gradient to the host, and each updated value back (an
// f32 param's value both ways: the host keeps no copy of it).

// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 > %t.mlir
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 offload-optimizer=true" 2>/dev/null | FileCheck %s --check-prefix=IR
// IR: train.model @mlp {{.*}} attributes {dist.offload_optimizer, dist.strategy = "zero3"}
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2" 2>/dev/null | FileCheck %s --check-prefix=PLAIN
// PLAIN-NOT: dist.offload_optimizer

// The MLP's 212 params, 106 per rank: 848 bytes of moments, on the device
// (peak 2776) or the host (peak 2776 - 848 = 1928). Host copies: the 424
// bytes of f32 gradients out, the 424 bytes of f32 values out and back.
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=KEPT
// KEPT:      optimizer 848
// KEPT:      peak 2776
// KEPT-NOT:  host copies
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 offload-optimizer=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT:      optimizer (host) 848 848.00 B
// TEXT-NEXT: model state 1696
// TEXT:      peak 1928
// TEXT-NEXT: eval peak 1928
// TEXT:      all_reduce 1 4
// TEXT-NEXT: host copies 1272 1.27 KB (gradients to the host, updated values back)

// Under bf16 the host holds the f32 masters too (12 bytes per element) and
// copies back the bf16 values rounded: 424 bytes of f32 gradients out, 212
// bytes in.
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 offload-optimizer=true format=json output=-" -o /dev/null | FileCheck %s --check-prefix=BF16
// BF16:      "host_copy_bytes": 636,
// BF16:      "offload_optimizer": true,
// BF16:      "optimizer_bytes": 1272,

// The ZeRO paper's 7.5B example, 7e9 params under zero3 on 8 ranks in bf16:
// 10.5 GB of optimizer state (12 bytes per element of the 875e6 a rank
// updates) leave the device, whose peak goes from 28 GB to 17.5 GB; each
// step copies 1.75 GB of bf16 gradients out and 1.75 GB of values in (the
// peak's 4 more bytes are the loss).
// RUN: shardc-opt %S/Inputs/7b.mlir --shardc-pipeline="strategy=zero3 mesh=8 param-dtype=bf16 reduce-dtype=bf16 offload-optimizer=true format=json output=-" -o /dev/null | FileCheck %s --check-prefix=P7B
// P7B:      "host_copy_bytes": 3500000000,
// P7B:      "optimizer_bytes": 10500000000,
// P7B:      "peak_bytes": 17500000004

// strategy=auto climbs its ladder with the state offloaded: under a budget
// of 2600 bytes no strategy fits keeping it (zero3 peaks at 2776: the
// budget fails), and ddp fits offloading it.
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=auto mesh=2 memory-budget=2600" -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTO-KEPT
// AUTO-KEPT: remark: strategy=auto: no strategy fits memory-budget 2600 ({{.*}}zero3 peaks at 2776); zero3
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=auto mesh=2 memory-budget=2600 offload-optimizer=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTO
// AUTO: remark: strategy=auto: ddp, predicted peak 2548 bytes per rank

// The option is on the driver too; a bad value is named.
// RUN: not %shardc build %t.mlir --offload-optimizer yes -o %t.exe 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: shardc: --offload-optimizer: expected true or false, got 'yes'

// offload-params=true (with offload-optimizer; zero3, hsdp: FSDP2's
// CPUOffloadPolicy) marks the model `dist.offload_params`: the stored
// shards live in host memory too, and each gather copies its shard into its
// slot of the result and gathers in place, on one rank as well, where the
// gathers are not folded away.
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=1 offload-optimizer=true offload-params=true" 2>/dev/null | FileCheck %s --check-prefix=PARAMS-IR
// PARAMS-IR: train.model @mlp {{.*}} attributes {dist.offload_optimizer, dist.offload_params, dist.strategy = "zero3"}
// PARAMS-IR-COUNT-4: dist.all_gather_start %{{[0-9]+}} on @mesh ["shard"]
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=1 offload-optimizer=true" 2>/dev/null | FileCheck %s --check-prefix=ONE-RANK
// ONE-RANK-NOT: all_gather

// On one rank as on two, a unit resharded after its forward frees its
// shards' copies and brings them in again for its backward: of three
// layers, 6 gathers in the forward and the middle weight's in the backward;
// 6 with reshard-after-forward=false.
// RUN: shardc-gen mlp --sizes 8,16,16,4 --batch 8 > %t.three.mlir
// RUN: shardc-opt %t.three.mlir --shardc-pipeline="strategy=zero3 mesh=1 offload-optimizer=true offload-params=true" 2>/dev/null | FileCheck %s --check-prefix=RESHARD-ONE
// RESHARD-ONE-COUNT-7: dist.all_gather_start
// RESHARD-ONE-NOT: dist.all_gather_start
// RUN: shardc-opt %t.three.mlir --shardc-pipeline="strategy=zero3 mesh=1 offload-optimizer=true offload-params=true reshard-after-forward=false" 2>/dev/null | FileCheck %s --check-prefix=KEEP-ONE
// KEEP-ONE-COUNT-6: dist.all_gather_start
// KEEP-ONE-NOT: dist.all_gather_start

// The 424 bytes of params leave the device, and nothing comes in their
// place: the peak goes from 1928 to 1504. Host copies: the 424 bytes of
// gradients out, and each gather's shard in (the forward's 424: the last
// unit keeps its gather for its backward, and the first's backward reads
// no param), no updated value back.
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 offload-optimizer=true offload-params=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARAMS
// PARAMS:      params (host) 424 424.00 B
// PARAMS:      optimizer (host) 848
// PARAMS:      comm buffers 0
// PARAMS-NEXT: peak 1504
// PARAMS-NEXT: eval peak 1504
// PARAMS:      host copies 848 848.00 B (gradients to the host, shards to the device for their gathers)
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=hsdp mesh=2x1 offload-optimizer=true offload-params=true format=json output=-" -o /dev/null | FileCheck %s --check-prefix=PARAMS-JSON
// PARAMS-JSON: "offload_optimizer": true,
// PARAMS-JSON: "offload_params": true,

// The 7.5B example: its 1.75 GB of bf16 shards leave the device (the peak
// falls from 17.5 GB to 15.75 GB); each step copies 1.75 GB of gradients
// out and 1.75 GB of the shard in.
// RUN: shardc-opt %S/Inputs/7b.mlir --shardc-pipeline="strategy=zero3 mesh=8 param-dtype=bf16 reduce-dtype=bf16 offload-optimizer=true offload-params=true format=json output=-" -o /dev/null | FileCheck %s --check-prefix=P7B-PARAMS
// P7B-PARAMS:      "host_copy_bytes": 3500000000,
// P7B-PARAMS:      "comm_buffer_bytes": 0,
// P7B-PARAMS:      "peak_bytes": 15750000004

// Params in host memory are updated there, and gathered before use: the
// option needs offload-optimizer, and a strategy that gathers.
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 offload-params=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEEDS-OPT
// NEEDS-OPT: error: offload-params=true needs offload-optimizer=true: the params in host memory are updated there, by the host's optimizer step
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=zero2 mesh=2 offload-optimizer=true offload-params=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEEDS-GATHER
// NEEDS-GATHER: error: offload-params=true needs strategy zero3 or hsdp, whose params are gathered before use; strategy zero2 reads them in place on the device
// strategy=auto climbs zero3 alone: under a budget ddp would meet, it
// takes zero3.
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=auto mesh=2 memory-budget=2600 offload-optimizer=true offload-params=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTO-PARAMS
// AUTO-PARAMS: remark: strategy=auto: zero3, predicted peak 1504 bytes per rank
// RUN: not %shardc build %t.mlir --offload-params on -o %t.exe 2>&1 | FileCheck %s --check-prefix=PARAMS-FLAG
// PARAMS-FLAG: shardc: --offload-params: expected true or false, got 'on'

// Over a memory budget, the error says what host memory could take: the
// optimizer state, then (zero3, hsdp) the stored params.
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 memory-budget=1000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HINT-OPT
// HINT-OPT: note: offload-optimizer=true would keep the 848 bytes of optimizer state in host memory
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 memory-budget=1000 offload-optimizer=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HINT-PARAMS
// HINT-PARAMS: note: offload-params=true would keep the 424 bytes of stored params in host memory (over a shard axis of one rank, the peak falls by less: its gathers stay, as copies)
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=zero2 mesh=2 memory-budget=1000 offload-optimizer=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HINT-NONE
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 memory-budget=1000 offload-optimizer=true offload-params=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HINT-NONE
// HINT-NONE: error: 'train.model' op needs a predicted peak of
// HINT-NONE-NOT: would keep
// Each unit's note says where its params are.
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=2 memory-budget=1000 offload-optimizer=true offload-params=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNIT-HOST
// UNIT-HOST: note: unit 'layers.0': params (host) 288 bytes, gathered 576 bytes
