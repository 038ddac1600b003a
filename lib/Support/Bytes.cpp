//===- Bytes.cpp - Byte counts for people ---------------------------------===//

#include "shardc/Support/Bytes.h"

#include "llvm/Support/FormatVariadic.h"

std::string shardc::formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  return llvm::formatv("{0:F2} {1}", value, units[unit]).str();
}
