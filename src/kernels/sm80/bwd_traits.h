// Tile shapes and CuTe building blocks of the sm80 backward kernels.
//   dK/dV kernel: one block owns kBlockN keys of one kv head and walks the query
//     tiles (kBlockM rows) of every query head of its group: 8 warps. Q and dO
//     tiles are double-buffered; outside deterministic mode it also adds
//     dS K into the fp32 dQ accumulator with atomics, kDqChunk columns at a time.
//     mma.sync kernels are bound by shared-memory reads (ldmatrix) as much as by
//     the tensor cores: a warp tile of a x b outputs reads (a + b) * 32 bytes per
//     k-slice of 16 for a * b / 128 MMAs, so every product is laid out for warp
//     tiles of at least 32 x 32 (256 B per MMA; 16 x 32 costs 384).
//   dQ kernel: one block owns kBlockM query rows and walks the key tiles: 4 warps,
//     each owning 16 rows, so dS stays in registers as the A operand of dS K.
#pragma once

#include "kernels/sm80/traits.h"

namespace flashattn::sm80 {

template <int kHeadDim_, typename Element_>
struct BwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  // Query rows per step: 128 at hd64 (the registers allow it, and it halves the K/V
  // reads per product), 64 above.
  static constexpr int kBlockM = kHeadDim <= 64 ? 128 : 64;
  // Keys per dK/dV block: 128 up to hd128 (bigger warp tiles); at hd192/256 the
  // dK and dV accumulators of 128 keys would not fit the registers.
  static constexpr int kBlockN = kHeadDim <= 128 ? 128 : 64;
  static constexpr int kBlockMdQ = 64;                         // query rows per dQ block
  static constexpr int kBlockNdQ = kHeadDim <= 128 ? 64 : 32;  // keys per dQ step
  static constexpr int kThreadsKV = 256;
  static constexpr int kThreadsQ = 128;

  using MmaAtom = typename FwdTraits<kHeadDim, Element>::MmaAtom;
  // dK/dV kernel, 8 warps. S^T, dP^T (kBlockN x kBlockM): 4 x 2 warps, 32 x 32 each
  // at kBlockN = 128 (16 x 32 at 64).
  using TiledMmaSdP = TiledMMA<MmaAtom, Layout<Shape<_4, _2, _1>>, Tile<_64, _32, _16>>;
  // dK, dV (kBlockN x D): 32 keys x D/2 per warp at kBlockN = 128, 32 x D/4 at 64.
  using TiledMmadKV = std::conditional_t<
      kBlockN == 128, TiledMMA<MmaAtom, Layout<Shape<_4, _2, _1>>, Tile<_64, _32, _16>>,
      TiledMMA<MmaAtom, Layout<Shape<_2, _4, _1>>, Tile<_32, _64, _16>>>;
  // dQ columns per atomic pass: 128 at most (registers), a divisor of the head dim.
  static constexpr int kDqChunk = kHeadDim % 128 == 0 ? 128 : kHeadDim % 64 == 0 ? 64 : kHeadDim;
  // dQ chunk (kBlockM x kDqChunk): kBlockM/32 x (8 / that) warps of 32 x 32 each
  // (4 x 2 warps of 16 x 48 at hd96, whose 96 columns do not split in four).
  static constexpr int kWarpsMdQ = kBlockM / 32, kWarpsNdQ = 8 / kWarpsMdQ;
  using TiledMmadQ = std::conditional_t<
      kDqChunk % (16 * kWarpsNdQ) == 0,
      TiledMMA<MmaAtom, Layout<Shape<Int<kWarpsMdQ>, Int<kWarpsNdQ>, _1>>,
               Tile<Int<16 * kWarpsMdQ>, Int<16 * kWarpsNdQ>, _16>>,
      TiledMMA<MmaAtom, Layout<Shape<_4, _2, _1>>, Tile<_64, _32, _16>>>;
  // dQ kernel: 4 warps stacked along the query rows.
  using TiledMmaQ = TiledMMA<MmaAtom, Layout<Shape<_4, _1, _1>>, Tile<_64, _16, _16>>;

  static constexpr int kBlockKSmem = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzle = kBlockKSmem == 32 ? 2 : 3;
  using SmemLayoutAtom = decltype(composition(
      Swizzle<kSwizzle, 3, 3>{}, Layout<Shape<_8, Int<kBlockKSmem>>, Stride<Int<kBlockKSmem>, _1>>{}));
  template <int kRows>
  using SmemRows = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kRows>, Int<kHeadDim>>{}));
  // A (rows x D) tile seen as (D x rows), read with ldmatrix.trans.
  template <int kRows>
  using SmemRowsT = decltype(composition(SmemRows<kRows>{},
                                         make_layout(Shape<Int<kHeadDim>, Int<kRows>>{}, GenRowMajor{})));
  template <int kRows>
  using SmemRowsTNoSwizzle = decltype(get_nonswizzle_portion(SmemRowsT<kRows>{}));
  // P^T and dS^T (kBlockN x kBlockM) of the dK/dV kernel.
  using SmemLayoutPdS = decltype(tile_to_shape(
      composition(Swizzle<3, 3, 3>{}, Layout<Shape<_8, _64>, Stride<_64, _1>>{}),
      Shape<Int<kBlockN>, Int<kBlockM>>{}));
  // dS (kBlockM x kBlockN) read from the dS^T tile, the A operand of dQ = dS K.
  using SmemLayoutdSt = decltype(composition(
      SmemLayoutPdS{}, make_layout(Shape<Int<kBlockM>, Int<kBlockN>>{}, GenRowMajor{})));
  using SmemLayoutdStNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutdSt{}));

  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = Copy_Atom<SM75_U16x8_LDSM_T, Element>;
  using SmemCopyAtomStore = Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<32>, Element>;

  static constexpr int kGmemElemsPerLoad = 16 / sizeof(Element);
  static constexpr int kGmemThreadsPerRow = kBlockKSmem / kGmemElemsPerLoad;
  template <int kThreads>
  using GmemLayoutAtom = Layout<Shape<Int<kThreads / kGmemThreadsPerRow>, Int<kGmemThreadsPerRow>>,
                                Stride<Int<kGmemThreadsPerRow>, _1>>;
  template <int kThreads>
  using GmemCopyAsync = decltype(make_tiled_copy(
      Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{}, GmemLayoutAtom<kThreads>{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));
  template <int kThreads>
  using GmemCopyStore = decltype(make_tiled_copy(
      Copy_Atom<UniversalCopy<cute::uint128_t>, Element>{}, GmemLayoutAtom<kThreads>{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));

  // Q/dO stages of the dK/dV kernel: two (the next tile loads during this one's
  // products) while that fits the 163 KiB an sm80 block may have; one at 256.
  static constexpr int kStagesQ = kHeadDim <= 192 ? 2 : 1;
  // dK/dV kernel: K, V, the Q and dO stages, P^T and dS^T, the stages' LSE and d.
  static constexpr int kSmemKV = (2 * kBlockN + 2 * kStagesQ * kBlockM) * kHeadDim * int(sizeof(Element)) +
                                 2 * kBlockN * kBlockM * int(sizeof(Element)) + 2 * kStagesQ * kBlockM * 4;
  // dQ kernel: Q, dO, K, V tiles.
  static constexpr int kSmemQ = (2 * kBlockMdQ + 2 * kBlockNdQ) * kHeadDim * int(sizeof(Element));
};

}  // namespace flashattn::sm80
