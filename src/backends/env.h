// Size settings from the environment, read once by the backend that owns them.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>

namespace flashattn::detail {

// An environment variable holding a whole number of MiB, in bytes; nullopt when
// unset, empty, not a plain decimal number, or too large to be a size.
inline std::optional<uint64_t> env_mebibytes(const char* name) {
  const char* mb = std::getenv(name);
  if (mb == nullptr || *mb == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(mb, &end, 10);
  if (*end != '\0' || v >= (1ull << 44)) return std::nullopt;
  return uint64_t(v) << 20;
}

}  // namespace flashattn::detail
