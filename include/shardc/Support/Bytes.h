//===- Bytes.h - Byte counts for people -------------------------*- C++ -*-===//

#ifndef SHARDC_SUPPORT_BYTES_H
#define SHARDC_SUPPORT_BYTES_H

#include <cstdint>
#include <string>

namespace shardc {
/// `bytes` in decimal units with two decimals: "1.24 GB" (GB = 10^9 bytes,
/// as the ZeRO paper counts).
std::string formatBytes(int64_t bytes);
} // namespace shardc

#endif // SHARDC_SUPPORT_BYTES_H
