// RUN: shardc-opt %s -split-input-file --train-fuse | FileCheck %s
// RUN: shardc-opt %s -split-input-file --train-fuse | shardc-opt -split-input-file
// exclude: the named fusions are not formed, the others are.
// RUN: shardc-opt %s -split-input-file --train-fuse="exclude=matmul_bias_grad" | FileCheck %s --check-prefix=EXCLUDE
// EXCLUDE-LABEL: train.model @block
// EXCLUDE: train.linear_gelu
// EXCLUDE-LABEL: train.model @bias_grads
// EXCLUDE-NOT: train.matmul_bias_grad
// EXCLUDE: train.sum_to
// EXCLUDE-NOT: train.matmul_bias_grad
// EXCLUDE-LABEL: train.model @bias_grads_unfused
// RUN: not shardc-opt %s -split-input-file --train-fuse="exclude=matmul_bias_grad,gelu" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: unknown fused op 'gelu' in exclude: expected one of layernorm_grad_add, add_layernorm, linear_gelu, matmul_gelu_grad, matmul_bias_grad, cross_entropy_and_grad

// A GPT block's forward after autodiff: c_fc and its GELU fuse (the
// preactivation stays a result, yielded for the backward), the attention's
// residual add and ln_2 fuse (the sum is read again by the second residual
// add). ln_1 reads the unit's argument: nothing to fuse.

