// Tile shapes and CuTe building blocks of the sm80 forward kernel, per head dim.
// The tile table is tile_config() below; everything else derives from it.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

namespace flashattn::sm80 {

using namespace cute;

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
constexpr TileConfig tile_config(int head_dim, bool mods = false) {
  return head_dim <= 64    ? TileConfig{128, 64, 4, false}
         : head_dim <= 96  ? TileConfig{128, 64, 4, false}
         : head_dim <= 128 ? TileConfig{128, mods ? 32 : 64, 4, true}
                           : TileConfig{128, 64, 8, false};
}

// The tile arguments default to the table; bench/gpu/tile_sweep.cu overrides them.
template <int kHeadDim_, typename Element_, int kBlockM_ = tile_config(kHeadDim_).block_m,
          int kBlockN_ = tile_config(kHeadDim_).block_n, int kNWarps_ = tile_config(kHeadDim_).warps,
          bool kSkipUnmovedRescale_ = tile_config(kHeadDim_).skip_rescale>
struct FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;
  static constexpr bool kSkipUnmovedRescale = kSkipUnmovedRescale_;

  using MmaAtom = std::conditional_t<std::is_same_v<Element, cutlass::half_t>,
                                     MMA_Atom<SM80_16x8x16_F32F16F16F32_TN>,
                                     MMA_Atom<SM80_16x8x16_F32BF16BF16F32_TN>>;
  // Warps split the query rows; each warp owns 16 x kNWarps-strided rows.
  using TiledMma = TiledMMA<MmaAtom, Layout<Shape<Int<kNWarps>, _1, _1>>,
                            Tile<Int<16 * kNWarps>, _16, _16>>;

  // Shared memory rows of 64 (or 32) elements, XOR-swizzled so ldmatrix reads
  // eight rows of one column without bank conflicts.
  static constexpr int kBlockKSmem = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzle = kBlockKSmem == 32 ? 2 : 3;
  using SmemLayoutAtom = decltype(composition(
      Swizzle<kSwizzle, 3, 3>{}, Layout<Shape<_8, Int<kBlockKSmem>>, Stride<Int<kBlockKSmem>, _1>>{}));
  using SmemLayoutQ = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  // V seen as (head dim, keys) for the P V product, read with ldmatrix.trans.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, GenRowMajor{})));
  using SmemLayoutVtNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutVt{}));
  using SmemLayoutO = SmemLayoutQ;

  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = Copy_Atom<SM75_U16x8_LDSM_T, Element>;
  using SmemCopyAtomO = Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<128>, Element>;

  // Global memory: 16-byte accesses, kGmemThreadsPerRow threads per smem row.
  static constexpr int kGmemElemsPerLoad = 16 / sizeof(Element);
  static constexpr int kGmemThreadsPerRow = kBlockKSmem / kGmemElemsPerLoad;
  using GmemLayoutAtom = Layout<Shape<Int<kNThreads / kGmemThreadsPerRow>, Int<kGmemThreadsPerRow>>,
                                Stride<Int<kGmemThreadsPerRow>, _1>>;
  using GmemTiledCopyQKV = decltype(make_tiled_copy(
      Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{}, GmemLayoutAtom{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));
  using GmemTiledCopyO = decltype(make_tiled_copy(
      Copy_Atom<UniversalCopy<cute::uint128_t>, Element>{}, GmemLayoutAtom{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));

  static constexpr int kSmemBytes = (kBlockM + 2 * kBlockN) * kHeadDim * sizeof(Element);
};

}  // namespace flashattn::sm80
