// gpt: 2 layers, hidden 64, 4 heads, vocab 256, seq 32, batch 4: 118528 parameters in 3 units
module {
  train.model @gpt batch 4 optimizer <lr = 0.0006, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1> {
    %0 = train.input "tokens" : tensor<4x32xi32>
    %1 = train.input "targets" : tensor<4x32xi32>
    %2 = train.param "transformer.wte.weight" init(#train.normal<std = 0.02>) : tensor<256x64xf32>
    %3 = train.param "transformer.wpe.weight" init(#train.normal<std = 0.02>) : tensor<32x64xf32>
    %4 = train.embedding %0, %2 : (tensor<4x32xi32>, tensor<256x64xf32>) -> tensor<4x32x64xf32>
    %5 = train.iota : tensor<32xi32>
    %6 = train.embedding %5, %3 : (tensor<32xi32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    %7 = train.add %4, %6 : (tensor<4x32x64xf32>, tensor<32x64xf32>) -> tensor<4x32x64xf32>
    %8 = train.unit "transformer.h.0"(%7) : (tensor<4x32x64xf32>) -> tensor<4x32x64xf32> {
    ^bb0(%arg0: tensor<4x32x64xf32>):
      %15 = train.param "transformer.h.0.ln_1.weight" init(#train.ones) : tensor<64xf32>
      %16 = train.param "transformer.h.0.ln_1.bias" init(#train.zeros) : tensor<64xf32>
      %17 = train.param "transformer.h.0.attn.c_attn.weight" init(#train.normal<std = 0.02>) : tensor<192x64xf32>
      %18 = train.param "transformer.h.0.attn.c_attn.bias" init(#train.zeros) : tensor<192xf32>
      %19 = train.param "transformer.h.0.attn.c_proj.weight" init(#train.normal<std = 0.01>) : tensor<64x64xf32>
      %20 = train.param "transformer.h.0.attn.c_proj.bias" init(#train.zeros) : tensor<64xf32>
      %21 = train.param "transformer.h.0.ln_2.weight" init(#train.ones) : tensor<64xf32>
      %22 = train.param "transformer.h.0.ln_2.bias" init(#train.zeros) : tensor<64xf32>
      %23 = train.param "transformer.h.0.mlp.c_fc.weight" init(#train.normal<std = 0.02>) : tensor<256x64xf32>
      %24 = train.param "transformer.h.0.mlp.c_fc.bias" init(#train.zeros) : tensor<256xf32>
      %25 = train.param "transformer.h.0.mlp.c_proj.weight" init(#train.normal<std = 0.01>) : tensor<64x256xf32>
      %26 = train.param "transformer.h.0.mlp.c_proj.bias" init(#train.zeros) : tensor<64xf32>
      %27 = train.layernorm %arg0, %15, %16 : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      %28 = train.linear %27, %17, %18 : (tensor<4x32x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<4x32x192xf32>
      %result = train.attention %28 heads 4 : (tensor<4x32x192xf32>) -> tensor<4x32x64xf32>
      %29 = train.linear %result, %19, %20 : (tensor<4x32x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      %30 = train.add %arg0, %29 : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
      %31 = train.layernorm %30, %21, %22 : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      %32 = train.linear %31, %23, %24 : (tensor<4x32x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> tensor<4x32x256xf32>
      %33 = train.gelu %32 : tensor<4x32x256xf32>
      %34 = train.linear %33, %25, %26 : (tensor<4x32x256xf32>, tensor<64x256xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      %35 = train.add %30, %34 : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
      train.yield %35 : tensor<4x32x64xf32>
    }
    %9 = train.unit "transformer.h.1"(%8) : (tensor<4x32x64xf32>) -> tensor<4x32x64xf32> {
    ^bb0(%arg0: tensor<4x32x64xf32>):
      %15 = train.param "transformer.h.1.ln_1.weight" init(#train.ones) : tensor<64xf32>
      %16 = train.param "transformer.h.1.ln_1.bias" init(#train.zeros) : tensor<64xf32>
      %17 = train.param "transformer.h.1.attn.c_attn.weight" init(#train.normal<std = 0.02>) : tensor<192x64xf32>
      %18 = train.param "transformer.h.1.attn.c_attn.bias" init(#train.zeros) : tensor<192xf32>
      %19 = train.param "transformer.h.1.attn.c_proj.weight" init(#train.normal<std = 0.01>) : tensor<64x64xf32>
      %20 = train.param "transformer.h.1.attn.c_proj.bias" init(#train.zeros) : tensor<64xf32>
      %21 = train.param "transformer.h.1.ln_2.weight" init(#train.ones) : tensor<64xf32>
      %22 = train.param "transformer.h.1.ln_2.bias" init(#train.zeros) : tensor<64xf32>
      %23 = train.param "transformer.h.1.mlp.c_fc.weight" init(#train.normal<std = 0.02>) : tensor<256x64xf32>
      %24 = train.param "transformer.h.1.mlp.c_fc.bias" init(#train.zeros) : tensor<256xf32>
      %25 = train.param "transformer.h.1.mlp.c_proj.weight" init(#train.normal<std = 0.01>) : tensor<64x256xf32>
      %26 = train.param "transformer.h.1.mlp.c_proj.bias" init(#train.zeros) : tensor<64xf32>
      %27 = train.layernorm %arg0, %15, %16 : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      %28 = train.linear %27, %17, %18 : (tensor<4x32x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<4x32x192xf32>
      %result = train.attention %28 heads 4 : (tensor<4x32x192xf32>) -> tensor<4x32x64xf32>
      %29 = train.linear %result, %19, %20 : (tensor<4x32x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      %30 = train.add %arg0, %29 : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
      %31 = train.layernorm %30, %21, %22 : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      %32 = train.linear %31, %23, %24 : (tensor<4x32x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> tensor<4x32x256xf32>
      %33 = train.gelu %32 : tensor<4x32x256xf32>
      %34 = train.linear %33, %25, %26 : (tensor<4x32x256xf32>, tensor<64x256xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
      %35 = train.add %30, %34 : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
      train.yield %35 : tensor<4x32x64xf32>
    }
    %10 = train.param "transformer.ln_f.weight" init(#train.ones) : tensor<64xf32>
    %11 = train.param "transformer.ln_f.bias" init(#train.zeros) : tensor<64xf32>
    %12 = train.layernorm %9, %10, %11 : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
    %13 = train.linear %12, %2 : (tensor<4x32x64xf32>, tensor<256x64xf32>) -> tensor<4x32x256xf32>
    %14 = train.cross_entropy %13, %1 : (tensor<4x32x256xf32>, tensor<4x32xi32>) -> tensor<f32>
    train.return %14 : tensor<f32>
  }
}
