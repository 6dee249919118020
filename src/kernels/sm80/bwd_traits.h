// Tile shapes and CuTe building blocks of the sm80 backward kernels.
//   dK/dV kernel: one block owns kBlockN keys of one kv head and walks the query
//     tiles (kBlockM rows) of every query head of its group: 8 warps.
//   dQ kernel: one block owns kBlockM query rows and walks the key tiles: 4 warps,
//     each owning 16 rows, so dS stays in registers as the A operand of dS K.
#pragma once

#include "kernels/sm80/traits.h"

namespace flashattn::sm80 {

template <int kHeadDim_, typename Element_>
struct BwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 64;                       // query rows per step
  static constexpr int kBlockN = 64;                       // keys per dK/dV block
  static constexpr int kBlockNdQ = kHeadDim <= 128 ? 64 : 32;  // keys per dQ step
  static constexpr int kThreadsKV = 256;
  static constexpr int kThreadsQ = 128;

  using MmaAtom = typename FwdTraits<kHeadDim, Element>::MmaAtom;
  // dK/dV kernel: 4 x 2 warps for S^T, dP^T (kBlockN x kBlockM) and dK, dV (kBlockN x D).
  using TiledMmaKV = TiledMMA<MmaAtom, Layout<Shape<_4, _2, _1>>, Tile<_64, _32, _16>>;
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

  // dK/dV kernel: K, V, Q, dO tiles, P^T and dS^T, and the LSE / d of the query tile.
  static constexpr int kSmemKV = (2 * kBlockN + 2 * kBlockM) * kHeadDim * int(sizeof(Element)) +
                                 2 * kBlockN * kBlockM * int(sizeof(Element)) + 2 * kBlockM * 4;
  // dQ kernel: Q, dO, K, V tiles.
  static constexpr int kSmemQ = (2 * kBlockM + 2 * kBlockNdQ) * kHeadDim * int(sizeof(Element));
};

}  // namespace flashattn::sm80
