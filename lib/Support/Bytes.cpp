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
  // A decimal number (not strtod's hex, inf or nan), then the unit.
  size_t digits = text.find_first_not_of("0123456789.");
  llvm::StringRef number = text.take_front(digits);
  if (number.empty() || number == ".")
    return std::nullopt;
  llvm::StringRef rest = text.drop_front(number.size());
  if (rest.size() >= 2 && (rest[0] == 'e' || rest[0] == 'E') &&
      (llvm::isDigit(rest[1]) ||
       (rest.size() >= 3 && (rest[1] == '+' || rest[1] == '-') &&
        llvm::isDigit(rest[2])))) {
    size_t exponent = rest.find_first_not_of("0123456789", 2);
    number = text.take_front(number.size() + std::min(exponent, rest.size()));
  }
  std::string copy = number.str();
  char *end = nullptr;
  double value = std::strtod(copy.c_str(), &end);
  if (*end != '\0')
    return std::nullopt;
  // Bytes are B: "Gb" (gigabits) is no byte count.
  struct Unit {
    const char *name;
    double bytes;
  };
  static const Unit units[] = {
      {"", 1},         {"B", 1},       {"KB", 1e3},     {"MB", 1e6},
      {"GB", 1e9},     {"TB", 1e12},   {"KiB", 0x1p10}, {"MiB", 0x1p20},
      {"GiB", 0x1p30}, {"TiB", 0x1p40}};
  llvm::StringRef unit = text.drop_front(number.size());
  for (const Unit &u : units) {
    llvm::StringRef name(u.name);
    // The prefix in any case ("kB", "gib"), the i and the B as written.
    if (unit.size() != name.size() ||
        !unit.drop_back().equals_insensitive(name.drop_back()) ||
        unit.take_back() != name.take_back() ||
        (name.size() == 3 && unit[1] != 'i'))
      continue;
    double bytes = std::round(value * u.bytes);
    // A fraction of a byte is not a budget (0 itself is none).
    if (!(bytes <= 0x1p62) || (bytes == 0 && value != 0))
      return std::nullopt;
    return static_cast<int64_t>(bytes);
  }
  return std::nullopt;
}
