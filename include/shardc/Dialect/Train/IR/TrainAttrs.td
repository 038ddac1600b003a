//===- TrainAttrs.td - Attributes of the train dialect -----*- tablegen -*-===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAINATTRS_TD
#define SHARDC_DIALECT_TRAIN_IR_TRAINATTRS_TD

include "shardc/Dialect/Train/IR/TrainDialect.td"
include "mlir/IR/AttrTypeBase.td"

/// A double-precision hyper-parameter, printed and parsed as a plain number;
/// with a default, it may be left out.
class Train_F64Param<string default = ""> : APFloatParameter<""> {
  let defaultValue = !if(!empty(default), "", "::llvm::APFloat(" # default # ")");
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if ($_parser.parseFloat(value))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }() }];
  let printer = [{
    ::shardc::train::printShortest($_printer.getStream(),
                                   $_self.convertToDouble())
  }];
}

class Train_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Train_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Train_AdamWAttr : Train_Attr<"AdamW", "adamw"> {
  let summary = "AdamW hyper-parameters, as torch.optim.AdamW";
  let description = [{
    The optimizer of a `train.model`. The update of a parameter `p` with
    gradient `g` at step `t` (1-based) is exactly torch.optim.AdamW's:

    ```
    p = p - lr * weight_decay * p                // decoupled weight decay
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1^t);  v_hat = v / (1 - beta2^t)
    p = p - lr * m_hat / (sqrt(v_hat) + eps)
    ```

    ```mlir
    #train.adamw<lr = 3.0e-04, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08,
                 weight_decay = 0.1>
    ```

    The learning rate may follow a schedule of the shape llm.c's GPT-2
    training uses (torch's `LinearLR` then `CosineAnnealingLR`, DeepSpeed's
    `WarmupCosineLR`): a linear warm-up, then a cosine decay. `lr` is then
    its peak, and step `t` uses

    ```
    lr_t = lr * t / warmup                                  t <= warmup
    lr_t = min_lr + (lr - min_lr) * (1 + cos(pi * (t - warmup)
                                    / (decay_steps - warmup))) / 2
                                                  warmup < t <= decay_steps
    lr_t = min_lr                                 t > decay_steps
    ```

    (computed in f64). `warmup = 0` starts at the peak;
    `decay_steps = 0` (the default) keeps it after the warm-up. Steps count
    across a checkpoint's save and load, so a resumed run continues the
    schedule.

    ```mlir
    #train.adamw<lr = 6.0e-04, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08,
                 weight_decay = 0.1, warmup = 700, decay_steps = 19073,
                 min_lr = 6.0e-05>
    ```

    `max_grad_norm > 0` clips gradients first, as
    `torch.nn.utils.clip_grad_norm_(params, max_grad_norm)` before the step
    (DeepSpeed's `gradient_clipping`, llm.c's `grad_clip`): every update
    takes `g * clip` instead of `g`, with one `clip` for the whole step,

    ```
    norm = sqrt(sum over every trainable param's g of sum(g * g))
    clip = min(1, max_grad_norm / (norm + 1e-6))
    ```

    `norm` is computed in f32 from f64 sums of squares. It needs the whole
    gradient: `--shardc-shard` sums each rank's squares (`dist.sum_squares`),
    all-reduces the sums over the ranks holding distinct pieces, and makes
    every update wait for `dist.clip_coefficient`. `0` (the default) clips
    nothing.

    ```mlir
    #train.adamw<lr = 6.0e-04, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08,
                 weight_decay = 0.1, max_grad_norm = 1.0>
    ```

    `decay_min_rank = R` applies the weight decay only to parameters of
    rank R or more; the others update with `weight_decay = 0`. `2` is the
    param groups of llm.c and nanoGPT (matrices and embeddings decay;
    biases and layer-norm weights do not); `0`, the default, decays every
    parameter.

    ```mlir
    #train.adamw<lr = 6.0e-04, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08,
                 weight_decay = 0.1, decay_min_rank = 2>
    ```
  }];
  // Keys are the parameters' names: snake_case, as the IR spells them.
  let parameters = (ins Train_F64Param<>:$lr, Train_F64Param<>:$beta1,
                        Train_F64Param<>:$beta2, Train_F64Param<>:$eps,
                        Train_F64Param<>:$weight_decay,
                        DefaultValuedParameter<"int64_t", "0">:$warmup,
                        DefaultValuedParameter<"int64_t", "0">:$decay_steps,
                        Train_F64Param<"0.0">:$min_lr,
                        Train_F64Param<"0.0">:$max_grad_norm,
                        DefaultValuedParameter<"int64_t", "0">:$decay_min_rank);
  let assemblyFormat = [{
    `<` struct($lr, $beta1, $beta2, $eps, $weight_decay, $warmup,
               $decay_steps, $min_lr, $max_grad_norm, $decay_min_rank) `>`
  }];
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Initializers
//===----------------------------------------------------------------------===//

def Train_ZerosInitAttr : Train_Attr<"ZerosInit", "zeros"> {
  let summary = "initialize a parameter to 0";
}

def Train_OnesInitAttr : Train_Attr<"OnesInit", "ones"> {
  let summary = "initialize a parameter to 1";
}

def Train_NormalInitAttr : Train_Attr<"NormalInit", "normal"> {
  let summary = "initialize from N(mean, std^2)";
  let description = [{
    `#train.normal<std = 0.02>` (mean 0) or `#train.normal<mean = 1.0, std = 0.02>`.
    The values are a deterministic function of the seed and the parameter's
    name and element index, so a parameter's full tensor is the same whatever
    the world size, strategy and layout.
  }];
  let parameters = (ins Train_F64Param<"0.0">:$mean, Train_F64Param<>:$std);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Train_UniformInitAttr : Train_Attr<"UniformInit", "uniform"> {
  let summary = "initialize from U(low, high)";
  let parameters = (ins Train_F64Param<>:$low, Train_F64Param<>:$high);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // SHARDC_DIALECT_TRAIN_IR_TRAINATTRS_TD
