// Tile shapes and CuTe building blocks of the Hopper (sm90a) backward kernel.
// One thread block owns kBlockN = 128 keys of one kv head: K and V stay in
// shared memory while a producer warp streams kBlockM-row tiles of Q and dO (TMA)
// and their LSE and d_i into a ring of kStages stages. Two consumer warp groups
// each own 64 of the keys and compute, per query tile:
//   S^T = K Q^T, dP^T = V dO^T        (wgmma, both operands in shared memory)
//   P^T, dS^T                          (registers)
//   dV += P^T dO, dK += dS^T Q         (wgmma, P^T / dS^T as register A operands)
//   dQ = dS K                          (wgmma from shared memory; dS^T is stored there)
// and add dQ into an fp32 accumulator in global memory with a TMA reduce-add.
// Keys as the M dimension is what lets dV and dK take P^T and dS^T straight
// from the registers that computed them.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/numeric_types.h>

namespace flashattn::sm90 {

using namespace cute;

// The tile table: query rows per step, per head dim (keys per block are 128,
// 64 per consumer group, at every head dim).
//   hd64: 128 rows. Per step each group computes S^T and dP^T as 64 x 128 (wgmma
//     N = 128) and dQ as 128 x 64 (two 64-row atoms): twice the tensor-core work
//     per fixed step cost (barriers, waits, the dQ reduce-add) of 64 rows, where
//     64 rows ran at 0.8-0.9x FlashAttention-2 (kernel_notes, sm90 backward v3:
//     prepared, not yet run). Registers: S^T and dP^T (64 + 64) in flight beside
//     dK and dV (32 + 32); the kernel forms dS before the 16-bit P (kDsFirst).
//   hd128: 64 rows (128 would need 128 registers for S^T and dP^T beside 128
//     for dK and dV).
struct BwdTileConfig {
  int block_m;
};
constexpr BwdTileConfig bwd_tile_config(int head_dim) {
  return head_dim <= 64 ? BwdTileConfig{128} : BwdTileConfig{64};
}

template <int kHeadDim_, typename Element_, int kBlockM_ = bwd_tile_config(kHeadDim_).block_m>
struct BwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;  // query rows per step
  static constexpr int kBlockN = 128;       // keys per block, 64 per consumer group
  static_assert(kBlockM == 64 || kBlockM == 128, "query rows per step: one or two 64-row dQ atoms");
  static_assert(kBlockM == 64 || kHeadDim <= 64, "128 query rows per step fit the registers at hd64 only");
  static constexpr int kStages = 2;     // Q / dO ring depth
  static constexpr int kConsumerGroups = 2;
  static constexpr int kConsumerThreads = kConsumerGroups * 128;
  static constexpr int kThreads = kConsumerThreads + 128;
  // dQ = dS K is split between the groups by columns (each needs all of dS, so
  // dS is shared through shared memory, double-buffered) when a column half is a
  // whole 64-wide swizzle atom; at hd64 each group multiplies its own 64 keys
  // instead and both add their partial dQ (twice the reduce traffic, no
  // cross-group barrier).
  static constexpr bool kDqSplitN = kHeadDim >= 128;
  static constexpr int kDqCols = kDqSplitN ? kHeadDim / 2 : kHeadDim;  // dQ columns per group
  static constexpr int kDsStages = kDqSplitN ? 2 : 1;
  // dS formed from the fp32 P before P's 16-bit copy and dV's issue. At 128 rows
  // S^T and dP^T (64 + 64 registers) beside dK and dV leave no room for the
  // 16-bit P while the fp32 P is still live (v2's order spilled 52-72 bytes);
  // at 64 rows (hd128) both orders compile without spills and dV issued first
  // keeps the tensor cores busy while dS is formed.
  static constexpr bool kDsFirst = kBlockM == 128;

  using AtomKeys = Layout<Shape<Int<kConsumerGroups>, _1, _1>>;  // groups stacked along keys
  // S^T and dP^T: (keys, query rows, head dim).
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockN>, Int<kBlockM>, Int<kHeadDim>>>(),
      AtomKeys{}));
  // dV and dK: (keys, head dim, query rows); B = dO / Q read head-dim-major.
  using TiledMmadKV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<Int<kBlockN>, Int<kHeadDim>, Int<kBlockM>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      AtomKeys{}));
  // dQ: (query rows, head dim, keys), A = dS (query-major), B = K (head-dim-major).
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kDqCols>, Int<kDqSplitN ? kBlockN : 64>>,
                           GMMA::Major::MN, GMMA::Major::MN>(),
      Layout<Shape<_1, Int<kDqSplitN ? 2 : 1>, _1>>{}));

  using SmemAtom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  // Q and dO seen as (head dim, rows, stage); K as (head dim, keys).
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  using SmemLayoutKt = decltype(composition(
      SmemLayoutKV{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{})));
  // dS as (query rows, keys, buffer), query rows contiguous (the A operand of dQ);
  // dS^T is the (keys, query rows) view the S^T accumulator writes through. Keys
  // [64g, 64g + 64) of one buffer are contiguous: group g's half.
  using SmemLayoutdS = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                              Shape<Int<kBlockM>, Int<kBlockN>, Int<kDsStages>>{}));
  using SmemLayoutdSt = decltype(composition(
      SmemLayoutdS{}, make_ordered_layout(Shape<Int<kBlockN>, Int<kBlockM>, Int<kDsStages>>{}, Step<_2, _1, _3>{})));
  // fp32 dQ staging for the TMA reduce-add: one (kBlockM, kDqCols) tile per group.
  using SmemLayoutdQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<float>{},
                                              Shape<Int<kBlockM>, Int<kDqCols>>{}));
  // The staging as the dQ product's C operand sees it: split by columns, both
  // groups' tiles side by side, (kBlockM, D) (group g's columns are tile g, as
  // tile_to_shape lays out column blocks of the atom one after another);
  // split by keys, the group's own tile.
  using SmemLayoutdQMma = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<float>{},
                                                 Shape<Int<kBlockM>, Int<kDqSplitN ? kHeadDim : kDqCols>>{}));

  // Global tensors as TMA sees them: (rows, head dim, heads, batch).
  using GmemShape = Shape<int32_t, int32_t, int32_t, int32_t>;
  using GmemStride = Stride<int64_t, _1, int64_t, int64_t>;
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemShape{}, GmemStride{}));
  using GmemTensorAcc = decltype(make_tensor(make_gmem_ptr(static_cast<float*>(nullptr)), GmemShape{}, GmemStride{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutQ{}),
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutKV{},
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));
  using TmadQ = decltype(make_tma_copy(SM90_TMA_REDUCE_ADD{}, GmemTensorAcc{}, SmemLayoutdQ{},
                                       Shape<Int<kBlockM>, Int<kDqCols>>{}, _1{}));

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> k;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> v;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> dout;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutdS>> ds;
    alignas(1024) cute::array_aligned<float, cosize_v<SmemLayoutdQ> * kConsumerGroups> dq;
    float lse_log2[kStages][kBlockM];  // LSE in log2 units, +inf for rows that see nothing
    float row_dot[kStages][kBlockM];
    alignas(16) uint64_t kv_full;
    uint64_t q_full[kStages], do_full[kStages], empty[kStages];
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 232448, "over the 227 KiB of dynamic shared memory of one sm90 block");
  static constexpr uint32_t kTmaBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kTmaBytesKV = kBlockN * kHeadDim * sizeof(Element);
};

}  // namespace flashattn::sm90
