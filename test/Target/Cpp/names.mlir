// Names are the user's text: the emitted C++ quotes every byte of them, so
// that no model, param, input or unit name can end a string literal or a
// comment and become code. The step builds, and each name comes back as
// written.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=1 layout=flat output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s
// RUN: rm -rf %t && mkdir -p %t
// RUN: %shardc build %s --strategy zero3 --mesh 1 --layout flat --quiet -o %t/step
// RUN: %t/step --steps 1 --quiet --export %t/params.safetensors
// RUN: %python -c "import json, struct, sys; b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; print(sorted(k for k in json.loads(b[8:8 + n]) if k != '__metadata__'))" %t/params.safetensors | FileCheck %s --check-prefix=EXPORT

// CHECK-LABEL: const shardc_rt_param_info kParams[] = {
// CHECK-NEXT: {"w\"); std::abort(); (\"\\\012\?\?/", 2,
// CHECK-NEXT: {"b*/\\", 1,
// CHECK: {"x\"\012y", SHARDC_RT_F32,
// CHECK: {"u\"\\\012", 2, kFlatMembers0,
// CHECK: shardc_rt_region_begin(ctx, "forward u\"\\\012");
// CHECK: model.name = "m\"; std::abort(); \"";
// CHECK-NOT: std::abort();{{$}}

// EXPORT: ['b*/\\', 'w"); std::abort(); ("\\\n??/']

module {
  train.model @"m\22; std::abort(); \22" batch 4 optimizer <lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
    %x = train.input "x\"\0Ay" : tensor<4x4xf32>
    %y = train.input "y" : tensor<4xi32>
    %l = train.unit "u\"\\\0A"(%x) : (tensor<4x4xf32>) -> tensor<4x2xf32> {
    ^bb0(%a: tensor<4x4xf32>):
      %w = train.param "w\22); std::abort(); (\22\\\0A??/" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<2x4xf32>
      %b = train.param "b*/\\" init(#train.zeros) : tensor<2xf32>
      %h = train.linear %a, %w, %b : (tensor<4x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<4x2xf32>
      train.yield %h : tensor<4x2xf32>
    }
    %loss = train.cross_entropy %l, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
    train.return %loss : tensor<f32>
  }
}
