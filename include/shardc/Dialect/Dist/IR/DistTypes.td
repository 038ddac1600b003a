//===- DistTypes.td - Types and attributes of dist ---------*- tablegen -*-===//

#ifndef SHARDC_DIALECT_DIST_IR_DISTTYPES_TD
#define SHARDC_DIALECT_DIST_IR_DISTTYPES_TD

include "shardc/Dialect/Dist/IR/DistDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinTypes.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Dist_Layout : I32EnumAttr<"Layout", "how a tensor is split over ranks", [
    I32EnumAttrCase<"flat", 0>,
    I32EnumAttrCase<"dim0", 1>]> {
  let cppNamespace = "::shardc::dist";
  let genSpecializedAttr = 0;
  let description = [{
    - `flat`: FSDP1's FlatParameter. The unit's parameters are flattened and
      concatenated into one 1-D buffer, padded to a multiple of the group
      size N; rank r holds the r-th of N equal pieces. Shard edges cross
      parameter edges.
    - `dim0`: FSDP2's per-parameter shards. Each tensor of `n` rows is split
      along dimension 0 into N chunks of `ceil(n / N)` rows (as
      `torch.chunk`): the last chunks may be shorter or empty (3 rows over 2
      ranks: 2 + 1; 2 rows over 4 ranks: 1 + 1 + 0 + 0). A shard is typed
      with the padded chunk size `ceil(n / N)`.
  }];
}
def Dist_LayoutAttr : EnumAttr<Dist_Dialect, Dist_Layout, "layout">;

def Dist_Reduction : I32EnumAttr<"Reduction", "how a reduction combines ranks", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"avg", 1>]> {
  let cppNamespace = "::shardc::dist";
  let genSpecializedAttr = 0;
}
def Dist_ReductionAttr : EnumAttr<Dist_Dialect, Dist_Reduction, "reduction">;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Dist_ShardAttr : AttrDef<Dist_Dialect, "Shard"> {
  let mnemonic = "shard";
  let summary = "how a tensor is split over mesh axes";
  let description = [{
    Records that a parameter, gradient or optimizer state is held sharded:
    the layout and the mesh axes whose ranks share it (replicated over the
    mesh's other axes).

    ```mlir
    #dist.shard<layout = dim0, mesh = @world, axes = ["shard"]>
    ```
  }];
  let parameters = (ins "::shardc::dist::Layout":$layout,
                        "::mlir::FlatSymbolRefAttr":$mesh,
                        ArrayRefParameter<"::mlir::StringAttr">:$axes);
  let assemblyFormat = [{
    `<` `layout` `=` $layout `,` `mesh` `=` $mesh `,` `axes` `=` `[` $axes `]` `>`
  }];
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def Dist_TokenType : TypeDef<Dist_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "a collective in flight, holding its future result";
  let description = [{
    Returned by `dist.*_start`; `dist.wait` turns it into the result. The
    result cannot be read before the wait, and each token is waited on
    exactly once.

    ```mlir
    !dist.token<tensor<64x16xf32>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$result);
  let assemblyFormat = "`<` $result `>`";
}

#endif // SHARDC_DIALECT_DIST_IR_DISTTYPES_TD
