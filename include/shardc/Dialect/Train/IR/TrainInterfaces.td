//===- TrainInterfaces.td - Interfaces of the train dialect -*- tablegen -*-===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD
#define SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD

include "mlir/IR/OpBase.td"

def Train_ParamUserOpInterface : OpInterface<"ParamUserOpInterface"> {
  let cppNamespace = "::shardc::train";
  let description = [{
    An op that names a parameter of its `train.model` (reads, updates or
    writes it). The model resolves every such name once, in one walk, and
    hands each op its `train.param`: a model with thousands of parameters
    verifies in linear time.
  }];
  let methods = [
    InterfaceMethod<"The name of the parameter.", "::llvm::StringRef",
                    "getParamName">,
    InterfaceMethod<"Checks the op against the `train.param` it names.",
                    "::mlir::LogicalResult", "verifyParam",
                    (ins "::mlir::Operation *":$param)>,
    InterfaceMethod<"Whether the op is the optimizer update of the param: a "
                    "param has at most one.",
                    "bool", "isParamUpdate", (ins), [{}],
                    [{ return false; }]>,
  ];
}

#endif // SHARDC_DIALECT_TRAIN_IR_TRAININTERFACES_TD
