// The Hopper backward's fp32 dQ accumulator: column order, and the staging
// stores that feed its TMA reduce-add.
//
// Why the columns are permuted. The dQ product's C fragment (wgmma: thread t of
// warp w holds rows 16w + t/4 and + 8, column pairs 2(t%4) + 8j) is staged with
// float2 stores into the reduce-add's 128-byte-swizzled tile (atoms of 8 rows x
// 32 floats; the swizzle XORs a row's 16-byte chunk index with row % 8). A
// 64-bit store runs as two half warps. In column order, half warp 0 (rows 0-3)
// writes two adjacent chunks, 2j' and 2j' + 1, of each of its 4 rows, and
// XOR with rows 0-3 keeps those 8 chunks within 4 chunk slots: every bank is
// hit twice, 4 wavefronts per store where 2 would do (ncu source counters,
// session 20: the kernel's only excess shared wavefronts; 9% of all of them at
// hd128, 15% at hd256).
// So column x of each 32-float group of an accumulator row is kept at
// dq_acc_col(x): x's bits [x4 x3 x2 x1 x0] as [x2 x4 x3 x1 x0]. The half warp's
// two chunks then differ in chunk bit 2 (x2, from t%4), which rows 0-3 leave
// alone: 8 distinct chunks, every bank once. The TMA adds the tile as it is;
// detail::dq_convert_kernel reads the columns back in order (DqPermCols). Used where
// BwdTraits::kDqColPerm: the by-keys path (hd64, hd96, hd128); by product (hd192,
// hd256) the same stores measured slower and keep the plain order.
#pragma once

#include <cstdint>

#include <cute/config.hpp>

namespace flashattn::sm90 {

// Accumulator column of dQ column x. kBits = 3 (128-byte rows, 32 floats):
// x's bits [x4 x3 x2] as [x2 x4 x3]; kBits = 2 (64-byte rows, 16 floats, hd96):
// [x3 x2] as [x2 x3]. Either way the half warp's two chunks of a row (x2,
// from t%4) move to the chunk bit that its rows' swizzle leaves alone.
template <int kBits = 3>
CUTE_HOST_DEVICE constexpr int dq_acc_col(int x) {
  if constexpr (kBits == 3) return (x & ~31) | ((x & 4) << 2) | ((x & 24) >> 1) | (x & 3);
  else return (x & ~15) | ((x & 4) << 1) | ((x & 8) >> 1) | (x & 3);
}
// Where columns c + 4..c + 7 sit, from dq_acc_col(c) (c % 8 == 0).
template <int kBits = 3>
constexpr int kDqAccHalf = kBits == 3 ? 16 : 8;

// The same on byte offsets of fp32 elements (kBits 3: bits 4 -> 6, 5-6 -> 4-5;
// kBits 2: bits 4 <-> 5).
template <int kBits = 3>
CUTE_HOST_DEVICE constexpr uint32_t dq_perm_bytes(uint32_t b) {
  if constexpr (kBits == 3) return (b & ~0x70u) | ((b & 0x10u) << 2) | ((b & 0x60u) >> 1);
  else return (b & ~0x30u) | ((b & 0x10u) << 1) | ((b & 0x20u) >> 1);
}

// The 128-byte swizzle on byte offsets within 1024-byte-aligned tiles (kBits =
// 2: the 64-byte one).
template <int kBits = 3>
CUTE_HOST_DEVICE constexpr uint32_t swizzle_bytes(uint32_t b) {
  return b ^ ((b >> 3) & (((1u << kBits) - 1u) << 4));
}

// Staging store addresses, permuted. Both maps are linear over XOR, and a
// thread's first element's offset (base) shares no bit with any element's
// offset from it (host check: tools/host_checks/sm90_bwd_dq_perm.cu; at hd96
// only within the group's tile, whose start the kernel adds to the pointer), so
//   swizzle(perm(base + d)) = swizzle(perm(base)) ^ swizzle(perm(d)):
// one per-thread value, then one XOR with a constant per store.
template <int kBits = 3>
CUTE_HOST_DEVICE constexpr uint32_t dq_stage_base(uint32_t base_elems) {
  return swizzle_bytes<kBits>(dq_perm_bytes<kBits>(base_elems * 4u));
}
template <int kBits = 3, typename Offsets>
CUTE_HOST_DEVICE uint32_t dq_stage_offset(const Offsets& off, uint32_t stage_base, int e) {
  return stage_base ^ swizzle_bytes<kBits>(dq_perm_bytes<kBits>(uint32_t(off(e) - off(0)) * 4u));
}

// The permuted order for detail::dq_convert_kernel: columns c..c+3 (c % 8 ==
// 0) at dq_acc_col(c), c+4..c+7 kDqAccHalf floats further on.
template <int kBits>
struct DqPermCols {
  CUTE_HOST_DEVICE static int at(int c) { return dq_acc_col<kBits>(c); }
  static constexpr int kHalf = kDqAccHalf<kBits>;
};

}  // namespace flashattn::sm90
