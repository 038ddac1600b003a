//===- DistOps.td - Operations of the dist dialect ---------*- tablegen -*-===//

#ifndef SHARDC_DIALECT_DIST_IR_DISTOPS_TD
#define SHARDC_DIALECT_DIST_IR_DISTOPS_TD

include "shardc/Dialect/Dist/IR/DistDialect.td"
include "shardc/Dialect/Dist/IR/DistTypes.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "shardc/Dialect/Train/IR/TrainInterfaces.td"

def Dist_Tensor : RankedTensorOf<[F32, BF16]>;
def Dist_Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

//===----------------------------------------------------------------------===//
// dist.mesh
//===----------------------------------------------------------------------===//

def Dist_MeshOp : Dist_Op<"mesh", [Symbol]> {
  let summary = "a device mesh with named axes";
  let description = [{
    The ranks of a job arranged as a grid of 1 to 3 axes, row-major: rank
    `r` of a `[R, S]` mesh sits at `(r / S, r % S)`, so consecutive ranks
    share a replicate group's shard axis, as HSDP lays ranks out. A shard
    axis cut in two (`reshard-after-forward=K`: `node` of `S / K` and
    `local` of `K`) keeps a group of `local` on consecutive ranks.
    Collectives name the axes they run over; the group of a collective over
    axis `shard` is the ranks that differ only in their `shard` coordinate.

    ```mlir
    dist.mesh @world axes ["shard"] shape [8]
    dist.mesh @hsdp axes ["replicate", "shard"] shape [2, 4]
    dist.mesh @hpz axes ["replicate", "node", "local"] shape [2, 2, 4]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name `axes` $axes `shape` $shape attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The index of axis `name`, or -1.
    int64_t getAxisIndex(::llvm::StringRef name);
    /// The number of ranks: the product of the axis sizes.
    int64_t getNumRanks();
    /// The most ranks a mesh holds (2^24): sizes and their products then fit
    /// every byte count in 64 bits.
    static constexpr int64_t kMaxRanks = int64_t(1) << 24;
  }];
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Common parts of every collective: the input, the mesh and axes it runs
/// over, and the element type on the wire (the result's when absent).
class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, !listconcat(traits,
                                    [DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  dag commonArgs = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                        StrArrayAttr:$axes, OptionalAttr<TypeAttr>:$wire);
  code commonDecls = [{
    /// The element type sent between ranks.
    ::mlir::Type getWireType();
    /// The result tensor type, through the token for the async forms.
    ::mlir::RankedTensorType getResultTensorType();
  }];
}

class Dist_AllGatherBase<string mnemonic, list<Trait> traits = []>
    : Dist_CollectiveOp<mnemonic, traits> {
  let arguments = !con(commonArgs, (ins Dist_LayoutAttr:$layout));
  let extraClassDeclaration = commonDecls;
}

class Dist_ReduceScatterBase<string mnemonic, list<Trait> traits = []>
    : Dist_CollectiveOp<mnemonic, traits> {
  let arguments = !con(commonArgs, (ins Dist_ReductionAttr:$reduction,
                                        Dist_LayoutAttr:$layout));
  let extraClassDeclaration = commonDecls;
}

class Dist_AllReduceBase<string mnemonic, list<Trait> traits = []>
    : Dist_CollectiveOp<mnemonic, traits> {
  let arguments = !con(commonArgs, (ins Dist_ReductionAttr:$reduction));
  let extraClassDeclaration = commonDecls;
}

def Dist_AllGatherOp : Dist_AllGatherBase<"all_gather"> {
  let summary = "gathers every rank's shard into the full tensor";
  let description = [{
    Each rank contributes its shard of `layout` over the group of `axes`
    and receives the full tensor. With `dim0` the input is a shard of
    `ceil(n / N)` rows and the result has `n` rows (uneven and empty shards
    allowed); with `flat` both are 1-D and the result is N times the input.
    A `wire` type different from the input's casts before sending (FSDP2's
    `param_dtype`).

    ```mlir
    %full = dist.all_gather %shard on @world ["shard"] dim0 wire bf16
        : tensor<2x16xf32> -> tensor<3x16xbf16>
    ```
  }];
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes $layout (`wire` $wire^)? attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Dist_AllGatherStartOp : Dist_AllGatherBase<"all_gather_start"> {
  let summary = "starts an all-gather; a prefetch when issued early";
  let description = [{
    `dist.all_gather` split in two: the transfer starts here and its result
    is available at the `dist.wait` of the token. An all-gather started
    before the unit that needs it runs (the previous unit's compute, or the
    next unit's backward) is a prefetch.

    ```mlir
    %t = dist.all_gather_start %shard on @world ["shard"] dim0
        : tensor<2x16xf32> -> !dist.token<tensor<4x16xf32>>
    ```
  }];
  let hasVerifier = 1;
  let results = (outs Dist_TokenType:$token);
  let assemblyFormat = [{
    $input `on` $mesh $axes $layout (`wire` $wire^)? attr-dict `:`
    type($input) `->` qualified(type($token))
  }];
}

def Dist_ReduceScatterOp : Dist_ReduceScatterBase<"reduce_scatter"> {
  let summary = "reduces the full tensor over ranks, each keeping its shard";
  let description = [{
    The inverse layout of `dist.all_gather`: the input is the full tensor on
    each rank, the result this rank's shard of the elementwise reduction
    (`sum`, or `avg` over the group). A `wire` type different from the input
    casts before reducing (FSDP2's `reduce_dtype`).

    ```mlir
    %g = dist.reduce_scatter %full on @world ["shard"] avg flat
        : tensor<64xf32> -> tensor<16xf32>
    ```
  }];
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes $reduction $layout (`wire` $wire^)? attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Dist_ReduceScatterStartOp : Dist_ReduceScatterBase<"reduce_scatter_start"> {
  let summary = "starts a reduce-scatter";
  let description = [{
    ```mlir
    %t = dist.reduce_scatter_start %full on @world ["shard"] avg flat
        : tensor<64xf32> -> !dist.token<tensor<16xf32>>
    ```
  }];
  let hasVerifier = 1;
  let results = (outs Dist_TokenType:$token);
  let assemblyFormat = [{
    $input `on` $mesh $axes $reduction $layout (`wire` $wire^)? attr-dict `:`
    type($input) `->` qualified(type($token))
  }];
}

def Dist_AllReduceOp : Dist_AllReduceBase<"all_reduce"> {
  let summary = "reduces a tensor over ranks, every rank keeping the result";
  let description = [{
    DDP's gradient all-reduce, and HSDP's all-reduce of gradient shards over
    the replicate axis.

    ```mlir
    %g = dist.all_reduce %grad on @hsdp ["replicate"] avg
        : tensor<16xf32> -> tensor<16xf32>
    ```
  }];
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes $reduction (`wire` $wire^)? attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Dist_AllReduceStartOp : Dist_AllReduceBase<"all_reduce_start"> {
  let summary = "starts an all-reduce";
  let description = [{
    ```mlir
    %t = dist.all_reduce_start %grad on @world ["shard"] avg
        : tensor<16xf32> -> !dist.token<tensor<16xf32>>
    ```
  }];
  let hasVerifier = 1;
  let results = (outs Dist_TokenType:$token);
  let assemblyFormat = [{
    $input `on` $mesh $axes $reduction (`wire` $wire^)? attr-dict `:`
    type($input) `->` qualified(type($token))
  }];
}

def Dist_TakeShardOp : Dist_Op<"take_shard", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "keeps this rank's shard of a tensor its group holds whole";
  let description = [{
    The inverse of `dist.all_gather` over the same `axes` and `layout`: of
    a tensor every rank of the group holds whole, the piece this rank would
    contribute to gathering it, in a buffer of its own. With `dim0`, rows
    `[i * ceil(n / N), (i + 1) * ceil(n / N))` of the `n` rows, where `i`
    is the rank's index in the group of `N`, zero rows past the end; with
    `flat`, the `i`-th of `N` equal pieces.

    `--shardc-shard` with `reshard-after-forward=K` puts it after a unit's
    forward (FSDP2's `reshard_after_forward=K`, ZeRO++'s hpZ): the unit
    keeps its params sharded over the `K` ranks of axis `local` instead of
    the whole shard axis, and the backward's gather runs over `local` alone.

    ```mlir
    %kept = dist.take_shard %full on @mesh ["local"] dim0
        : tensor<5x16xbf16> -> tensor<3x16xbf16>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Dist_LayoutAttr:$layout);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes $layout attr-dict `:` type($input) `->`
    type($result)
  }];
}

