//===- TrainInterfaces.td - Interfaces of the train dialect -*- tablegen -*-===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD
#define SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD

include "mlir/IR/OpBase.td"

def Train_OptimizerUpdateOpInterface
    : OpInterface<"OptimizerUpdateOpInterface"> {
  let cppNamespace = "::shardc::train";
  let description = [{
    An optimizer update of parameters: `train.adamw`, and what
    `--shardc-shard` makes of it (`dist.adamw_shard`, `dist.adamw_flat`). It
    takes the gradient of what it updates and, where the model clips
    gradients, the step's clip coefficient, by which it scales the gradient.
  }];
  let methods = [
    InterfaceMethod<"The gradient of what the op updates.", "::mlir::Value",
                    "getGrad">,
    InterfaceMethod<"The clip coefficient, or null: the gradient as it is.",
                    "::mlir::Value", "getClip">,
    InterfaceMethod<"The clip operand, to set.",
                    "::mlir::MutableOperandRange", "getClipMutable">,
  ];
}

def Train_ParamUserOpInterface : OpInterface<"ParamUserOpInterface"> {
  let cppNamespace = "::shardc::train";
  let description = [{
    An op that names parameters of its `train.model` (reads, updates or
    writes them). The model resolves every such name once, in one walk, and
    hands each op its `train.param`: a model with thousands of parameters
    verifies in linear time.
  }];
  let methods = [
    InterfaceMethod<"The names of the parameters the op names: one, or a "
                    "unit's flat parameter's members in order.",
                    "::llvm::SmallVector<::llvm::StringRef, 1>",
                    "getParamNames">,
    InterfaceMethod<"Checks the op against the `train.param`s it names, in "
                    "the order of getParamNames().",
                    "::mlir::LogicalResult", "verifyParams",
                    (ins "::llvm::ArrayRef<::mlir::Operation *>":$params)>,
    InterfaceMethod<"Whether the op is the optimizer update of the params: a "
                    "param has at most one.",
                    "bool", "isParamUpdate", (ins), [{}],
                    [{
      return ::llvm::isa<::shardc::train::OptimizerUpdateOpInterface>(
          $_op.getOperation());
    }]>,
  ];
}

def Train_InPlaceOpInterface : OpInterface<"InPlaceOpInterface"> {
  let cppNamespace = "::shardc::train";
  let description = [{
    An op one of whose results may be written over one of its operands: its
    kernels, on every target, read each element of that operand (and every
    reduction over it they need) before they write the same element of the
    result, so they are correct when both name one buffer. Where that
    operand's buffer dies at this op and has the result's type and size,
    BufferLiveness gives the result that buffer: the step allocates nothing
    for it and the ledger counts it once. This is XLA's in-place buffer
    reuse; for a language model's `train.cross_entropy_grad` (or
    `train.cross_entropy_and_grad`) it is llm.c's classifier, which writes
    the logits' gradient over the logits, the largest tensor of the step.
  }];
  let methods = [
    InterfaceMethod<"The operand the result may be written over.",
                    "::mlir::Value", "getInPlaceOperand">,
    InterfaceMethod<"The result that may be written over the operand.",
                    "::mlir::Value", "getInPlaceResult">,
  ];
}

#endif // SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD
