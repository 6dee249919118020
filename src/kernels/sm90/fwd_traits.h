// Tile shapes and CuTe building blocks of the Hopper (sm90a) forward kernel.
// One thread block: a producer warp group that streams K and V tiles with TMA
// into a ring of kStages shared-memory stages, and two consumer warp groups, each
// owning 64 of the block's 128 query rows, that run S = Q K^T and O += P V on
// wgmma with the online softmax in between.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/numeric_types.h>

namespace flashattn::sm90 {

using namespace cute;

// Keys per tile and ring depth per head dim (block of 128 query rows). hd256 keeps
// 64 keys: Q (64 KiB) plus two stages of K and V (128 KiB) fill shared memory.
struct TileConfig {
  int block_n, stages;
};
constexpr TileConfig tile_config(int head_dim) {
  return head_dim <= 128 ? TileConfig{128, 2} : TileConfig{64, 2};
}

template <int kHeadDim_, typename Element_>
struct FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = tile_config(kHeadDim).block_n;
  static constexpr int kStages = tile_config(kHeadDim).stages;
  static constexpr int kConsumerGroups = kBlockM / 64;
  static constexpr int kConsumerThreads = kConsumerGroups * 128;
  static constexpr int kThreads = kConsumerThreads + 128;  // + the producer group

  using TileS = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;  // S = Q K^T: (M, N, K)
  using TileO = Shape<Int<kBlockM>, Int<kHeadDim>, Int<kBlockN>>;  // O = P V:   (M, N, K)
  // One 64-row warp group per consumer, stacked along M.
  using AtomLayout = Layout<Shape<Int<kConsumerGroups>, _1, _1>>;
  using TiledMmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, TileS>(), AtomLayout{}));
  // P stays in registers (A operand); V is read as (D, keys), head dim contiguous.
  using TiledMmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, TileO, GMMA::Major::K, GMMA::Major::MN>(), AtomLayout{}));

  // 128-byte swizzled rows (64 elements), the layout TMA writes and wgmma reads.
  using SmemAtom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));
  // V seen as (head dim, keys, stage): the B operand of P V, head dim contiguous.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{})));

  // Global tensors as TMA sees them: (rows, head dim, heads, batch).
  using GmemShape = Shape<int32_t, int32_t, int32_t, int32_t>;
  using GmemStride = Stride<int64_t, _1, int64_t, int64_t>;
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemShape{}, GmemStride{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutQ{},
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutKV{}),
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> k;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> v;
    alignas(16) uint64_t q_full;
    uint64_t k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static constexpr uint32_t kTmaBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kTmaBytesKV = kBlockN * kHeadDim * sizeof(Element);
};

}  // namespace flashattn::sm90