// CHECK-LABEL: train.model @block
// CHECK: train.unit "h0"
// Every op of the block, in order: nothing else is left.
// CHECK: train.param "bp"
// CHECK-NEXT: %[[LN1:.*]] = train.layernorm %arg0,
// CHECK-NEXT: %[[ATTN:.*]] = train.scale %[[LN1]]
// CHECK-NEXT: %[[SUM:.*]], %[[LN2:.*]] = train.add_layernorm %arg0, %[[ATTN]], %{{.*}}, %{{.*}} {eps = {{.*}} : f64} :
// CHECK-NEXT: %[[PRE:.*]], %[[ACT:.*]] = train.linear_gelu %[[LN2]], %{{.*}}, %{{.*}} :
// CHECK-NEXT: %[[PROJ:.*]] = train.linear %[[ACT]],
// CHECK-NEXT: %[[OUT:.*]] = train.add %[[SUM]], %[[PROJ]]
// CHECK-NEXT: train.yield %[[OUT]], %[[PRE]], %[[SUM]]
train.model @block batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x8xf32>
  %r:3 = train.unit "h0"(%x) : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>) {
  ^bb0(%a: tensor<2x4x8xf32>):
    %g1 = train.param "g1" init(#train.ones) : tensor<8xf32>
    %b1 = train.param "b1" init(#train.zeros) : tensor<8xf32>
    %g2 = train.param "g2" init(#train.ones) : tensor<8xf32>
    %b2 = train.param "b2" init(#train.zeros) : tensor<8xf32>
    %wfc = train.param "wfc" init(#train.zeros) : tensor<16x8xf32>
    %bfc = train.param "bfc" init(#train.zeros) : tensor<16xf32>
    %wp = train.param "wp" init(#train.zeros) : tensor<8x16xf32>
    %bp = train.param "bp" init(#train.zeros) : tensor<8xf32>
    %n1 = train.layernorm %a, %g1, %b1 {eps = 1.0e-6 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %attn = train.scale %n1 by 2.0 : tensor<2x4x8xf32>
    %s = train.add %a, %attn : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %n2 = train.layernorm %s, %g2, %b2 {eps = 1.0e-6 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %h = train.linear %n2, %wfc, %bfc : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
    %act = train.gelu %h : tensor<2x4x16xf32>
    %p = train.linear %act, %wp : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
    %o = train.add %s, %p : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    train.yield %o, %h, %s : tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>
  }
  %t = train.input "t" : tensor<2x4xi32>
  %loss = train.cross_entropy %r#0, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// Its backward: the gradient through c_proj meets GELU's derivative in the
// GEMM (through the reshape autodiff puts between them; the preactivation is
// viewed as the product's matrix), and each norm's input gradient joins the
// residual's gradient.

// CHECK-LABEL: train.model @backward
// Every op of the block after the params, in order.
// CHECK: train.param "wfc"
// CHECK-NEXT: %[[DY2D:.*]] = train.reshape %arg0 : tensor<2x4x8xf32> to tensor<8x8xf32>
// CHECK-NEXT: %[[PRE2D:.*]] = train.reshape %arg1 : tensor<2x4x16xf32> to tensor<8x16xf32>
// CHECK-NEXT: %[[DPRE2D:.*]] = train.matmul_gelu_grad %[[DY2D]], %{{.*}}, %[[PRE2D]] : (tensor<8x8xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[DPRE:.*]] = train.reshape %[[DPRE2D]] : tensor<8x16xf32> to tensor<2x4x16xf32>
// CHECK-NEXT: %[[DB:.*]] = train.sum_to %[[DPRE]]
// CHECK-NEXT: train.reshape %[[DPRE]]
// CHECK-NEXT: train.matmul
// CHECK-NEXT: %[[DN:.*]] = train.reshape
// CHECK-NEXT: %[[DX2:.*]], %[[DG2:.*]], %[[DB2:.*]] = train.layernorm_grad_add %[[DN]], %arg2, %{{.*}}, %arg0 {eps = {{.*}} : f64}
// CHECK-NEXT: %[[D1:.*]] = train.scale %[[DX2]]
// CHECK-NEXT: %[[DX1:.*]], %[[DG1:.*]], %[[DB1:.*]] = train.layernorm_grad_add %[[D1]], %arg3, %{{.*}}, %[[DX2]]
// CHECK-NEXT: train.yield %[[DX1]], %[[DG1]], %[[DB1]], %[[DG2]], %[[DB2]], %[[DB]]
train.model @backward batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %dy = train.input "dy" : tensor<2x4x8xf32>
  %pre = train.input "pre" : tensor<2x4x16xf32>
  %s = train.input "s" : tensor<2x4x8xf32>
  %a = train.input "a" : tensor<2x4x8xf32>
  %g:6 = train.unit "h0"(%dy, %pre, %s, %a) : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>) {
  ^bb0(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x16xf32>, %arg2: tensor<2x4x8xf32>, %arg3: tensor<2x4x8xf32>):
    %g1 = train.param "g1" init(#train.ones) : tensor<8xf32>
    %g2 = train.param "g2" init(#train.ones) : tensor<8xf32>
    %wp = train.param "wp" init(#train.zeros) : tensor<8x16xf32>
    %wfc = train.param "wfc" init(#train.zeros) : tensor<16x8xf32>
    %dy2 = train.reshape %arg0 : tensor<2x4x8xf32> to tensor<8x8xf32>
    %dact2 = train.matmul %dy2, %wp : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %dact = train.reshape %dact2 : tensor<8x16xf32> to tensor<2x4x16xf32>
    %dpre = train.gelu_grad %dact, %arg1 : tensor<2x4x16xf32>
    %db = train.sum_to %dpre : tensor<2x4x16xf32> to tensor<16xf32>
    %dpre2 = train.reshape %dpre : tensor<2x4x16xf32> to tensor<8x16xf32>
    %dn2 = train.matmul %dpre2, %wfc : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
    %dn = train.reshape %dn2 : tensor<8x8xf32> to tensor<2x4x8xf32>
    %dx2, %dg2, %db2 = train.layernorm_grad %dn, %arg2, %g2 {eps = 1.0e-6 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %ds = train.add %arg0, %dx2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %d1 = train.scale %ds by 2.0 : tensor<2x4x8xf32>
    %dx1, %dg1, %db1 = train.layernorm_grad %d1, %arg3, %g1 {eps = 1.0e-6 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %da = train.add %dx1, %ds : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    train.yield %da, %dg1, %db1, %dg2, %db2, %db : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>
  }
  %t = train.input "t" : tensor<2x4xi32>
  %loss = train.cross_entropy %g#0, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// What does not fuse: a broadcast add; a norm whose weight is defined after
// the add; a product read twice; a batched product; a norm gradient read
// twice; an addend defined after the norm gradient.

// CHECK-LABEL: train.model @unfused
// CHECK-NOT: train.add_layernorm
// CHECK-NOT: train.linear_gelu
// CHECK-NOT: train.matmul_gelu_grad
// CHECK-NOT: train.layernorm_grad_add
train.model @unfused batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x8xf32>
  %pos = train.param "pos" init(#train.zeros) : tensor<4x8xf32>
  %g = train.param "g" init(#train.ones) : tensor<8xf32>
  %b = train.param "b" init(#train.zeros) : tensor<8xf32>
  // Broadcast.
  %e = train.add %x, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %n = train.layernorm %e, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // The weight comes after the add.
  %s = train.add %n, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %late = train.param "late" init(#train.ones) : tensor<8xf32>
  %n2 = train.layernorm %s, %late, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // The product is read twice.
  %w = train.param "w" init(#train.zeros) : tensor<8x8xf32>
  %w2 = train.param "w2" init(#train.zeros) : tensor<2x8x8xf32>
  %m2 = train.reshape %n2 : tensor<2x4x8xf32> to tensor<8x8xf32>
  %pre = train.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  %p = train.matmul %m2, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %d = train.gelu_grad %p, %pre : tensor<8x8xf32>
  %d2 = train.add %d, %p : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  // A batched product, read once, its preactivation defined before it.
  %bpre = train.scale %x by 1.0 : tensor<2x4x8xf32>
  %bp = train.matmul %x, %w2 : (tensor<2x4x8xf32>, tensor<2x8x8xf32>) -> tensor<2x4x8xf32>
  %bd = train.gelu_grad %bp, %bpre : tensor<2x4x8xf32>
  // The norm's input gradient is read twice.
  %dx, %dg, %db = train.layernorm_grad %bd, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r1 = train.add %x, %dx : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %r2 = train.add %r1, %dx : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // The addend comes after the norm's gradient.
  %dx3, %dg3, %db3 = train.layernorm_grad %r2, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %later = train.scale %r2 by 3.0 : tensor<2x4x8xf32>
  %r3 = train.add %later, %dx3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %t = train.input "t" : tensor<2x4xi32>
  %l = train.reshape %d2 : tensor<8x8xf32> to tensor<2x4x8xf32>
  %l2 = train.add %l, %r3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss = train.cross_entropy %l2, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// The loss and its gradient: one op in the gradient's place, the seed
// defined between them, classes kept; the loss is still returned.

// CHECK-LABEL: train.model @classifier
// CHECK:      %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[LOSS:.*]], %[[DL:.*]] = train.cross_entropy_and_grad %[[SEED]], %[[L:.*]], %[[T:.*]] classes 6 : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>)
// CHECK-NEXT: train.sum_to %[[DL]]
// CHECK-NOT:  train.cross_entropy
// CHECK:      train.return %[[LOSS]]
train.model @classifier batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x8xf32>
  %t = train.input "t" : tensor<2x4xi32>
  %loss = train.cross_entropy %x, %t classes 6 : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dl = train.cross_entropy_grad %one, %x, %t classes 6 : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %s = train.sum_to %dl : tensor<2x4x8xf32> to tensor<8xf32>
  train.return %loss : tensor<f32>
}

// -----

// What does not: a loss read before its gradient; other targets; other
// classes; two losses of the same logits.

// CHECK-LABEL: train.model @classifier_unfused
// CHECK-NOT: train.cross_entropy_and_grad
train.model @classifier_unfused batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x8xf32>
  %t = train.input "t" : tensor<2x4xi32>
  %u = train.input "u" : tensor<2x4xi32>
  %one = arith.constant dense<1.0> : tensor<f32>
  // Read before the gradient.
  %loss = train.cross_entropy %x, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %twice = train.scale %loss by 2.0 : tensor<f32>
  %dl = train.cross_entropy_grad %twice, %x, %t : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // Other targets, other classes.
  %y = train.scale %x by 3.0 : tensor<2x4x8xf32>
  %loss2 = train.cross_entropy %y, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dl2 = train.cross_entropy_grad %one, %y, %u : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %dl3 = train.cross_entropy_grad %one, %y, %t classes 7 : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // Two losses of the same logits.
  %z = train.scale %x by 4.0 : tensor<2x4x8xf32>
  %loss3 = train.cross_entropy %z, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %loss4 = train.cross_entropy %z, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dl4 = train.cross_entropy_grad %one, %z, %t : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  train.return %loss : tensor<f32>
}

// -----

// A linear's weight and bias gradients: the weight's lhs^T rhs of the
// output gradient's matrix view and the bias's sum_to of that gradient fuse
// in the place of the first. Autodiff's order (the product, then the sum);
// the sum first, with the view after it (the fused op views the gradient
// in the sum's place), rhs transposed.

// CHECK-LABEL: train.model @bias_grads
// CHECK:      %[[G:.*]] = train.input "g"
// CHECK-NEXT: %[[K:.*]] = train.input "k"
// CHECK-NEXT: %[[G2:.*]] = train.reshape %[[G]] : tensor<2x4x16xf32> to tensor<8x16xf32>
// CHECK-NEXT: %[[X2:.*]] = train.reshape
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = train.matmul_bias_grad %[[G2]], %[[X2]] {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> (tensor<16x8xf32>, tensor<16xf32>)
// CHECK-NEXT: %[[K2:.*]] = train.reshape %[[K]] : tensor<2x4x16xf32> to tensor<8x16xf32>
// CHECK-NEXT: %[[DWK:.*]], %[[DBK:.*]] = train.matmul_bias_grad %[[K2]], %[[X2]] {transpose_lhs, transpose_rhs}
// CHECK-NEXT: train.input "t"
// CHECK-NEXT: %[[L:.*]] = train.cross_entropy
// CHECK-NEXT: train.return %[[L]]
train.model @bias_grads batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x8xf32>
  %g = train.input "g" : tensor<2x4x16xf32>
  %k = train.input "k" : tensor<2x4x16xf32>
  %g2 = train.reshape %g : tensor<2x4x16xf32> to tensor<8x16xf32>
  %x2 = train.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  %dw = train.matmul %g2, %x2 {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %db = train.sum_to %g : tensor<2x4x16xf32> to tensor<16xf32>
  %dk = train.sum_to %k : tensor<2x4x16xf32> to tensor<16xf32>
  %k2 = train.reshape %k : tensor<2x4x16xf32> to tensor<8x16xf32>
  %dwk = train.matmul %k2, %x2 {transpose_lhs, transpose_rhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %t = train.input "t" : tensor<2x4xi32>
  %loss = train.cross_entropy %x, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}

// -----

// What does not: a sum to more than the last dimension (a broadcast's
// gradient); a product that does not transpose its lhs; the sum first and
// the product's rhs defined after it.

// CHECK-LABEL: train.model @bias_grads_unfused
// CHECK-NOT: train.matmul_bias_grad
train.model @bias_grads_unfused batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x8xf32>
  %g = train.input "g" : tensor<2x4x8xf32>
  %k = train.input "k" : tensor<2x4x8xf32>
  %m = train.input "m" : tensor<2x4x8xf32>
  %x2 = train.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  // To [4, 8].
  %g2 = train.reshape %g : tensor<2x4x8xf32> to tensor<8x8xf32>
  %dw = train.matmul %g2, %x2 {transpose_lhs} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %dpos = train.sum_to %g : tensor<2x4x8xf32> to tensor<4x8xf32>
  // lhs not transposed.
  %k2 = train.reshape %k : tensor<2x4x8xf32> to tensor<8x8xf32>
  %dx = train.matmul %k2, %x2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %dk = train.sum_to %k : tensor<2x4x8xf32> to tensor<8xf32>
  // rhs after the sum.
  %dm = train.sum_to %m : tensor<2x4x8xf32> to tensor<8xf32>
  %late = train.scale %x2 by 2.0 : tensor<8x8xf32>
  %m2 = train.reshape %m : tensor<2x4x8xf32> to tensor<8x8xf32>
  %dwm = train.matmul %m2, %late {transpose_lhs} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %t = train.input "t" : tensor<2x4xi32>
  %loss = train.cross_entropy %x, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
