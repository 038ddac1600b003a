// RUN: shardc-opt %s --shardc-wrap="policy=per-layer" | FileCheck %s --check-prefix=LAYER
// RUN: shardc-opt %s --shardc-wrap="policy=min-params=500" | FileCheck %s --check-prefix=SIZE
// RUN: shardc-opt %s --shardc-wrap="policy=min-params=2000" | FileCheck %s --check-prefix=BIG
// The wrapped model trains: differentiate, shard, schedule it.
// RUN: shardc-opt %s --shardc-pipeline="wrap=min-params=500 strategy=zero3 mesh=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPE
// RUN: not shardc-opt %s --shardc-wrap="policy=every-other" 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not shardc-opt %s --shardc-wrap --shardc-wrap 2>&1 | FileCheck %s --check-prefix=TWICE
// A param named like a fallback name ("unit.1.weight": its unit is
// "unit.1"): the unit without a common prefix after it is "unit.1.1".
// RUN: shardc-opt %S/Inputs/unit-named-param.mlir --shardc-wrap | FileCheck %s --check-prefix=FALLBACK
// FALLBACK: train.unit "unit.1"(
// FALLBACK: train.unit "unit.1.1"(
// An input declared after a layer that reads it (its labels, here) moves
// up with the declarations, so the unit made there can take it.
// RUN: shardc-opt %S/Inputs/late-input.mlir --shardc-wrap | FileCheck %s --check-prefix=LATE
// LATE:      %[[X:.*]] = train.input "x"
// LATE-NEXT: %[[Y:.*]] = train.input "y"
// LATE-NEXT: train.unit "unit.0"(%[[X]], %[[Y]])

// per-layer: a unit per param-reading op and the param-free ops after it;
// the tied embedding and head read "wte" from two places, so both stay in
// the root with it.
// LAYER:      %[[WTE:.*]] = train.param "wte"
// LAYER:      %[[X:.*]] = train.embedding %{{.*}}, %[[WTE]]
// LAYER-NEXT: %[[LN0:.*]] = train.unit "h.0.ln"(%[[X]]) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
// LAYER-NEXT: ^bb0(%[[A:.*]]: tensor<2x4x8xf32>):
// LAYER-NEXT:   %[[G:.*]] = train.param "h.0.ln.weight"
// LAYER-NEXT:   %[[B:.*]] = train.param "h.0.ln.bias"
// LAYER-NEXT:   %[[N:.*]] = train.layernorm %[[A]], %[[G]], %[[B]]
// LAYER-NEXT:   train.yield %[[N]]
// LAYER:      %[[FC0:.*]] = train.unit "h.0.fc"(%[[LN0]])
// LAYER:        train.gelu
// The residual add joins the layer before it and takes the embedding in.
// LAYER:      %[[P0:.*]] = train.unit "h.0.proj"(%[[FC0]], %[[X]])
// LAYER:        train.add
// LAYER:      train.unit "h.1.ln"(%[[P0]])
// LAYER:      train.unit "h.1.fc"
// LAYER:      %[[P1:.*]] = train.unit "h.1.proj"
// LAYER:      train.linear %[[P1]], %[[WTE]]

// min-params=500: ln (16) + fc (256) + proj (256) = 528 params a block.
// SIZE:       train.unit "h.0"(%{{.*}}) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// SIZE-COUNT-4: train.param "h.0.
// SIZE:       train.unit "h.1"
// SIZE-NOT:   train.unit

// min-params=2000: both blocks together hold 1056, fewer: they stay in the
// root.
// BIG-NOT:    train.unit

// PIPE: ledger @flat: zero3 over 2 ranks, 1184 params

// POLICY: error: wrap policy 'every-other': expected per-layer or min-params=P with P > 0
// TWICE: error: 'train.model' op already has units or a backward: wrap a forward-only model written without units

train.model @flat batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %tok = train.input "tokens" : tensor<2x4xi32>
  %wte = train.param "wte" init(#train.normal<std = 0.02>) : tensor<16x8xf32>
  %g0 = train.param "h.0.ln.weight" init(#train.ones) : tensor<8xf32>
  %b0 = train.param "h.0.ln.bias" init(#train.zeros) : tensor<8xf32>
  %w0 = train.param "h.0.fc.weight" init(#train.normal<std = 0.02>) : tensor<32x8xf32>
  %v0 = train.param "h.0.proj.weight" init(#train.normal<std = 0.02>) : tensor<8x32xf32>
  %g1 = train.param "h.1.ln.weight" init(#train.ones) : tensor<8xf32>
  %b1 = train.param "h.1.ln.bias" init(#train.zeros) : tensor<8xf32>
  %w1 = train.param "h.1.fc.weight" init(#train.normal<std = 0.02>) : tensor<32x8xf32>
  %v1 = train.param "h.1.proj.weight" init(#train.normal<std = 0.02>) : tensor<8x32xf32>
  %x = train.embedding %tok, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %n0 = train.layernorm %x, %g0, %b0 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %f0 = train.linear %n0, %w0 : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %a0 = train.gelu %f0 : tensor<2x4x32xf32>
  %p0 = train.linear %a0, %v0 : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
  %x1 = train.add %x, %p0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n1 = train.layernorm %x1, %g1, %b1 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %f1 = train.linear %n1, %w1 : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %a1 = train.gelu %f1 : tensor<2x4x32xf32>
  %p1 = train.linear %a1, %v1 : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
  %x2 = train.add %x1, %p1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = train.linear %x2, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = train.cross_entropy %logits, %tok : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
