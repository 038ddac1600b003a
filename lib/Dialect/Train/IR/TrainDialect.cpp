//===- TrainDialect.cpp - The train dialect and its attributes ------------===//

#include "shardc/Dialect/Train/IR/TrainDialect.h"
#include "shardc/Dialect/Train/IR/TrainAttrs.h"
#include "shardc/Dialect/Train/IR/TrainOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdlib>
#include <limits>

using namespace mlir;
using namespace shardc::train;

#include "shardc/Dialect/Train/IR/TrainDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "shardc/Dialect/Train/IR/TrainAttrs.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "shardc/Dialect/Train/IR/TrainOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "shardc/Dialect/Train/IR/TrainAttrs.cpp.inc"
      >();
}

bool shardc::train::isInitializer(Attribute attr) {
  return isa<ZerosInitAttr, OnesInitAttr, NormalInitAttr, UniformInitAttr>(
      attr);
}

void shardc::train::printShortest(llvm::raw_ostream &os, double value) {
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    text = llvm::formatv("{0}", llvm::format("%.*g", precision, value)).str();
    if (std::strtod(text.c_str(), nullptr) == value)
      break;
  }
  // MLIR float literals need a '.' before any exponent.
  if (text.find_first_of(".ni") == std::string::npos) {
    size_t e = text.find('e');
    text.insert(e == std::string::npos ? text.size() : e, ".0");
  }
  os << text;
}

LogicalResult
shardc::train::verifyFiniteF32(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringRef> names,
                               ArrayRef<double> values) {
  for (auto [name, value] : llvm::zip(names, values))
    if (!std::isfinite(value) ||
        std::fabs(value) > std::numeric_limits<float>::max()) {
      std::string text;
      llvm::raw_string_ostream os(text);
      printShortest(os, value);
      return emitError() << "expected a finite " << name
                         << " (as an f32, at most 3.4e38 in magnitude), got "
                         << text;
    }
  return success();
}

//===--- #train.adamw -----------------------------------------------------===//

LogicalResult AdamWAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                APFloat lrF, APFloat beta1F, APFloat beta2F,
                                APFloat epsF, APFloat weightDecayF,
                                int64_t warmup, int64_t decaySteps,
                                APFloat minLrF, APFloat maxGradNormF,
                                int64_t decayMinRank) {
  double lr = lrF.convertToDouble(), beta1 = beta1F.convertToDouble(),
         beta2 = beta2F.convertToDouble(), eps = epsF.convertToDouble(),
         weightDecay = weightDecayF.convertToDouble();
  if (failed(verifyFiniteF32(emitError, {"lr", "eps", "weight_decay"},
                             {lr, eps, weightDecay})))
    return failure();
  // The runtime computes in f32: a value below its smallest normal (or a
  // GPU's flush to zero) would be 0, and the step would change nothing.
  constexpr double kMinNormal = std::numeric_limits<float>::min();
  if (!(lr >= kMinNormal))
    return emitError()
           << "expected lr > 0 as an f32 (at least its smallest normal, "
              "1.17549435e-38), got "
           << lr;
  if (!(beta1 >= 0 && beta1 < 1))
    return emitError() << "expected 0 <= beta1 < 1, got " << beta1;
  if (!(beta2 >= 0 && beta2 < 1))
    return emitError() << "expected 0 <= beta2 < 1, got " << beta2;
  if (!(eps >= kMinNormal))
    return emitError()
           << "expected eps > 0 as an f32 (at least its smallest normal, "
              "1.17549435e-38), got "
           << eps;
  if (!(weightDecay >= 0))
    return emitError() << "expected weight_decay >= 0, got " << weightDecay;
  if (warmup < 0)
    return emitError() << "expected warmup >= 0 steps, got " << warmup;
  if (decaySteps != 0 && decaySteps <= warmup)
    return emitError() << "expected decay_steps > warmup (" << warmup
                       << "), or 0 for no decay, got " << decaySteps;
  double minLr = minLrF.convertToDouble();
  if (!(minLr >= 0 && minLr <= lr))
    return emitError() << "expected 0 <= min_lr <= lr (" << lr << "), got "
                       << minLr;
  if (minLr != 0 && decaySteps == 0)
    return emitError() << "min_lr " << minLr
                       << " is where the decay ends: expected decay_steps";
  double maxGradNorm = maxGradNormF.convertToDouble();
  if (failed(verifyFiniteF32(emitError, {"max_grad_norm"}, {maxGradNorm})))
    return failure();
  if (!(maxGradNorm >= 0))
    return emitError() << "expected max_grad_norm >= 0 (0: no clipping), got "
                       << maxGradNorm;
  if (decayMinRank < 0)
    return emitError() << "expected decay_min_rank >= 0 (0: every parameter "
                          "decays), got "
                       << decayMinRank;
  return success();
}

//===--- initializers -----------------------------------------------------===//

LogicalResult
NormalInitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       APFloat mean, APFloat std) {
  if (failed(verifyFiniteF32(emitError, {"mean", "std"},
                             {mean.convertToDouble(), std.convertToDouble()})))
    return failure();
  if (!(std.convertToDouble() >= 0))
    return emitError() << "expected std >= 0, got " << std.convertToDouble();
  return success();
}

LogicalResult
UniformInitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        APFloat low, APFloat high) {
  if (failed(verifyFiniteF32(emitError, {"low", "high"},
                             {low.convertToDouble(), high.convertToDouble()})))
    return failure();
  if (!(low.convertToDouble() <= high.convertToDouble()))
    return emitError() << "expected low <= high, got " << low.convertToDouble()
                       << " > " << high.convertToDouble();
  return success();
}