//===----------------------------------------------------------------------===//
// dist.wait, dist.free
//===----------------------------------------------------------------------===//

def Dist_WaitOp : Dist_Op<"wait", [
    TypesMatchWith<"result is the token's result", "token", "result",
                   "::llvm::cast<::shardc::dist::TokenType>($_self).getResult()">]> {
  let summary = "waits for a collective and gives its result";
  let description = [{
    ```mlir
    %full = dist.wait %t : !dist.token<tensor<4x16xf32>>
    ```
  }];
  let arguments = (ins Dist_TokenType:$token);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$token attr-dict `:` qualified(type($token))";
  let hasVerifier = 1;
}

def Dist_FreeOp : Dist_Op<"free"> {
  let summary = "ends the life of a buffer";
  let description = [{
    The memory holding `value` returns to the allocator here: after
    `dist.free` of a gathered parameter only the shard remains. Nothing may
    read `value` after its free, and a value is freed at most once. A
    `train.param`'s or `dist.flat_param`'s storage (the shard, or the whole
    param) is never freed: it lives across steps, and the update writes it
    by name.

    ```mlir
    dist.free %full : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Buckets
//===----------------------------------------------------------------------===//

def Dist_PackOp : Dist_Op<"pack", [Pure]> {
  let summary = "copies tensors, flattened and in order, into one buffer";
  let description = [{
    A bucket (DDP's gradient buckets): the inputs, flattened, one after the
    other in a 1-D buffer of their element type, zero-padded to the result's
    size, so that one collective moves them all.

    ```mlir
    %b = dist.pack %g0, %g1 : tensor<3x4xf32>, tensor<3xf32> -> tensor<15xf32>
    ```
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs);
  let results = (outs 1DTensorOf<[F32, BF16]>:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_UnpackOp : Dist_Op<"unpack", [Pure]> {
  let summary = "views the tensors a dist.pack put in a buffer";
  let description = [{
    The inverse of `dist.pack`: each result views the next piece of the
    buffer, in order, with the result's shape.

    ```mlir
    %g0, %g1 = dist.unpack %b : tensor<15xf32> -> tensor<3x4xf32>, tensor<3xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[F32, BF16]>:$input);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Dist_ConvertOp : Dist_Op<"convert", [Pure, SameOperandsAndResultShape]> {
  let summary = "converts a tensor to another element type";
  let description = [{
    Each element converted, rounded to nearest even where the result type is
    narrower. `--shardc-shard` puts it where a collective over a group of one
    rank casts to its wire type and back to another (a bf16 gradient reduced
    in f32 at world size 1): that is all such a collective does.

    ```mlir
    %g32 = dist.convert %g : tensor<3x4xbf16> -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Optimizer on shards of replicated parameters (ZeRO-1, ZeRO-2)
//===----------------------------------------------------------------------===//

def Dist_AdamWShardOp : Dist_Op<"adamw_shard", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Train_OptimizerUpdateOpInterface,
    DeclareOpInterfaceMethods<Train_ParamUserOpInterface>]> {
  let summary = "AdamW on this rank's dim0 shard of a replicated parameter";
  let description = [{
    ZeRO-1 and ZeRO-2 keep every parameter whole on every rank but split
    the optimizer: this rank owns the optimizer state (first and second
    moments, and an fp32 master copy when the parameter is stored in lower
    precision) of its dim0 shard of parameter `name` over `axes`, updates
    that shard with the reduce-scattered gradient `grad` (times `clip`,
    where given, as `train.adamw`), and returns it in the parameter's element
    type, ready to be all-gathered and written back with `dist.set_param`.

    ```mlir
    %u = dist.adamw_shard "h0.w", %g on @mesh ["shard"]
        : tensor<2x16xf32> -> tensor<2x16xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, Dist_Tensor:$grad,
                       Optional<Dist_Scalar>:$clip,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $name `,` $grad (`clip` $clip^)? `on` $mesh $axes attr-dict `:`
    type($grad) `->` type($result)
  }];
}

def Dist_SetParamOp : Dist_Op<"set_param", [
    DeclareOpInterfaceMethods<Train_ParamUserOpInterface>]> {
  let summary = "writes a whole parameter";
  let description = [{
    Replaces the stored value of parameter `name` with `value`, of the
    parameter's storage type: the all-gathered result of `dist.adamw_shard`.

    ```mlir
    dist.set_param "h0.w", %full : tensor<4x16xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, Dist_Tensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// FSDP1's flat parameters
//===----------------------------------------------------------------------===//

def Dist_FlatParamOp : Dist_Op<"flat_param", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Train_ParamUserOpInterface>]> {
  let summary = "this rank's piece of a unit's flat parameter";
  let description = [{
    FSDP1's FlatParameter (`layout = flat`): the trainable parameters
    `params` of unit `unit`, flattened and concatenated in order, padded
    with zeros to N equal pieces for the N ranks of `axes`; the result is
    this rank's piece, and the state the rank stores for those parameters.
    Shard edges cross parameter edges. A `dist.all_gather ... flat` and a
    `dist.unpack` give the unit its parameters; `dist.adamw_flat` updates the
    piece. The member `train.param`s are marked `sharded(#dist.shard<layout
    = flat, ...>)`, keep their full type and are not read: they declare the
    names, shapes and initializers.

    ```mlir
    %f = dist.flat_param "h0" ["h0.w", "h0.b"] on @mesh ["shard"]
        : tensor<10xf32>
    ```
  }];
  let arguments = (ins StrAttr:$unit, StrArrayAttr:$params,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs 1DTensorOf<[F32, BF16]>:$result);
  let assemblyFormat = [{
    $unit $params `on` $mesh $axes attr-dict `:` type($result)
  }];
}

def Dist_AdamWFlatOp : Dist_Op<"adamw_flat", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Train_OptimizerUpdateOpInterface,
    DeclareOpInterfaceMethods<Train_ParamUserOpInterface>]> {
  let summary = "AdamW on this rank's piece of a unit's flat parameter";
  let description = [{
    Updates this rank's piece of the flat concatenation of `params` (as
    `dist.flat_param` lays them out over the ranks of `axes`) with that
    piece's reduce-scattered gradient `grad` (times `clip`, where given, as
    `train.adamw`). This rank owns the piece's optimizer state (moments, and
    an fp32 master copy under lower-precision storage).

    Without a result the piece is the unit's `dist.flat_param` (ZeRO-3,
    HSDP). With one, the parameters are stored whole on every rank (ZeRO-1,
    ZeRO-2 with `layout = flat`, DeepSpeed's flat partitions): the result is
    the updated piece, to be all-gathered, unpacked and written back with
    `dist.set_param`.

    The verifier follows `grad` back through its reductions, conversions
    and micro-batch sums to the `dist.pack` of the gradients: its pieces
    must have the params' shapes, in order, and each that a
    `train.backward` yields (through the same) must be that param's
    gradient, not another's (two members of one shape swapped would update
    each with the other's) nor a cotangent of the unit's inputs; the
    updated piece's unpacks must be in that order too, each view written
    back to its param.

    ```mlir
    dist.adamw_flat "h0" ["h0.w", "h0.b"], %g on @mesh ["shard"] : tensor<10xf32>
    %u = dist.adamw_flat "h0" ["h0.w", "h0.b"], %g on @mesh ["shard"]
        : tensor<10xf32> -> tensor<10xf32>
    ```
  }];
  let arguments = (ins StrAttr:$unit, StrArrayAttr:$params,
                       1DTensorOf<[F32, BF16]>:$grad,
                       Optional<Dist_Scalar>:$clip,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs Optional<1DTensorOf<[F32, BF16]>>:$updated);
  let assemblyFormat = [{
    $unit $params `,` $grad (`clip` $clip^)? `on` $mesh $axes attr-dict `:`
    type($grad) (`->` type($updated)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Gradient clipping (#train.adamw's max_grad_norm)
//===----------------------------------------------------------------------===//

def Dist_SumSquaresOp : Dist_Op<"sum_squares", [Pure]> {
  let summary = "the sum of the squares of every element of its inputs";
  let description = [{
    Sums `x * x` over every element of every input, in f64, and returns the
    sum rounded to f32: this rank's share of the squared gradient norm. A
    piece's padding holds zeros and adds nothing. Inserted by
    `--shardc-shard` over the gradients the updates take, one per group of
    ranks holding distinct pieces; a `dist.all_reduce` (sum) over that group
    completes it.

    ```mlir
    %s = dist.sum_squares %gw, %gb : tensor<2x16xf32>, tensor<2xbf16>
    ```
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs);
  let results = (outs Dist_Scalar:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def Dist_ClipCoefficientOp : Dist_Op<"clip_coefficient", [Pure]> {
  let summary = "the factor clip_grad_norm_ scales every gradient by";
  let description = [{
    `norm = sqrt(s0 + s1 + ...)` of the squared-norm sums `sums`, and the
    result `min(1, max_norm / (norm + 1e-6))`, as
    `torch.nn.utils.clip_grad_norm_`; the updates of the step take it as
    their `clip`. The runtime reports `norm` (`--log-json`'s `grad_norm`).

    ```mlir
    %c = dist.clip_coefficient %s0, %s1 max_norm 1.0
    ```
  }];
  let arguments = (ins Variadic<Dist_Scalar>:$sums, F64Attr:$max_norm);
  let results = (outs Dist_Scalar:$result);
  let assemblyFormat = "$sums `max_norm` $max_norm attr-dict";
  let hasVerifier = 1;
}

#endif // SHARDC_DIALECT_DIST_IR_DISTOPS_TD
