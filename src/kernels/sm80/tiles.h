// The sm80 kernels' tile tables: tile shapes per head dim and shared-memory
// tier (smem_tier.h), as plain constants that host code (dispatch) reads too;
// the kernels' CuTe types derive from them (traits.h, bwd_traits.h).
#pragma once

#include "kernels/sm80/smem_tier.h"

namespace flashattn::sm80 {

// Query rows x keys per thread block, and warps, for each instantiated head dim.
// Measured on the H200, bf16, plain forward, N = 512 / 2k / 16k
// (bench/gpu/tile_sweep.cu, bench/results/2026-11-29_h200_sm80_tile_sweep.log;
// session 7 with branch-free copies: 2026-11-29_h200_ab_s7_sm80_fwd_v4.txt):
//   64:  128x64,  4 warps - 280 TFLOP/s at 16k; 128x128 (FlashAttention-2's) spills 216 B (251).
//   96:  128x64,  4 warps - not swept; between its neighbours.
//   128: 128x64,  4 warps - 335 at 16k, 321 at 2k; 128x32 324 / 308. 128x64 spills
//        ~170 B (as FlashAttention-2's own 128x64 does) but pays the O rescale, the
//        softmax bookkeeping and the Q fragment reloads once per 64 keys.
//   192: 128x64,  8 warps - not swept; as 256.
//   256: 128x64,  8 warps - 309 at 16k; 64x64/4 warps (2 CTAs per SM) 268 (session 2).
// With 4 warps each warp owns 32 query rows: O (32 x D fp32) and S (32 x block_n)
// share 255 registers, so wider key tiles spill.
// skip_rescale: leave O alone on key tiles that raise no row max of a warp
// (detail::rescale_rows). At hd128 (O has 2-4x the registers of S) it measured
// +5% (293 -> 307 at 16k with 128 x 32, 277 -> 287 causal), at hd64 and hd256 -3%.
struct TileConfig {
  int block_m, block_n, warps;
  bool skip_rescale;
};
// mods: the variant with score modifiers (softcap, ALiBi, dropout), whose extra
// live state made 128 x 64 at hd128 spill 776 B; it keeps 128 x 32 there.
// tier (smem_tier.h): every standard entry but hd256's (128 KiB) fits the compact
// tier's 99 KiB (hd192's is 96 KiB); there hd256 takes 64 x 64 with 4 warps
// (96 KiB), the shape FlashAttention-2 runs on those GPUs. The large tier's
// extra memory buys the forward nothing measured: it runs the standard tiles.
constexpr TileConfig tile_config(int head_dim, bool mods = false, SmemTier tier = SmemTier::standard) {
  return head_dim <= 64    ? TileConfig{128, 64, 4, false}
         : head_dim <= 96  ? TileConfig{128, 64, 4, false}
         : head_dim <= 128 ? TileConfig{128, mods ? 32 : 64, 4, true}
         : head_dim <= 192 || tier != SmemTier::compact ? TileConfig{128, 64, 8, false}
                                                        : TileConfig{64, 64, 4, false};
}
constexpr bool operator==(const TileConfig& a, const TileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.warps == b.warps && a.skip_rescale == b.skip_rescale;
}
// Whether a tier has forward kernels of its own (an instantiation file each:
// scripts/gen_instantiations.py); otherwise it runs the standard ones.
constexpr bool fwd_tier_differs(int head_dim, SmemTier tier) {
  return !(tile_config(head_dim, false, tier) == tile_config(head_dim, false)) ||
         !(tile_config(head_dim, true, tier) == tile_config(head_dim, true));
}

// The dK/dV kernel's tiles per head dim and shared-memory tier (smem_tier.h):
// query rows per step, keys per block, Q / dO stages, warps. Shared memory is
// (2 keys + 2 stages x rows) x D x 2 B for K, V, Q and dO, plus P^T and dS^T
// (2 x keys x rows x 2 B) and the stages' LSE and d.
//   standard: 128 rows at hd64 (the registers allow it, and it halves the K/V
//     reads per product), 64 above; 128 keys up to hd128 (bigger warp tiles;
//     at hd192/256 the dK and dV accumulators of 128 keys would not fit the
//     registers); two stages (the next tile loads during this one's products)
//     up to hd192, one at hd256, whose two (209 KiB) are over 163 KiB. hd64
//     takes 162 KiB, hd128 161 KiB.
//   large: hd256 with two stages (209 KiB), as FlashAttention-2 runs it on
//     H100; the rest as standard.
//   compact (99 KiB): hd64 64 x 128, two stages (97 KiB); hd96 64 x 64, two
//     (89 KiB); hd128 64 x 64, one (80.5 KiB; two would be 113); hd192 32 x 64,
//     one (80 KiB); hd256 32 x 32 with 4 warps, one (68 KiB: 32 x 64 would be
//     104, and 32 x 32 leaves too little work for 8 warps of 16 x 16 products).
struct BwdTileConfig {
  int block_m, block_n, stages_q, warps;
};
constexpr bool operator==(const BwdTileConfig& a, const BwdTileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.stages_q == b.stages_q && a.warps == b.warps;
}
constexpr BwdTileConfig bwd_tile_config(int head_dim, SmemTier tier = SmemTier::standard) {
  if (tier == SmemTier::compact)
    return head_dim <= 64    ? BwdTileConfig{64, 128, 2, 8}
           : head_dim <= 96  ? BwdTileConfig{64, 64, 2, 8}
           : head_dim <= 128 ? BwdTileConfig{64, 64, 1, 8}
           : head_dim <= 192 ? BwdTileConfig{32, 64, 1, 8}
                             : BwdTileConfig{32, 32, 1, 4};
  return BwdTileConfig{head_dim <= 64 ? 128 : 64, head_dim <= 128 ? 128 : 64,
                       head_dim <= 192 || tier == SmemTier::large ? 2 : 1, 8};
}
// Whether a tier has backward kernels of its own (an instantiation file each:
// scripts/gen_instantiations.py); otherwise it runs the standard ones.
constexpr bool bwd_tier_differs(int head_dim, SmemTier tier) {
  return !(bwd_tile_config(head_dim, tier) == bwd_tile_config(head_dim));
}

}  // namespace flashattn::sm80
