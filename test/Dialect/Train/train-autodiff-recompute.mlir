// RUN: shardc-opt %s --train-autodiff='recompute=h.0' | FileCheck %s
// RUN: shardc-opt %s --train-autodiff='recompute=h.0' | shardc-opt
// RUN: shardc-opt %s --train-autodiff='recompute=h.*' | FileCheck %s --check-prefix=ALL
// RUN: shardc-opt %s --train-autodiff='recompute=h.{0,1}' | FileCheck %s --check-prefix=ALL
// RUN: not shardc-opt %s --train-autodiff='recompute=h.{0' 2>&1 | FileCheck %s --check-prefix=BRACE
// RUN: not shardc-opt %s --train-autodiff='recompute=h.0,fc*' 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not shardc-opt %s --train-autodiff='recompute=h.[' 2>&1 | FileCheck %s --check-prefix=GLOB
// RUN: not shardc-opt %s --train-autodiff='recompute=auto' 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: shardc-opt %s --train-autodiff='recompute=h.0 recompute-policy=save-matmuls' | FileCheck %s --check-prefix=SEL
// RUN: not shardc-opt %s --train-autodiff='recompute=h.0 recompute-policy=some' 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: shardc-opt %s --train-autodiff='recompute-policy=save-matmuls' -o /dev/null 2>&1 | FileCheck %s --check-prefix=POLICY-ALONE

// Activation checkpointing: the unit named by `recompute` (h.0) yields no
// residual; its backward takes its input again, re-reads every param its
// forward reads and recomputes the forward's values (the attention with its
// log-sum-exps) before the first vector-Jacobian product. h.1 keeps its
// activation as before.

// CHECK-LABEL: train.model @blocks
// CHECK:       %[[X:.*]] = train.embedding
// CHECK:       %[[H0:.*]] = train.unit "h.0"(%[[X]]) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
// CHECK:         train.yield %{{.*}} : tensor<2x4x8xf32>
// CHECK:       %[[H1:.*]]:2 = train.unit "h.1"(%[[H0]]) : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
// CHECK:       %[[B1:.*]]:3 = train.backward "h.1"(%{{.*}}, %[[H1]]#1, %[[H0]])
// CHECK:       train.backward "h.0"(%[[B1]]#0, %[[X]]) params ["h.0.ln.weight", "h.0.ln.bias", "h.0.attn.weight"]
// CHECK-NEXT:  ^bb0(%[[G:.*]]: tensor<2x4x8xf32>, %[[A:.*]]: tensor<2x4x8xf32>):
// CHECK-DAG:     %[[W:.*]] = train.param_ref "h.0.attn.weight"
// CHECK-DAG:     %[[LNB:.*]] = train.param_ref "h.0.ln.bias"
// CHECK-DAG:     %[[LNW:.*]] = train.param_ref "h.0.ln.weight"
// The residual add's result is read by no gradient: not recomputed.
// CHECK-NOT:     train.add
// The recomputation is marked (the trace shows it as a region); the
// gradients are not.
// CHECK:         %[[N:.*]] = train.layernorm %[[A]], %[[LNW]], %[[LNB]] {train.recomputed}
// CHECK-NEXT:    %[[QKV:.*]] = train.linear %[[N]], %[[W]] {train.recomputed}
// CHECK-NEXT:    %[[ATT:.*]], %[[LSE:.*]] = train.attention %[[QKV]] heads 2 {train.recomputed}
// CHECK-NEXT:    train.attention_grad %[[G]], %[[QKV]], %[[ATT]], %[[LSE]] heads 2 :
// CHECK:         train.layernorm_grad %{{.*}}, %[[A]], %[[LNW]]
// CHECK:         train.yield

// Both units by glob: neither keeps an activation; h.1's backward recomputes
// the linear with its bias (the bias is read again, as the forward reads it).
// ALL:         train.unit "h.0"(%{{.*}}) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
// ALL:         train.unit "h.1"(%{{.*}}) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
// ALL:         train.backward "h.1"(%{{.*}}, %{{.*}}) params
// ALL-DAG:       train.param_ref "h.1.fc.bias"
// ALL-DAG:       %[[Y:.*]] = train.linear
// ALL:           train.gelu_grad %{{.*}}, %[[Y]]
// ALL:         train.backward "h.0"(%{{.*}}, %{{.*}}) params

// Selective: h.0 keeps the linear's and the attention's results (with its
// log-sum-exps) and recomputes only the layer norm.
// SEL:         train.unit "h.0"(%{{.*}}) : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>, tensor<2x4x24xf32>) {
// SEL:         train.backward "h.0"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) params
// SEL-NEXT:    ^bb0(%[[G:.*]]: tensor<2x4x8xf32>, %[[LSE:.*]]: tensor<2x2x4xf32>, %[[ATT:.*]]: tensor<2x4x8xf32>, %[[QKV:.*]]: tensor<2x4x24xf32>, %[[A:.*]]: tensor<2x4x8xf32>):
// SEL-NOT:       train.linear
// SEL-NOT:       train.attention {{.*}}heads
// SEL:           train.layernorm %[[A]]
// SEL-NEXT:      train.attention_grad %[[G]], %[[QKV]], %[[ATT]], %[[LSE]] heads 2
// SEL:           train.yield
// POLICY: error: 'train.model' op recompute-policy: expected full or save-matmuls, got 'some'
// POLICY-ALONE: warning: recompute-policy=save-matmuls: ignored without recompute (no unit runs its forward again)

// NONE: error: 'train.model' op recompute: 'fc*' names no unit of the model
// AUTO: error: 'train.model' op recompute: 'auto' is shardc-pipeline's (it chooses with the ledger); train-autodiff takes unit names or globs
// BRACE: error: 'train.model' op recompute: 'h.{0' is not a unit name or glob: incomplete brace expansion
// GLOB: error: 'train.model' op recompute: 'h.[' is not a unit name or glob: invalid glob pattern

train.model @blocks batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %tok = train.input "tokens" : tensor<2x4xi32>
  %wte = train.param "wte" init(#train.normal<std = 0.02>) : tensor<16x8xf32>
  %x = train.embedding %tok, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %h0 = train.unit "h.0" (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%a: tensor<2x4x8xf32>):
    %g = train.param "h.0.ln.weight" init(#train.ones) : tensor<8xf32>
    %b = train.param "h.0.ln.bias" init(#train.zeros) : tensor<8xf32>
    %w = train.param "h.0.attn.weight" init(#train.normal<std = 0.02>) : tensor<24x8xf32>
    %n = train.layernorm %a, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %qkv = train.linear %n, %w : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
    %att = train.attention %qkv heads 2 : (tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
    %r = train.add %a, %att : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    train.yield %r : tensor<2x4x8xf32>
  }
  %h1 = train.unit "h.1" (%h0) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%a: tensor<2x4x8xf32>):
    %w = train.param "h.1.fc.weight" init(#train.normal<std = 0.02>) : tensor<8x8xf32>
    %bias = train.param "h.1.fc.bias" init(#train.zeros) : tensor<8xf32>
    %y = train.linear %a, %w, %bias : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %z = train.gelu %y : tensor<2x4x8xf32>
    %r = train.add %a, %z : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    train.yield %r : tensor<2x4x8xf32>
  }
  %logits = train.linear %h1, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = train.cross_entropy %logits, %tok : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
