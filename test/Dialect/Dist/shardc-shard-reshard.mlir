// reshard-after-forward=K (FSDP2's reshard_after_forward=K, ZeRO++'s hpZ):
// the shard axis of S ranks is cut into `node` (S / K) and `local` (K);
// params are stored and reduced over both, and after a unit's forward the
// unit keeps its shard over `local` (dist.take_shard, 1/K of the params)
// instead of nothing (true) or everything (false). The backward gathers
// that shard over `local` alone: K consecutive ranks, inside a node.
// Under true and K alike, the unit whose forward runs last (layers.2 here)
// keeps its gather whole for its backward, which follows at once
// (torchtitan's default), unless reshard-last-unit=true.

// RUN: shardc-gen mlp --sizes 8,16,16,4 --batch 8 > %t.mlir
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-after-forward=2" | FileCheck %s --check-prefix=IR
// IR:      dist.mesh @mesh axes ["node", "local"] shape [2, 2]
// IR:      %[[W1:.*]] = train.param "layers.1.weight" {{.*}} sharded(#dist.shard<layout = dim0, mesh = @mesh, axes = ["node", "local"]>) of tensor<16x16xf32> : tensor<4x16xf32>
// IR:      %[[G1:.*]] = dist.all_gather %[[W1]] on @mesh ["node", "local"] dim0 : tensor<4x16xf32> -> tensor<16x16xf32>
// IR:      train.unit "layers.1"
// IR:      %[[K1:.*]] = dist.take_shard %[[G1]] on @mesh ["local"] dim0 : tensor<16x16xf32> -> tensor<8x16xf32>
// IR-NEXT: dist.free %[[G1]] : tensor<16x16xf32>
// IR:      %[[B1:.*]] = dist.all_gather %[[K1]] on @mesh ["local"] dim0 : tensor<8x16xf32> -> tensor<16x16xf32>
// IR-NEXT: dist.free %[[K1]] : tensor<8x16xf32>
// IR-NEXT: train.backward "layers.1"({{.*}}, %[[B1]])
// IR:      dist.reduce_scatter {{.*}} on @mesh ["node", "local"] avg dim0 : tensor<16x16xf32> -> tensor<4x16xf32>
// IR:      dist.free %[[B1]] : tensor<16x16xf32>

// A param its backward does not read (a bias, the first layer's weight)
// keeps nothing: the bias's gather is freed after the forward as with true.
// The last unit keeps its whole gather: one take_shard (layers.1.weight),
// two with reshard-last-unit=true (layers.2.weight too).
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-after-forward=2" | FileCheck %s --check-prefix=COUNT
// COUNT-COUNT-1: dist.take_shard
// COUNT-NOT:     dist.take_shard
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-after-forward=2 reshard-last-unit=true" | FileCheck %s --check-prefix=ALL
// ALL-COUNT-2: dist.take_shard
// ALL-NOT:     dist.take_shard

// The last unit: its forward's gather of layers.2.weight serves its
// backward, freed after it; its bias's, which the backward does not read,
// is freed after the forward.
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4" | FileCheck %s --check-prefix=LAST
// LAST:      %[[W2:.*]] = dist.all_gather %{{.*}} on @mesh ["shard"] dim0 : tensor<1x16xf32> -> tensor<4x16xf32>
// LAST:      %[[B2:.*]] = dist.all_gather %{{.*}} on @mesh ["shard"] dim0 : tensor<1xf32> -> tensor<4xf32>
// LAST:      train.unit "layers.2"({{.*}}, %[[W2]], %[[B2]])
// LAST:      dist.free %[[B2]]
// LAST-NOT:  dist.all_gather
// LAST-NOT:  dist.free %[[W2]]
// LAST:      train.backward "layers.2"({{.*}}, %[[W2]])
// LAST:      dist.free %[[W2]]

// K = S is true (no axis is cut); so is `true` for any strategy.
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-after-forward=4" | FileCheck %s --check-prefix=WHOLE
// WHOLE:     dist.mesh @mesh axes ["shard"] shape [4]
// WHOLE-NOT: dist.take_shard

// Flat parameters (FSDP1): the unit's whole flat buffer is cut in K pieces.
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 layout=flat reshard-after-forward=2" | FileCheck %s --check-prefix=FLAT
// FLAT:      %[[F:.*]] = dist.flat_param "layers.1" ["layers.1.weight", "layers.1.bias"] on @mesh ["node", "local"] : tensor<68xf32>
// FLAT:      %[[W:.*]] = dist.all_gather %[[F]] on @mesh ["node", "local"] flat : tensor<68xf32> -> tensor<272xf32>
// FLAT:      train.unit "layers.1"
// FLAT:      %[[K:.*]] = dist.take_shard %[[W]] on @mesh ["local"] flat : tensor<272xf32> -> tensor<136xf32>
// FLAT-NEXT: dist.free %[[W]] : tensor<272xf32>
// FLAT:      %[[B:.*]] = dist.all_gather %[[K]] on @mesh ["local"] flat : tensor<136xf32> -> tensor<272xf32>
// FLAT-NEXT: dist.free %[[K]] : tensor<136xf32>
// FLAT-NEXT: dist.unpack %[[B]] : tensor<272xf32> -> tensor<16x16xf32>, tensor<16xf32>

