//===- TrainDialect.td - The train dialect -----------------*- tablegen -*-===//
//
// The model IR that users write: parameters grouped into units, forward
// compute with value semantics, the loss, and the optimizer.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAINDIALECT_TD
#define SHARDC_DIALECT_TRAIN_IR_TRAINDIALECT_TD

include "mlir/IR/OpBase.td"

def Train_Dialect : Dialect {
  let name = "train";
  let cppNamespace = "::shardc::train";
  let summary = "A model's training step: parameters, units, compute, loss, optimizer";
  let description = [{
    The `train` dialect describes one training step of a model the way an
    ML-systems engineer thinks about it in PyTorch: a `train.model` holds
    `train.param` declarations (name, shape, element type, initializer),
    `train.input` batch inputs, compute ops with value semantics over ranked
    tensors, and returns the scalar loss. Parameters are grouped into FSDP
    units with `train.unit`; parameters declared directly in the model body
    belong to the root unit (FSDP2's root `fully_shard(model)`).

    ```mlir
    train.model @mlp batch 8 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9,
        beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
      %x = train.input "x" : tensor<8x16xf32>
      %y = train.input "y" : tensor<8xi32>
      %h = train.unit "fc0" (%x) : (tensor<8x16xf32>) -> tensor<8x4xf32> {
      ^bb0(%a: tensor<8x16xf32>):
        %w = train.param "fc0.weight" init(#train.normal<std = 2.0e-02>)
            : tensor<4x16xf32>
        %o = train.linear %a, %w : (tensor<8x16xf32>, tensor<4x16xf32>)
            -> tensor<8x4xf32>
        train.yield %o : tensor<8x4xf32>
      }
      %loss = train.cross_entropy %h, %y
          : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
      train.return %loss : tensor<f32>
    }
    ```

    `--train-autodiff` adds the backward (`train.backward` regions, one per
    unit, in reverse order) and one `train.adamw` update per trainable
    parameter. Where it recomputes a unit's forward in its backward
    (activation checkpointing), the ops that do carry the unit attribute
    `train.recomputed`: the trace shows them as the unit's recomputation.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

#endif // SHARDC_DIALECT_TRAIN_IR_TRAINDIALECT_TD
