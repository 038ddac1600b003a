//===- DistDialect.td - The dist dialect -------------------*- tablegen -*-===//
//
// What sharding inserts: the device mesh, shard layouts, and the collectives.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_DIALECT_DIST_IR_DISTDIALECT_TD
#define SHARDC_DIALECT_DIST_IR_DISTDIALECT_TD

include "mlir/IR/OpBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::shardc::dist";
  let summary = "Device meshes, shard layouts and collectives";
  let description = [{
    The `dist` dialect holds what the sharding passes insert into a training
    step: the device mesh (`dist.mesh`, 1-D or 2-D with named axes), how a
    parameter, gradient or optimizer state is split over mesh axes
    (`#dist.shard`), and the collectives that move tensors between ranks:
    `dist.all_gather`, `dist.reduce_scatter`, `dist.all_reduce`, `dist.free`,
    and their asynchronous forms (`*_start` returning a `!dist.token`, and
    `dist.wait`). Each collective names the mesh axes it runs over and the
    element type on the wire.

    Every rank runs the same program; a collective's operand and result
    types are those of one rank.

    A sharded `train.model` carries `dist.strategy` (the strategy's name,
    for the ledger; where the module has a `dist.mesh @mesh`, the model's
    `split` is its number of ranks: every strategy divides the batch over
    all of them), and `dist.offload_optimizer` (a unit attribute) where
    its optimizer state lives in host memory and its updates run on the
    host CPU: the ledger counts that state off the device's peak, and the
    bytes each step copies between host and device. With it,
    `dist.offload_params` (a unit attribute) says the stored params
    (`train.param`, `dist.flat_param`) live in host memory too: only
    gathers read them, each copying its shard into its slot of the
    gathered buffer and gathering in place, and the updates write them
    there.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
}

// Every tensor a dist op touches has a static shape of positive dimensions
// and at most 2^40 elements, as train's ops (train::verifyStaticShapes),
// checked before the op's own verifier: the sizes and byte counts later
// passes, the ledger and the emitters compute all assume it.
def StaticShapes : NativeOpTrait<"StaticShapes"> {
  let cppNamespace = "::shardc::train";
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, !listconcat([StaticShapes], traits)>;

#endif // SHARDC_DIALECT_DIST_IR_DISTDIALECT_TD
