// RUN: shardc-opt %s -split-input-file --train-autodiff -verify-diagnostics | FileCheck %s
// RUN: shardc-opt %s -split-input-file --train-autodiff -verify-diagnostics | shardc-opt -split-input-file

// The tied token embedding / LM head of the root gets one gradient, summed
// from both uses; a frozen param gets none; the unit's backward takes the
// activations its forward kept and reads its params by name.

// CHECK-LABEL: train.model @tied
// CHECK:       %[[TOK:.*]] = train.input "tokens"
// CHECK:       %[[WTE:.*]] = train.param "wte"
// CHECK:       %[[X:.*]] = train.add
// The attention keeps its log-sum-exps for its gradient (as FlashAttention-2).
// CHECK:       %[[H:.*]]:5 = train.unit "h.0"(%[[X]]) : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x4x8xf32>)
// CHECK:         %[[N:.*]] = train.layernorm
// CHECK:         %[[QKV:.*]] = train.linear %[[N]]
// CHECK:         %[[ATT:.*]], %[[LSE:.*]] = train.attention %[[QKV]] heads 2 : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK:         %[[R:.*]] = train.add
// CHECK:         train.yield %[[R]], %[[LSE]], %[[ATT]], %[[QKV]], %[[N]]
// CHECK:       %[[LOGITS:.*]] = train.linear %[[H]]#0, %[[WTE]]
// CHECK:       %[[LOSS:.*]] = train.cross_entropy %[[LOGITS]], %[[TOK]]
// CHECK:       %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK:       %[[DL:.*]] = train.cross_entropy_grad %[[ONE]], %[[LOGITS]], %[[TOK]]
// CHECK:       %[[DL2:.*]] = train.reshape %[[DL]] : tensor<2x4x16xf32> to tensor<8x16xf32>
// CHECK:       %[[DH2:.*]] = train.matmul %[[DL2]], %[[WTE]] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
// CHECK:       %[[DH:.*]] = train.reshape %[[DH2]] : tensor<8x8xf32> to tensor<2x4x8xf32>
// CHECK:       %[[H2:.*]] = train.reshape %[[H]]#0 : tensor<2x4x8xf32> to tensor<8x8xf32>
// CHECK:       %[[DWTE_HEAD:.*]] = train.matmul %[[DL2]], %[[H2]] {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
// CHECK:       %[[BW:.*]]:4 = train.backward "h.0"(%[[DH]], %[[H]]#1, %[[H]]#2, %[[H]]#3, %[[H]]#4, %[[X]]) params ["h.0.ln.weight", "h.0.ln.bias", "h.0.attn.weight"]
// CHECK-NEXT:  ^bb0(%[[G:.*]]: tensor<2x4x8xf32>, %[[KLSE:.*]]: tensor<2x2x4xf32>, %[[KATT:.*]]: tensor<2x4x8xf32>, %[[KQKV:.*]]: tensor<2x4x24xf32>, %[[KN:.*]]: tensor<2x4x8xf32>, %[[KX:.*]]: tensor<2x4x8xf32>):
// CHECK-DAG:     %[[LNW:.*]] = train.param_ref "h.0.ln.weight" : tensor<8xf32>
// CHECK-DAG:     %[[AW:.*]] = train.param_ref "h.0.attn.weight" : tensor<24x8xf32>
// CHECK:         %[[DQKV:.*]] = train.attention_grad %[[G]], %[[KQKV]], %[[KATT]], %[[KLSE]] heads 2
// CHECK:         %[[DQKV2:.*]] = train.reshape %[[DQKV]]
// CHECK:         %[[DN2:.*]] = train.matmul %[[DQKV2]], %[[AW]]
// CHECK:         %[[DN:.*]] = train.reshape %[[DN2]]
// CHECK:         %[[N2:.*]] = train.reshape %[[KN]]
// CHECK:         %[[DAW:.*]] = train.matmul %[[DQKV2]], %[[N2]] {transpose_lhs}
// CHECK:         %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = train.layernorm_grad %[[DN]], %[[KX]], %[[LNW]]
// CHECK:         %[[DA:.*]] = train.add %[[G]], %[[DX]]
// CHECK:         train.yield %[[DA]], %[[DG]], %[[DB]], %[[DAW]]
// CHECK:       %[[DWTE_EMB:.*]] = train.embedding_grad %[[BW]]#0, %[[TOK]]
// CHECK:       %[[DWTE:.*]] = train.add %[[DWTE_HEAD]], %[[DWTE_EMB]]
// CHECK-NEXT:  train.adamw "wte", %[[DWTE]] : tensor<16x8xf32>
// CHECK-NEXT:  train.adamw "h.0.ln.weight", %[[BW]]#1
// CHECK-NEXT:  train.adamw "h.0.ln.bias", %[[BW]]#2
// CHECK-NEXT:  train.adamw "h.0.attn.weight", %[[BW]]#3
// CHECK-NEXT:  train.return %[[LOSS]]
// CHECK-NOT:   "wpe", %
train.model @tied batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %tok = train.input "tokens" : tensor<2x4xi32>
  %wte = train.param "wte" init(#train.normal<std = 0.02>) : tensor<16x8xf32>
  %wpe = train.param "wpe" frozen init(#train.zeros) : tensor<4x8xf32>
  %e = train.embedding %tok, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %pos = train.iota : tensor<4xi32>
  %p = train.embedding %pos, %wpe : (tensor<4xi32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %x = train.add %e, %p : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %h = train.unit "h.0" (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
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
  %logits = train.linear %h, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = train.cross_entropy %logits, %tok : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// Units are differentiated in reverse order; the first unit's input is not
// differentiable (no param before it), so its backward yields only
// gradients. gelu keeps its input, relu and scale differentiate through.

// CHECK-LABEL: train.model @mlp
// CHECK:       %[[H0:.*]]:2 = train.unit "fc0"
// CHECK:       %[[H1:.*]]:2 = train.unit "fc1"(%[[H0]]#0)
// CHECK:       %[[B1:.*]]:2 = train.backward "fc1"(%{{.*}}, %[[H1]]#1, %[[H0]]#0) params ["fc1.weight"]
// CHECK:         %[[DS:.*]] = train.matmul %{{.*}}, %{{.*}} :
// CHECK:         train.matmul {{.*}} {transpose_lhs}
// CHECK:         %[[DR:.*]] = train.scale %[[DS]] by 2.500000e-01
// CHECK:         train.relu_grad %[[DR]], %{{.*}}
// CHECK:       %[[B0:.*]]:2 = train.backward "fc0"(%[[B1]]#0, %[[H0]]#1, %{{.*}}) params ["fc0.weight", "fc0.bias"] : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x3xf32>) -> (tensor<8x3xf32>, tensor<8xf32>)
// CHECK:         %[[GG:.*]] = train.gelu_grad
// CHECK:         train.matmul %[[GG]], %{{.*}} {transpose_lhs}
// CHECK:         train.sum_to %[[GG]] : tensor<4x8xf32> to tensor<8xf32>
// CHECK:       train.adamw "fc0.weight", %[[B0]]#0
// CHECK-NEXT:  train.adamw "fc0.bias", %[[B0]]#1
// CHECK-NEXT:  train.adamw "fc1.weight", %[[B1]]#1
train.model @mlp batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x3xf32>
  %y = train.input "y" : tensor<4xi32>
  %h = train.unit "fc0" (%x) : (tensor<4x3xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x3xf32>):
    %w = train.param "fc0.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<8x3xf32>
    %b = train.param "fc0.bias" init(#train.zeros) : tensor<8xf32>
    %o = train.linear %a, %w, %b : (tensor<4x3xf32>, tensor<8x3xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %g = train.gelu %o : tensor<4x8xf32>
    train.yield %g : tensor<4x8xf32>
  }
  %h2 = train.unit "fc1" (%h) : (tensor<4x8xf32>) -> tensor<4x5xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %w = train.param "fc1.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<5x8xf32>
    %r = train.relu %a : tensor<4x8xf32>
    %s = train.scale %r by 0.25 : tensor<4x8xf32>
    %o = train.linear %s, %w : (tensor<4x8xf32>, tensor<5x8xf32>) -> tensor<4x5xf32>
    train.yield %o : tensor<4x5xf32>
  }
  %loss = train.cross_entropy %h2, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// matmul with transposes: d(A^T B) wrt A is B dC^T, wrt B is A dC.
// A broadcast add is summed back to the rhs shape.

// CHECK-LABEL: train.model @matmul
// CHECK:       %[[A:.*]] = train.param "a"
// CHECK:       %[[B:.*]] = train.param "b"
// The gradient keeps the loss's classes (a padded last dimension).
// CHECK:       %[[DC:.*]] = train.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} classes 4 :
// CHECK-DAG:   %[[DA:.*]] = train.matmul %[[B]], %[[DC]] {transpose_rhs} : (tensor<3x5xf32>, tensor<4x5xf32>) -> tensor<3x4xf32>
// CHECK-DAG:   %[[DB:.*]] = train.matmul %[[A]], %[[DC]] : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
// CHECK-DAG:   %[[DBIAS:.*]] = train.sum_to %[[DC]] : tensor<4x5xf32> to tensor<5xf32>
// CHECK-DAG:   train.adamw "a", %[[DA]]
// CHECK-DAG:   train.adamw "b", %[[DB]]
// CHECK-DAG:   train.adamw "bias", %[[DBIAS]]
train.model @matmul batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %y = train.input "y" : tensor<4xi32>
  %a = train.param "a" init(#train.ones) : tensor<3x4xf32>
  %b = train.param "b" init(#train.ones) : tensor<3x5xf32>
  %bias = train.param "bias" init(#train.zeros) : tensor<5xf32>
  %c = train.matmul %a, %b {transpose_lhs} : (tensor<3x4xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %d = train.add %c, %bias : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %loss = train.cross_entropy %d, %y classes 4 : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'train.model' op has a loss that depends on no trainable param}}
train.model @frozen batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %y = train.input "y" : tensor<4xi32>
  %w = train.param "w" frozen init(#train.ones) : tensor<4x5xf32>
  %loss = train.cross_entropy %w, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// Fused ops come from --train-fuse, after the backward exists.
train.model @fused batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %t = train.input "t" : tensor<2xi32>
  %w = train.param "w" init(#train.zeros) : tensor<4x4xf32>
  // expected-error @+1 {{'train.linear_gelu' op is a fused op: --train-fuse runs after --train-autodiff}}
  %pre, %y = train.linear_gelu %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  %loss = train.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// An attention's log-sum-exps are the backward's statistics: a loss that
// depends on them is refused, not differentiated without them.
train.model @lse batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x24xf32>
  %w = train.param "w" init(#train.ones) : tensor<2x4x24xf32>
  %qkv = train.add %x, %w : (tensor<2x4x24xf32>, tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  // expected-error @+1 {{'train.attention' op has log-sum-exps the loss depends on: they are statistics for the backward, and carry no gradient}}
  %att, %lse = train.attention %qkv heads 2 : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  %flat = train.reshape %lse : tensor<2x2x4xf32> to tensor<16xf32>
  %one = train.reshape %flat : tensor<16xf32> to tensor<2x8xf32>
  %t = train.input "t" : tensor<2xi32>
  %loss = train.cross_entropy %one, %t : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// A unit none of whose results reaches the loss is refused, even with
// only frozen params: it would run each step for nothing.
train.model @dead_unit batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %t = train.input "t" : tensor<2xi32>
  // expected-error @+1 {{'train.unit' op 'dead' does not reach the loss: remove it, or use its results}}
  %d = train.unit "dead"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %w = train.param "dead.w" frozen init(#train.ones) : tensor<4x4xf32>
    %y = train.linear %a, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    train.yield %y : tensor<2x4xf32>
  }
  %l = train.unit "live"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %w = train.param "live.w" init(#train.ones) : tensor<4x4xf32>
    %y = train.linear %a, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    train.yield %y : tensor<2x4xf32>
  }
  %loss = train.cross_entropy %l, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// A trainable param the loss does not depend on would get no update and
// still hold optimizer state; a frozen one is declared as such.
train.model @unused_param batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %t = train.input "t" : tensor<2xi32>
  %w = train.param "w" init(#train.ones) : tensor<4x4xf32>
  %h = train.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %u = train.unit "u"(%h) : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    // expected-error @+1 {{'train.param' op 'u.p' is trainable but does not reach the loss: mark it frozen, or use it}}
    %p = train.param "u.p" init(#train.zeros) : tensor<4x4xf32>
    %q = train.param "u.q" frozen init(#train.zeros) : tensor<4x4xf32>
    train.yield %a : tensor<2x4xf32>
  }
  %loss = train.cross_entropy %u, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// A param of the model's body passed into a unit as an operand gets the
// unit's input cotangent as its gradient, which its update takes (the
// second RUN line verifies the output).
// CHECK-LABEL: train.model @operand_param
// CHECK:       %[[BW:.*]] = train.backward "u"
// CHECK:       train.adamw "w", %[[BW]] : tensor<2x2xf32>
train.model @operand_param batch 2 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x2xf32>
  %y = train.input "y" : tensor<2xi32>
  %w = train.param "w" init(#train.zeros) : tensor<2x2xf32>
  %u = train.unit "u"(%x, %w) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>):
    %h = train.matmul %a, %b : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    train.yield %h : tensor<2x2xf32>
  }
  %loss = train.cross_entropy %u, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
