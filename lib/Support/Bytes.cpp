//===- Bytes.cpp - Byte counts for people ---------------------------------===//

#include "shardc/Support/Bytes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdlib>

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

std::optional<int64_t> shardc::parseBytes(llvm::StringRef text) {
  // strtod ends the number where a unit starts ("1EB": 1, then EB).
  std::string copy = text.str();
  char *end = nullptr;
  double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end == copy.c_str() || llvm::isSpace(copy[0]))
    return std::nullopt;
  llvm::StringRef unit(end);
  struct Unit {
    const char *name;
    double bytes;
  };
  static const Unit units[] = {
      {"", 1},         {"b", 1},       {"kb", 1e3},     {"mb", 1e6},
      {"gb", 1e9},     {"tb", 1e12},   {"kib", 0x1p10}, {"mib", 0x1p20},
      {"gib", 0x1p30}, {"tib", 0x1p40}};
  std::string lower = unit.lower();
  for (const Unit &u : units) {
    if (lower != u.name)
      continue;
    double bytes = std::round(value * u.bytes);
    if (!(bytes >= 0 && bytes <= 0x1p62))
      return std::nullopt;
    return static_cast<int64_t>(bytes);
  }
  return std::nullopt;
}