// Under hsdp the replicas stay the first axis; their all-reduce is unchanged.
// Scheduled, the backward's gather starts from the kept shard, which is
// freed only after its wait.
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=hsdp mesh=2x4 reshard-after-forward=2" --shardc-schedule | FileCheck %s --check-prefix=HSDP
// HSDP:      dist.mesh @mesh axes ["replicate", "node", "local"] shape [2, 2, 2]
// HSDP:      %[[K:.*]] = dist.take_shard %{{.*}} on @mesh ["local"] dim0 : tensor<16x16xf32> -> tensor<8x16xf32>
// HSDP:      %[[T:.*]] = dist.all_gather_start %[[K]] on @mesh ["local"] dim0
// HSDP:      dist.wait %[[T]]
// HSDP-NEXT: dist.free %[[K]] : tensor<8x16xf32>
// HSDP:      dist.all_reduce_start %{{.*}} on @mesh ["replicate"] avg
// HSDP:      dist.all_reduce %{{.*}} on @mesh ["replicate", "node", "local"] avg

// The ledger. The forwards gather 1452 bytes; with reshard-last-unit=true,
// true's backwards gather 960 more (3/4 of layers.1.weight's 1024 bytes and
// layers.2.weight's 256), which K = 2 makes 640 over `local` (1/2 of each):
// 2412 and 2092 in all. By default layers.2 keeps its gather: 192 bytes
// fewer for true (2220), 128 fewer over `local` for K (1964). The kept
// shards (512 bytes) count as gathered params; false keeps the whole 1280
// and gathers 1452.
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=4 reshard-after-forward=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LEDGER
// LEDGER:      all_gather           7             1964
// LEDGER-NEXT:   over local         1              512
// LEDGER-NEXT: reduce_scatter       6             1452
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=4 reshard-after-forward=2 reshard-last-unit=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LEDGER-ALL
// LEDGER-ALL:      all_gather           8             2092
// LEDGER-ALL-NEXT:   over local         2              640
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRUE
// TRUE:      all_gather           7             2220
// TRUE-NOT:  over local
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=4 reshard-last-unit=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRUE-ALL
// TRUE-ALL:  all_gather           8             2412
// RUN: shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=4 reshard-after-forward=2 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=JSON
// JSON: "all_gather_bytes": 1964,
// JSON: "local_all_gather_bytes": 512,
// JSON: "local_all_gather_count": 1,

// Over a memory budget, each unit's note names the shards it keeps.
// RUN: not shardc-opt %t.mlir --shardc-pipeline="strategy=zero3 mesh=4 reshard-after-forward=2 memory-budget=4000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUDGET
// BUDGET: note: unit 'layers.1': params 272 bytes, gathered 1088 bytes, activations kept for backward 256 bytes, param shards kept for backward 512 bytes

// Errors name the value and the shard axis; other strategies warn.
// RUN: not shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-after-forward=3" 2>&1 | FileCheck %s --check-prefix=ERR3
// ERR3: error: invalid reshard-after-forward '3': expected true, false, or a number of ranks from 2 dividing the shard axis's 4 (mesh=4)
// RUN: not shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=hsdp mesh=4x2 reshard-after-forward=4" 2>&1 | FileCheck %s --check-prefix=ERRH
// ERRH: error: invalid reshard-after-forward '4': {{.*}} dividing the shard axis's 2 (mesh=4x2)
// RUN: not shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-after-forward=1" 2>&1 | FileCheck %s --check-prefix=ERR1
// ERR1: error: invalid reshard-after-forward '1'
// RUN: not shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-after-forward=yes" 2>&1 | FileCheck %s --check-prefix=ERRW
// ERRW: error: invalid reshard-after-forward 'yes'
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero2 mesh=4 reshard-after-forward=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARN
// WARN: warning: reshard-after-forward=2: ignored by strategy zero2, which does not gather params (it applies to zero3 and hsdp)
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero2 mesh=4 reshard-last-unit=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARN-LAST
// WARN-LAST: warning: reshard-last-unit=true: ignored by strategy zero2, which does not gather params (it applies to zero3 and hsdp)
// RUN: shardc-opt %t.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-after-forward=false reshard-last-unit=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARN-KEEP
// WARN-KEEP: warning: reshard-last-unit=true: ignored with reshard-after-forward=false, which keeps every unit's gather

// The driver takes the same values.
// RUN: not shardc build %t.mlir --strategy zero3 --mesh 4 --reshard-after-forward 1 -o %t.exe 2>&1 | FileCheck %s --check-prefix=DRIVER
// DRIVER: shardc: --reshard-after-forward: expected true, false or a number of ranks from 2, got '1'
// RUN: not shardc build %t.mlir --strategy zero3 --mesh 4 --reshard-last-unit yes -o %t.exe 2>&1 | FileCheck %s --check-prefix=DRIVER-LAST
// DRIVER-LAST: shardc: --reshard-last-unit: expected true or false, got 'yes'
