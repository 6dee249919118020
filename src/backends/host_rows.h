// Moving rows of fp32/fp16/bf16 tensors in host memory to and from float or
// double working buffers. Used by the CPU backends and the reference.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "flashattn/numeric.h"
#include "flashattn/types.h"

namespace flashattn::detail {

// Compile-time element types of the CPU backends: storage type and conversions.
struct F32 {
  using storage = float;
  static float to_float(float x) { return x; }
  static float from_float(float x) { return x; }
};
struct F16 {
  using storage = uint16_t;
  static float to_float(uint16_t x) { return fp16_to_float(x); }
  static uint16_t from_float(float x) { return float_to_fp16(x); }
};
struct BF16 {
  using storage = uint16_t;
  static float to_float(uint16_t x) { return bf16_to_float(x); }
  static uint16_t from_float(float x) { return float_to_bf16(x); }
};

// Non-finite test on the stored bits: all exponent bits set.
template <typename Elem>
inline bool finite_bits(typename Elem::storage x) {
  if constexpr (sizeof(x) == 4) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return (u & 0x7F800000u) != 0x7F800000u;
  } else if constexpr (std::is_same_v<Elem, BF16>) {
    return (x & 0x7F80u) != 0x7F80u;
  } else {
    return (x & 0x7C00u) != 0x7C00u;  // fp16
  }
}

// Calls f(Elem{}) with the element type of `t`.
template <typename F>
decltype(auto) with_elem(DType t, F&& f) {
  switch (t) {
    case DType::f16: return f(F16{});
    case DType::bf16: return f(BF16{});
    default: return f(F32{});
  }
}

template <typename Elem, typename Dst>
inline void load_row(const void* base, int64_t offset, int64_t n, Dst* dst) {
  const auto* src = static_cast<const typename Elem::storage*>(base) + offset;
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(Elem::to_float(src[i]));
}

template <typename Elem, typename Src>
inline void store_row(void* base, int64_t offset, int64_t n, const Src* src) {
  auto* dst = static_cast<typename Elem::storage*>(base) + offset;
  for (int64_t i = 0; i < n; ++i) dst[i] = Elem::from_float(static_cast<float>(src[i]));
}

// Rounds a float64 to what the storage type holds, then back (for fp32 this
// rounds to float; the reference keeps double inputs exact otherwise).
template <typename Elem>
inline double load_elem(const void* base, int64_t offset) {
  return static_cast<double>(Elem::to_float(static_cast<const typename Elem::storage*>(base)[offset]));
}

}  // namespace flashattn::detail
