//===- TrainInterfaces.td - Interfaces of the train dialect -*- tablegen -*-===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD
#define SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD

include "mlir/IR/OpBase.td"

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
                    [{ return false; }]>,
  ];
}

#endif // SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD
