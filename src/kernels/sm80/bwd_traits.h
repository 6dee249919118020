// Tile shapes and CuTe building blocks of the sm80 backward kernels.
//   dK/dV kernel: one block owns kBlockN keys of one kv head and walks the query
//     tiles (kBlockM rows) of every query head of its group: 8 warps (4 for the
//     smallest tiles). Q and dO tiles are double-buffered where shared memory
//     allows; outside deterministic mode it also adds
//     dS K into the fp32 dQ accumulator with atomics, kDqChunk columns at a time.
//     mma.sync kernels are bound by shared-memory reads (ldmatrix) as much as by
//     the tensor cores: a warp tile of a x b outputs reads (a + b) * 32 bytes per
//     k-slice of 16 for a * b / 128 MMAs, so every product is laid out for warp
//     tiles of at least 32 x 32 (256 B per MMA; 16 x 32 costs 384).
//   dQ kernel: one block owns kBlockM query rows and walks the key tiles: 4 warps,
//     each owning 16 rows, so dS stays in registers as the A operand of dS K.
#pragma once

#include "kernels/sm80/bwd_tiles.h"
#include "kernels/sm80/traits.h"

namespace flashattn::sm80 {

template <int kHeadDim_, typename Element_, SmemTier kTier_ = SmemTier::standard>
struct BwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr SmemTier kTier = kTier_;
  static constexpr BwdTileConfig kConfig = bwd_tiles(kHeadDim_, kTier_);
  static constexpr int kBlockM = kConfig.block_m;
  static constexpr int kBlockN = kConfig.block_n;
  static constexpr int kBlockMdQ = 64;                         // query rows per dQ block
  static constexpr int kBlockNdQ = kHeadDim <= 128 ? 64 : 32;  // keys per dQ step
  static constexpr int kWarpsKV = kConfig.warps;
  static constexpr int kThreadsKV = kWarpsKV * 32;
  static constexpr int kThreadsQ = 128;
  static_assert(kWarpsKV == 8 || kWarpsKV == 4, "the dK/dV kernel's warp grids are written for 8 or 4 warps");

  using MmaAtom = typename FwdTraits<kHeadDim, Element>::MmaAtom;
  // A grid of wm x wn warps, each taking 16 x 16 of the output per MMA pair.
  template <int wm, int wn>
  using WarpGrid = TiledMMA<MmaAtom, Layout<Shape<Int<wm>, Int<wn>, _1>>, Tile<Int<16 * wm>, Int<16 * wn>, _16>>;
  // dK/dV kernel. S^T, dP^T (kBlockN x kBlockM): 4 x 2 warps (8 warps; 32 x 32
  // each at 128 x 64, 16 x 32 at 64 x 64), 2 x 2 (4 warps).
  static constexpr int kWarpsMSdP = kWarpsKV == 8 ? 4 : 2;
  using TiledMmaSdP = WarpGrid<kWarpsMSdP, kWarpsKV / kWarpsMSdP>;
  // dK, dV (kBlockN x D): 32 keys x D/2 per warp at kBlockN = 128; at 64 keys
  // 32 x D/4 (2 x 4 warps), or 16 x D/2 (4 x 2) where D/4 is no multiple of 16.
  static constexpr int kWarpsMdKV = kWarpsKV == 4 ? 2 : kBlockN == 128 || kHeadDim % 64 != 0 ? 4 : 2;
  using TiledMmadKV = WarpGrid<kWarpsMdKV, kWarpsKV / kWarpsMdKV>;
  // dQ columns per atomic pass: 128 at most (registers), a divisor of the head dim.
  static constexpr int kDqChunk = kHeadDim % 128 == 0 ? 128 : kHeadDim % 64 == 0 ? 64 : kHeadDim;
  // dQ chunk (kBlockM x kDqChunk): kBlockM/32 warps along the rows (32 x 32
  // warp tiles at 8 warps); where the chunk does not split into that many
  // 16-wide columns (hd96, hd192 at 32 rows), twice the warps along the rows.
  static constexpr int kWarpsMdQ0 = kBlockM / 32 > kWarpsKV ? kWarpsKV : kBlockM / 32;
  static constexpr bool kDqGridFits = kDqChunk % (16 * (kWarpsKV / kWarpsMdQ0)) == 0;
  static constexpr int kWarpsMdQ = kDqGridFits ? kWarpsMdQ0 : 2 * kWarpsMdQ0;
  using TiledMmadQ = WarpGrid<kWarpsMdQ, kWarpsKV / kWarpsMdQ>;
  static_assert(kBlockN % (16 * kWarpsMSdP) == 0 && kBlockM % (16 * (kWarpsKV / kWarpsMSdP)) == 0 &&
                    kBlockN % (16 * kWarpsMdKV) == 0 && kHeadDim % (16 * (kWarpsKV / kWarpsMdKV)) == 0 &&
                    kBlockM % (16 * kWarpsMdQ) == 0 && kDqChunk % (16 * (kWarpsKV / kWarpsMdQ)) == 0,
                "every product's warp grid divides its tile");
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
  // P^T and dS^T (kBlockN x kBlockM) of the dK/dV kernel: rows of 64 query
  // columns, or of 32 (with the narrower swizzle) for 32-row steps.
  static constexpr int kBlockKPdS = kBlockM % 64 == 0 ? 64 : 32;
  using SmemLayoutPdS = decltype(tile_to_shape(
      composition(Swizzle<kBlockKPdS == 64 ? 3 : 2, 3, 3>{},
                  Layout<Shape<_8, Int<kBlockKPdS>>, Stride<Int<kBlockKPdS>, _1>>{}),
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

  // P formed before the dP^T product (and, at 128-row steps, dQ's atomics
  // spread over dK's product): the 128-key blocks without score modifiers
  // (hd64-hd128), +9-14% at hd64 and +1-3% at hd128; the 64-key blocks of
  // hd192 / hd256 lost 0.5-1.5% with it (kernel notes, sm80 backward v18).
  // hd256 on the large tier gains 0.5-2.2% since its dK product moved between
  // the dQ chunks, which freed the registers (sm80 backward v20, v21).
  static constexpr bool early_p(bool mods) {
    return !mods && (kBlockN == 128 || (kHeadDim == 256 && kTier == SmemTier::large));
  }
  // Where those kernels keep a step's LSE (log2 units) and d of query column c
  // in shared memory. A thread's S^T fragment holds the columns
  // c = 8 wn r + 8 w + 2 q + e (w: its warp's column of wn, q: lane % 4,
  // ni = 2 r + e); slot (4 w + q) kColsPerThread + ni puts them in
  // kColsPerThread contiguous floats, read as float4s: at hd64 8 loads a step
  // instead of 32 scalar ones (tools/host_checks/sm80_bwd_lse_slots.cu).
  static constexpr int kWarpsNSdP = kWarpsKV / kWarpsMSdP;
  static constexpr int kColsPerThread = kBlockM / (4 * kWarpsNSdP);
  static_assert(kColsPerThread % 4 == 0, "whole float4s of LSE / d per thread");
  static constexpr int lse_slot(int c) {
    return (4 * (c / 8 % kWarpsNSdP) + c / 2 % 4) * kColsPerThread + 2 * (c / (8 * kWarpsNSdP)) + c % 2;
  }

  static constexpr int kStagesQ = kConfig.stages_q;  // Q/dO stages of the dK/dV kernel
  // The dK/dV step's order. With 128-row steps (hd64) the next stage's loads are
  // issued after the S^T / dP^T products, and dQ with its atomics runs before dK:
  // +2-4% there; at 64 rows (hd128, hd256) that measured -2 to +0.5%
  // (bench/results/2026-12-01_h200_ab_s15_sm80_bwd_order.txt), so those issue
  // the next stage at the step's start and run dK first.
  static constexpr bool kLateLoad = kBlockM == 128 && kStagesQ == 2;
  // dK/dV kernel: K, V, the Q and dO stages, P^T and dS^T, the stages' LSE and d.
  static constexpr int kSmemKV = (2 * kBlockN + 2 * kStagesQ * kBlockM) * kHeadDim * int(sizeof(Element)) +
                                 2 * kBlockN * kBlockM * int(sizeof(Element)) + 2 * kStagesQ * kBlockM * 4;
  // dQ kernel: Q, dO, K, V tiles.
  static constexpr int kSmemQ = (2 * kBlockMdQ + 2 * kBlockNdQ) * kHeadDim * int(sizeof(Element));
  static_assert(kSmemKV <= smem_budget(kTier) && kSmemQ <= smem_budget(kTier), "tiles over the tier's shared memory");
};

}  // namespace flashattn::sm80
