// CuTe building blocks of the sm80 forward kernel, per head dim, from the tile
// table (tile_config, tiles.h).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "kernels/sm80/tiles.h"

namespace flashattn::sm80 {

using namespace cute;

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
