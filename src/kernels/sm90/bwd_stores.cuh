// Shared-memory stores of the Hopper backward's register tiles: the byte offsets
// of a thread's elements in a swizzled tile (formed at each store from an opaque
// base), 32-bit pair stores, and stmatrix rows.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>
#include <cutlass/array.h>

#include "kernels/sm90/dq_layout.h"

namespace flashattn::sm90 {

// Byte offset of element e of a thread's partition of a 128-byte-swizzled tile,
// from the same partition of the tile's unswizzled layout over a counting
// iterator (element offsets): the Swizzle<3,4,3> of the GMMA atoms on byte
// addresses (kBits = 2: the 64-byte swizzle, Swizzle<2,4,3>), valid because the
// tiles start 1024-byte aligned. Stores through
// smem_raw + offset stay in the shared window (STS, 32-bit addresses) where a
// swizzled pointer's address goes through 64-bit generic arithmetic (ST.E).
// base is off(0), passed through an empty asm inside the loop so that the
// offsets are formed at each store (base + a constant, the swizzle) instead of
// being hoisted out of the loop, 64 registers' worth.
template <typename T, int kBits = 3, typename Offsets>
CUTE_HOST_DEVICE uint32_t swizzled_byte_offset(const Offsets& off, uint32_t base, int e) {
  return swizzle_bytes<kBits>((base + uint32_t(off(e) - off(0))) * uint32_t(sizeof(T)));
}
__device__ __forceinline__ uint32_t opaque(uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

// A thread's 16-bit accumulator values to a 128-byte-swizzled tile, one 32-bit store
// per adjacent pair, at the element offsets `off` (the values' partition of the tile's
// unswizzled layout), from an opaque base as above.
template <typename Element, typename Offsets, typename Regs>
__device__ __forceinline__ void store_pairs(char* tile, const Offsets& off, const Regs& r) {
  const uint32_t base = opaque(uint32_t(off(0)));
  CUTE_UNROLL
  for (int e = 0; e < int(cute::size(r)); e += 2) {
    cutlass::Array<Element, 2> pair;
    pair[0] = r(e);
    pair[1] = r(e + 1);
    *reinterpret_cast<cutlass::Array<Element, 2>*>(tile + swizzled_byte_offset<Element>(off, base, e)) = pair;
  }
}

// stmatrix.x4 (four 8 x 8 matrices of 16-bit pairs) to a shared-memory address
// the caller forms, where CuTe's atom takes a reference into a swizzled tensor.
__device__ __forceinline__ void stsm_x4(uint32_t smem_addr, const uint32_t (&w)[4]) {
  asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr), "r"(w[0]),
               "r"(w[1]), "r"(w[2]), "r"(w[3]));
}

// A thread's 16-bit values ((8, atom), 1, 1: eight per stmatrix row) to a 128-byte-
// swizzled tile at smem_addr, one stmatrix.x4 per atom, at each atom's row start
// `rows` (element offsets of the unswizzled layout), from an opaque base as above.
template <typename Element, typename Rows, typename Regs>
__device__ __forceinline__ void store_stsm_rows(uint32_t smem_addr, const Rows& rows, const Regs& r) {
  const uint32_t base = opaque(uint32_t(rows(0)));
  CUTE_UNROLL
  for (int a = 0; a < int(cute::size(rows)); ++a) {
    uint32_t w[4];
    CUTE_UNROLL
    for (int k = 0; k < 4; ++k) {
      cutlass::Array<Element, 2> pair;
      pair[0] = r(cute::make_coord(2 * k, a), 0, 0);
      pair[1] = r(cute::make_coord(2 * k + 1, a), 0, 0);
      w[k] = reinterpret_cast<const uint32_t&>(pair);
    }
    stsm_x4(smem_addr + swizzled_byte_offset<Element>(rows, base, a), w);
  }
}

}  // namespace flashattn::sm90
