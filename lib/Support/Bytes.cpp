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
  // A decimal number (not strtod's hex, inf or nan): digits and a point,
  // then perhaps an exponent.
  llvm::StringRef mantissa =
      text.take_front(text.find_first_not_of("0123456789."));
  if (mantissa.empty() || mantissa == ".")
    return std::nullopt;
  llvm::StringRef number = mantissa, rest = text.drop_front(mantissa.size());
  if (rest.size() >= 2 && (rest[0] == 'e' || rest[0] == 'E')) {
    size_t digits = rest[1] == '+' || rest[1] == '-' ? 2 : 1;
    size_t end = rest.find_first_not_of("0123456789", digits);
    if (end == llvm::StringRef::npos)
      end = rest.size();
    if (end > digits)
      number = text.take_front(mantissa.size() + end);
  }
  std::string copy = number.str();
  char *end = nullptr;
  double value = std::strtod(copy.c_str(), &end);
  if (*end != '\0')
    return std::nullopt;
  // Bytes are B: "Gb" (gigabits) is no byte count. No unit is bytes; else
  // the prefix in any case ("kB", "gib"), the i and the B as written.
  struct Unit {
    const char *name;
    double bytes;
  };
  static const Unit units[] = {
      {"B", 1},        {"KB", 1e3},     {"MB", 1e6},
      {"GB", 1e9},     {"TB", 1e12},    {"KiB", 0x1p10},
      {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}};
  llvm::StringRef unit = text.drop_front(number.size());
  double scale = unit.empty() ? 1 : 0;
  for (const Unit &u : units) {
    llvm::StringRef name(u.name);
    if (unit.size() == name.size() &&
        unit.drop_back().equals_insensitive(name.drop_back()) &&
        unit.back() == name.back() && (name.size() != 3 || unit[1] == 'i'))
      scale = u.bytes;
  }
  if (scale == 0)
    return std::nullopt;
  double bytes = std::round(value * scale);
  // Neither a fraction of a byte nor a count so small it underflows
  // (1e-999): only a zero is 0, no budget.
  bool zero = mantissa.find_first_of("123456789") == llvm::StringRef::npos;
  if (!(bytes <= 0x1p62) || (bytes == 0 && !zero))
    return std::nullopt;
  return static_cast<int64_t>(bytes);
}
