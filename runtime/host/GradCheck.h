//===- GradCheck.h - The compiled step against finite differences -*- C++ -*-===//

#ifndef SHARDC_RT_HOST_GRADCHECK_H
#define SHARDC_RT_HOST_GRADCHECK_H

#include "shardc_rt/shardc_rt.h"

#include <cstdint>

namespace shardc::rt {

/// While --check-grads runs: records the gradient the optimizer was handed
/// for param `param` (or flat param `flat`) and returns true, and the
/// optimizer then leaves the params as they are. f32 params' gradients are
/// f32, or bf16 under --reduce-dtype bf16 (widened here).
bool captureGradient(shardc_rt_context &ctx, int32_t param, int32_t flat,
                     const void *grad, shardc_rt_dtype gradDtype);

/// Compares `perParam` elements of each trainable param's gradient with
/// central differences of the loss; prints a line per param; returns the
/// exit code.
int checkGradients(shardc_rt_context &ctx, int64_t perParam);

} // namespace shardc::rt

#endif // SHARDC_RT_HOST_GRADCHECK_H
