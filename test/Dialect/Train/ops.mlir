// RUN: shardc-opt %s | shardc-opt | FileCheck %s
// RUN: shardc-opt %s --mlir-print-op-generic | shardc-opt | FileCheck %s

// Every op of the train dialect prints and parses back.

// CHECK-LABEL: train.model @all_ops batch 2 optimizer <lr = 0.0003, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1>
train.model @all_ops batch 2 optimizer #train.adamw<lr = 3.0e-04, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1> {
  // CHECK: train.input "tokens" : tensor<2x8xi32>
  %tok = train.input "tokens" : tensor<2x8xi32>
  %tgt = train.input "targets" : tensor<2x8xi32>
  // CHECK: train.param "wte" init(#train.normal<std = 0.02>) : tensor<64x16xf32>
  %wte = train.param "wte" init(#train.normal<std = 0.02>) : tensor<64x16xf32>
  // CHECK: train.param "shifted" init(#train.normal<mean = 1.0, std = 0.5>) : tensor<4xf32>
  %shifted = train.param "shifted" init(#train.normal<mean = 1.0, std = 0.5>) : tensor<4xf32>
  // CHECK: train.param "wpe" frozen init(#train.uniform<low = -0.5, high = 0.5>) : tensor<8x16xf32>
  %wpe = train.param "wpe" frozen init(#train.uniform<low = -0.5, high = 0.5>) : tensor<8x16xf32>
  // CHECK: train.embedding %{{.*}}, %{{.*}} : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
  %e = train.embedding %tok, %wte : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: train.iota : tensor<8xi32>
  %pos = train.iota : tensor<8xi32>
  %pe = train.embedding %pos, %wpe : (tensor<8xi32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK: train.add %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %x = train.add %e, %pe : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: train.unit "h.0"(%{{.*}}) : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %h = train.unit "h.0" (%x) : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  ^bb0(%a: tensor<2x8x16xf32>):
    // CHECK: train.param "h.0.ln.weight" init(#train.ones)
    %g = train.param "h.0.ln.weight" init(#train.ones) : tensor<16xf32>
    // CHECK: train.param "h.0.ln.bias" init(#train.zeros)
    %b = train.param "h.0.ln.bias" init(#train.zeros) : tensor<16xf32>
    %wqkv = train.param "h.0.qkv.weight" init(#train.normal<std = 0.02>) : tensor<48x16xf32>
    // CHECK: train.layernorm %{{.*}}, %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64}
    %n = train.layernorm %a, %g, %b {eps = 1.0e-06 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    // CHECK: train.linear %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<48x16xf32>) -> tensor<2x8x48xf32>
    %qkv = train.linear %n, %wqkv : (tensor<2x8x16xf32>, tensor<48x16xf32>) -> tensor<2x8x48xf32>
    // CHECK: train.attention %{{.*}} heads 4 : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
    %att = train.attention %qkv heads 4 : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
    // CHECK: train.gelu %{{.*}} : tensor<2x8x16xf32>
    %ge = train.gelu %att : tensor<2x8x16xf32>
    // CHECK: train.relu %{{.*}} : tensor<2x8x16xf32>
    %re = train.relu %ge : tensor<2x8x16xf32>
    // CHECK: train.scale %{{.*}} by 5.000000e-01 : tensor<2x8x16xf32>
    %sc = train.scale %re by 0.5 : tensor<2x8x16xf32>
    // CHECK: train.reshape %{{.*}} : tensor<2x8x16xf32> to tensor<16x16xf32>
    %r = train.reshape %sc : tensor<2x8x16xf32> to tensor<16x16xf32>
    // CHECK: train.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    %m = train.matmul %r, %r {transpose_rhs} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    %back = train.reshape %m : tensor<16x16xf32> to tensor<2x8x16xf32>
    // CHECK: train.yield %{{.*}} : tensor<2x8x16xf32>
    train.yield %back : tensor<2x8x16xf32>
  }
  // CHECK: train.sum_to %{{.*}} : tensor<2x8x16xf32> to tensor<16xf32>
  %s = train.sum_to %h : tensor<2x8x16xf32> to tensor<16xf32>
  %logits = train.linear %h, %wte : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  // CHECK: train.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  %loss = train.cross_entropy %logits, %tgt : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  // A padded vocabulary: 50 of the 64 logits are classes.
  // CHECK: train.cross_entropy %{{.*}}, %{{.*}} classes 50 : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  %padded = train.cross_entropy %logits, %tgt classes 50 : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  // CHECK: train.return %{{.*}} : tensor<f32>
  train.return %loss : tensor<f32>
}

// The backward ops and the update, as --train-autodiff writes them; an
// optimizer with a learning-rate schedule (a default min_lr is not printed).

// CHECK-LABEL: train.model @backward_ops batch 2 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, warmup = 10, decay_steps = 100> {
train.model @backward_ops batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, warmup = 10, decay_steps = 100, min_lr = 0.0> {
  %tok = train.input "tokens" : tensor<2x8xi32>
  %w = train.param "w" init(#train.normal<std = 0.02>) : tensor<64x48xbf16>
  %x = train.embedding %tok, %w : (tensor<2x8xi32>, tensor<64x48xbf16>) -> tensor<2x8x48xbf16>
  %h:2 = train.unit "u" (%x) : (tensor<2x8x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>) {
  ^bb0(%a: tensor<2x8x48xbf16>):
    %g = train.param "u.g" init(#train.ones) : tensor<48xbf16>
    %b = train.param "u.b" init(#train.zeros) : tensor<48xbf16>
    %sq = train.param "u.sq" frozen init(#train.zeros) : tensor<48x48xbf16>
    %n = train.layernorm %a, %g, %b : (tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>) -> tensor<2x8x48xbf16>
    train.yield %n, %a : tensor<2x8x48xbf16>, tensor<2x8x48xbf16>
  }
  %logits = train.linear %h#0, %w : (tensor<2x8x48xbf16>, tensor<64x48xbf16>) -> tensor<2x8x64xbf16>
  %loss = train.cross_entropy %logits, %tok : (tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  // CHECK: train.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %dl = train.cross_entropy_grad %one, %logits, %tok : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  // CHECK: train.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} classes 64 : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %dl2 = train.cross_entropy_grad %one, %logits, %tok classes 64 : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  // CHECK: train.cross_entropy_and_grad %{{.*}}, %{{.*}}, %{{.*}} classes 60 : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x64xbf16>)
  %both:2 = train.cross_entropy_and_grad %one, %logits, %tok classes 60 : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x64xbf16>)
  %dh = train.reshape %dl : tensor<2x8x64xbf16> to tensor<2x8x64xbf16>
  %dn = train.linear %h#0, %w : (tensor<2x8x48xbf16>, tensor<64x48xbf16>) -> tensor<2x8x64xbf16>
  %dx0 = train.add %dh, %dn : (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>) -> tensor<2x8x64xbf16>
  %dy = train.reshape %h#0 : tensor<2x8x48xbf16> to tensor<2x8x48xbf16>
  // CHECK: train.backward "u"(%{{.*}}, %{{.*}}) params ["u.g", "u.b"] : (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>)
  %bw:3 = train.backward "u" (%dy, %h#1) params ["u.g", "u.b"] : (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>) {
  ^bb0(%g: tensor<2x8x48xbf16>, %a: tensor<2x8x48xbf16>):
    // CHECK: train.param_ref "u.g" : tensor<48xbf16>
    %gw = train.param_ref "u.g" : tensor<48xbf16>
    // CHECK: train.layernorm_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>, tensor<48xbf16>) -> (tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>)
    %dx, %dg, %db = train.layernorm_grad %g, %a, %gw : (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>, tensor<48xbf16>) -> (tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>)
    // CHECK: train.gelu_grad %{{.*}}, %{{.*}} : tensor<2x8x48xbf16>
    %d1 = train.gelu_grad %dx, %a : tensor<2x8x48xbf16>
    // CHECK: train.relu_grad %{{.*}}, %{{.*}} : tensor<2x8x48xbf16>
    %d2 = train.relu_grad %d1, %a : tensor<2x8x48xbf16>
    // The log-sum-exps stay f32 under bf16 activations.
    // CHECK: train.attention %{{.*}} heads 2 : (tensor<2x8x48xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x2x8xf32>)
    // CHECK: train.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads 2 : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x2x8xf32>) -> tensor<2x8x48xbf16>
    %r = train.reshape %d2 : tensor<2x8x48xbf16> to tensor<2x8x48xbf16>
    %o, %lse = train.attention %r heads 2 : (tensor<2x8x48xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x2x8xf32>)
    %d3 = train.attention_grad %o, %r, %o, %lse heads 2 : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x2x8xf32>) -> tensor<2x8x48xbf16>
    // The fused ops of --train-fuse.
    // CHECK: train.linear_gelu %{{.*}}, %{{.*}} : (tensor<2x8x48xbf16>, tensor<48x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>)
    %wsq = train.param_ref "u.sq" : tensor<48x48xbf16>
    %pre, %act = train.linear_gelu %d3, %wsq : (tensor<2x8x48xbf16>, tensor<48x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>)
    // CHECK: train.add_layernorm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-03 : f64} : (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>) -> (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>)
    %sum, %norm = train.add_layernorm %pre, %act, %gw, %gw {eps = 1.0e-3 : f64} : (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>) -> (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>)
    // CHECK: train.matmul_gelu_grad %{{.*}}, %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<16x48xbf16>, tensor<48x48xbf16>, tensor<16x48xbf16>) -> tensor<16x48xbf16>
    %m = train.reshape %norm : tensor<2x8x48xbf16> to tensor<16x48xbf16>
    %dm = train.matmul_gelu_grad %m, %wsq, %m {transpose_rhs} : (tensor<16x48xbf16>, tensor<48x48xbf16>, tensor<16x48xbf16>) -> tensor<16x48xbf16>
    %dmv = train.reshape %dm : tensor<16x48xbf16> to tensor<2x8x48xbf16>
    // CHECK: train.matmul_bias_grad %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<16x48xbf16>, tensor<16x48xbf16>) -> (tensor<48x48xbf16>, tensor<48xbf16>)
    %dwsq, %dbsq = train.matmul_bias_grad %dm, %m {transpose_lhs} : (tensor<16x48xbf16>, tensor<16x48xbf16>) -> (tensor<48x48xbf16>, tensor<48xbf16>)
    // CHECK: train.layernorm_grad_add %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<2x8x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>)
    %dx4, %dg4, %db4 = train.layernorm_grad_add %dmv, %a, %gw, %sum : (tensor<2x8x48xbf16>, tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<2x8x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>)
    // CHECK: train.yield
    train.yield %dx4, %dg, %db : tensor<2x8x48xbf16>, tensor<48xbf16>, tensor<48xbf16>
  }
  // CHECK: train.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x8x48xbf16>, tensor<2x8xi32>) -> tensor<64x48xbf16>
  %dw = train.embedding_grad %bw#0, %tok : (tensor<2x8x48xbf16>, tensor<2x8xi32>) -> tensor<64x48xbf16>
  // CHECK: train.adamw "w", %{{.*}} : tensor<64x48xbf16>
  train.adamw "w", %dw : tensor<64x48xbf16>
  train.adamw "u.g", %bw#1 : tensor<48xbf16>
  train.adamw "u.b", %bw#2 : tensor<48xbf16>
  train.return %loss : tensor<f32>
}
