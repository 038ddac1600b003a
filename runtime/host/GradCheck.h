//===- GradCheck.h - The compiled step against finite differences -*- C++ -*-===//

#ifndef SHARDC_RT_HOST_GRADCHECK_H
#define SHARDC_RT_HOST_GRADCHECK_H

#include <cstdint>

struct shardc_rt_context;

namespace shardc::rt {

/// While --check-grads runs: records the gradient the optimizer was handed
/// for param `param` (or flat param `flat`) and returns true, and the
/// optimizer then leaves the params as they are.
bool captureGradient(shardc_rt_context &ctx, int32_t param, int32_t flat,
                     const void *grad);

/// Compares `perParam` elements of each trainable param's gradient with
/// central differences of the loss; prints a line per param; returns the
/// exit code.
int checkGradients(shardc_rt_context &ctx, int64_t perParam);

} // namespace shardc::rt

#endif // SHARDC_RT_HOST_GRADCHECK_H
