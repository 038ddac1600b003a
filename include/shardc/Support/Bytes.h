//===- Bytes.h - Byte counts for people -------------------------*- C++ -*-===//

#ifndef SHARDC_SUPPORT_BYTES_H
#define SHARDC_SUPPORT_BYTES_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace shardc {
/// `bytes` in decimal units with two decimals: "1.24 GB" (GB = 10^9 bytes,
/// as the ZeRO paper counts).
std::string formatBytes(int64_t bytes);

/// A byte count as people write one: a decimal number, whole or not, then
/// optionally a unit: B; KB, MB, GB, TB (powers of 10^3); KiB, MiB, GiB,
/// TiB (of 2^10); the prefix in any case, the B a capital ("80GB",
/// "75GiB", "1.5e9", "512kB"). nullopt for anything else (hex, "80Gb",
/// which is bits), a negative count, one past 2^62 bytes, or one below a
/// byte but 0; a fraction of a byte is rounded.
std::optional<int64_t> parseBytes(llvm::StringRef text);
} // namespace shardc

#endif // SHARDC_SUPPORT_BYTES_H
