// Tile shapes and CuTe building blocks of the Hopper (sm90a) backward kernel.
// One thread block owns kBlockN keys of one kv head: K and V stay in shared
// memory while a producer warp streams kBlockM-row tiles of Q and dO (TMA) and
// their LSE and d_i into a ring of kStages stages. Per query tile the block
// computes
//   S^T = K Q^T, dP^T = V dO^T        (wgmma, both operands in shared memory)
//   P^T, dS^T                          (registers)
//   dV += P^T dO, dK += dS^T Q         (wgmma, P^T / dS^T as register A operands)
//   dQ = dS K                          (wgmma from shared memory; dS^T is stored there)
// and adds dQ into an fp32 accumulator in global memory with a TMA reduce-add.
// Keys as the M dimension is what lets dV and dK take P^T and dS^T straight
// from the registers that computed them.
// hd64 / hd128: 128 keys, each of the two consumer warp groups owns 64 of them
// and runs all five products for them. hd256 (kByProduct): 64 keys, and the
// groups split the products instead (the tile table below).
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/numeric_types.h>

namespace flashattn::sm90 {

using namespace cute;

// The tile table: query rows per step and keys per block, per head dim.
//   hd64: 128 rows, 128 keys. Per step each group computes S^T and dP^T as 64 x 128 (wgmma
//     N = 128) and dQ as 128 x 64 (two 64-row atoms): twice the tensor-core work
//     per fixed step cost (barriers, waits, the dQ reduce-add) of 64 rows, where
//     64 rows ran at 0.8-0.9x FlashAttention-2 (kernel_notes, sm90 backward v3:
//     prepared, not yet run). Registers: S^T and dP^T (64 + 64) in flight beside
//     dK and dV (32 + 32); the kernel forms dS before the 16-bit P (kDsFirst).
//   hd128: 64 rows, 128 keys (128 rows would need 128 registers for S^T and dP^T
//     beside 128 for dK and dV).
//   hd256: 64 rows, 64 keys, the groups split by product (kByProduct).
//     Why 64 keys: dK + dV of 64 keys x 256 columns in fp32 are 128 KiB, i.e.
//     256 registers per thread over one warp group or 128 over two; 128 keys
//     would be the whole register file. Why not 64 keys split 32/32 between the
//     groups: wgmma's M is 64 per warp group. Shapes weighed (bf16/fp16 bytes;
//     227 KiB = 232448 B of shared memory; registers per consumer thread):
//     - by keys as hd128 (128 keys): K + V 128 KiB + Q/dO two stages 128 KiB:
//       over shared memory, and dK + dV 256 registers per thread: out.
//     - one consumer group, 64 keys: dK + dV 256 registers per thread: out.
//     - 64 keys, both groups compute S^T and dP^T for 32 query rows each (N =
//       32), P^T and dS^T both through shared memory, dV / dK / dQ split by
//       columns (64 + 64 + 64 registers): fits, but every S^T / dP^T wgmma reads
//       a 2 KiB K or V slice for 1 KiB of Q: 3 KiB per 16 tensor-core cycles,
//       above the ~128 B/cycle of shared memory (~1.5x those two products).
//     - 64 keys, groups split dV and dK by columns (64 + 64 registers each),
//       group 0 S^T, group 1 dP^T: both groups need both P^T and dS^T in shared
//       memory (SS wgmma, N = 128) and wait for both exchanges.
//     - chosen: 64 keys, group 0 computes S^T (64 x 64, K = 256), P^T and owns
//       dV (RS, N = 256, 128 registers) and dQ's columns 0-127; group 1 computes
//       dP^T, dS^T (P^T from group 0 through shared memory, fp32, 16 KiB) and owns
//       dK (RS, N = 256, 128 registers) and dQ's columns 128-255 (SS, 64
//       registers each). Every product is issued once; each group's wgmma A
//       operand comes from its own registers; the groups meet at two barriers
//       per step (P^T ready, dS^T ready). Registers per thread: 128 (dV or dK)
//       + 32 (S^T or dP^T) + 16 (16-bit P^T or dS^T) + 32 (group 1: fp32 P^T
//       from group 0), then 128 + 16 + 64 (dQ) at the end of a step.
//       Shared memory: K 32 KiB + V 32 KiB + Q 2 x 32 KiB + dO 2 x 32 KiB = 192
//       KiB, P^T 16 KiB (fp32), dS 8 KiB, LSE / d_i 1 KiB, barriers: 223232 B
//       (sizeof, 1024-aligned; limit 232448). dQ's fp32 staging (64 x 256 x 4 =
//       64 KiB) does not fit beside them: each group stages its 64 x 128 half
//       (32 KiB) in the step's own Q (group 1) or dO (group 0) stage once every
//       reader of it is done, and the stage goes back to the producer when the
//       reduce-add has read it. ptxas: no spills (setmaxnreg 240).
//     Predicted (not yet run; kernel_notes, sm90 backward v5): 380-470 TFLOP/s
//     at N = 16k against the sm80 kernel's ~189; per 64 x 64 step the block
//     does hd128's tensor-core work with half its elementwise work per thread,
//     and the limit is likely L2: a step moves 64 KiB of Q / dO and 64 KiB of
//     dQ reduce-add for the FLOPs of an hd128 step, which moves 32 + 32 KiB.
struct BwdTileConfig {
  int block_m;
  int block_n = 128;
};
constexpr BwdTileConfig bwd_tile_config(int head_dim) {
  return head_dim <= 64 ? BwdTileConfig{128} : head_dim <= 128 ? BwdTileConfig{64} : BwdTileConfig{64, 64};
}

template <int kHeadDim_, typename Element_, int kBlockM_ = bwd_tile_config(kHeadDim_).block_m>
struct BwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;  // query rows per step
  static constexpr int kBlockN = bwd_tile_config(kHeadDim_).block_n;  // keys per block
  // The consumer groups split the products of 64 keys (hd256) instead of
  // owning 64 keys each (bwd_kernel.cuh, the tile table above).
  static constexpr bool kByProduct = kBlockN == 64;
  static_assert(kBlockM == 64 || kBlockM == 128, "query rows per step: one or two 64-row dQ atoms");
  static_assert(kBlockM == 64 || kHeadDim <= 64, "128 query rows per step fit the registers at hd64 only");
  static_assert(kBlockN == 128 || (kByProduct && kBlockM == 64 && (kHeadDim == 192 || kHeadDim == 256)),
                "64 keys per block: the by-product split, written for hd192 / hd256 and 64 rows");
  static constexpr int kStages = 2;     // Q / dO ring depth
  static constexpr int kConsumerGroups = 2;
  static constexpr int kConsumerThreads = kConsumerGroups * 128;
  static constexpr int kThreads = kConsumerThreads + 128;
  // setmaxnreg split: the producer gives up what the consumers take, within the
  // registers the block launches with (__launch_bounds__(kThreads, 1): 168 a
  // thread). A larger share for the producer (32 was tried in session 9) leaves
  // the second consumer group waiting forever in setmaxnreg.inc.
  static constexpr int kEntryRegs = (65536 / kThreads) / 8 * 8;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr int kBlockRegs = kProducerRegs * 128 + kConsumerRegs * kConsumerThreads;
  static_assert(kBlockRegs <= kEntryRegs * kThreads, "setmaxnreg split over the launch's registers");
  // Arrivals that hand a Q / dO stage back to the producer: every consumer
  // thread; by product, each group's dQ leader once its reduce-add has read the
  // staging it put in that stage.
  static constexpr int kEmptyArrivals = kByProduct ? kConsumerGroups : kConsumerThreads;
  // dQ = dS K is split between the groups by columns (each needs all of dS, so
  // dS is shared through shared memory, double-buffered) when a column half is a
  // whole 64-wide swizzle atom; at hd64 (128 query rows per step) by rows: group
  // g takes rows [64g, 64g + 64) over all 128 keys, again with all of dS shared.
  // Either way one reduce-add of dQ per step (split by keys, each group's partial
  // over its own 64 keys, it was two: the hd64 backward ran with its L2 66% busy,
  // ncu session 6). By product: by columns, one dS buffer (the groups' barriers
  // order its reuse).
  // hd96 splits its 96 columns 48 / 48 (32-byte swizzled rows below).
  static constexpr bool kDqSplitN = kHeadDim >= 96;
  static constexpr bool kDqSplitM = !kDqSplitN && kBlockM == 128;
  static_assert(kDqSplitN || kDqSplitM, "dQ split by columns or rows: 64 query rows per step need hd >= 96");
  static constexpr int kDqCols = kDqSplitN ? kHeadDim / 2 : kHeadDim;  // dQ columns per group
  static constexpr int kDqRows = kDqSplitM ? kBlockM / 2 : kBlockM;    // dQ rows per group
  static constexpr int kDsStages = kByProduct ? 1 : 2;
  // dQ staging buffers (by keys). Split by columns (hd128): two, and a step's
  // staging is written under its dK product with no fence or barrier of its
  // own; the next step's dS^T fence and 256-thread barrier publish it to the
  // TMA reduce-add, issued under that step's dQ / dK (bwd_kernel.cuh, "dQ
  // staging, deferred"). Shared memory at hd128: 198656 + 32768 = 231424 B of
  // the 232448. Split by rows (hd64) the same, two 32 KiB buffers: 232448 B.
  static constexpr int kDqStages = kByProduct ? 1 : 2;
  // dS formed from the fp32 P before P's 16-bit copy and dV's issue. At 128 rows
  // S^T and dP^T (64 + 64 registers) beside dK and dV leave no room for the
  // 16-bit P while the fp32 P is still live (v2's order spilled 52-72 bytes);
  // at 64 rows (hd128) both orders compile without spills and dV issued first
  // keeps the tensor cores busy while dS is formed.
  static constexpr bool kDsFirst = kBlockM == 128;

  // Warp groups stacked along keys (by keys), or one group per product.
  static constexpr int kGroupsPerProduct = kByProduct ? 1 : kConsumerGroups;
  using AtomKeys = Layout<Shape<Int<kGroupsPerProduct>, _1, _1>>;
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
  // By product each group runs its own column half.
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float,
                           Shape<Int<kDqRows>, Int<kDqCols>, Int<kBlockN>>,
                           GMMA::Major::MN, GMMA::Major::MN>(),
      Layout<Shape<Int<kDqSplitM ? 2 : 1>, Int<kDqSplitN && !kByProduct ? 2 : 1>, _1>>{}));
  // One wgmma covers a group's dQ columns: otherwise CuTe's op selector falls
  // back to the widest listed divisor (N = 16 for hd96's 48 without its extended
  // wgmma shapes, CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED, which src/CMakeLists.txt
  // sets for the hd96 files), the tiled product then interleaves 16-column
  // slices between the groups, and each group's staging tile would hold the
  // other group's columns (kernel_notes, sm90 backward v21 attempt).
  static_assert(size<1>(typename TiledMmadQ::AtomShape_MNK{}) == kDqCols,
                "dQ: one wgmma per group and k slice; enable CuTe's extended wgmma shapes for this head dim");

  // 128-byte swizzled rows (64 elements); 64-byte (32) or 32-byte (16) ones
  // where a group's dQ columns are not whole 64-element atoms (hd192 by
  // product: 96 each; hd96: 48), so that group 1's slice of K, the B operand of
  // its dQ, starts on an atom.
  using SmemAtom = std::conditional_t<
      kDqCols % 64 == 0, GMMA::Layout_K_SW128_Atom<Element>,
      std::conditional_t<kDqCols % 32 == 0, GMMA::Layout_K_SW64_Atom<Element>, GMMA::Layout_K_SW32_Atom<Element>>>;
  static_assert(kDqCols % 16 == 0, "a group's dQ columns: whole 16-element atoms");
  // The fp32 dQ staging's rows: 128-byte swizzled (32 floats), or 64-byte (16)
  // where a group's columns are not whole 32-float atoms (hd96). kDqSwizzleBits:
  // the byte swizzle's width (Swizzle<3,4,3> or <2,4,3>) for the staging stores.
  static constexpr bool kDqSw128 = kDqCols % 32 == 0;
  static constexpr int kDqSwizzleBits = kDqSw128 ? 3 : 2;
  // The accumulator's columns permuted within 32-float groups (16 at hd96; dq_layout.h) so
  // that the staging stores are free of bank conflicts: by keys (hd64, hd128;
  // hd96's 16-float groups with their own permutation). By product (hd192,
  // hd256) the same stores measured 2-7% slower at hd256 (kernel notes, sm90
  // backward v25): that path keeps the plain order and its 4-wavefront stores.
  static constexpr bool kDqColPerm = !kByProduct;
  using DqAtom = std::conditional_t<kDqSw128, GMMA::Layout_K_SW128_Atom<float>, GMMA::Layout_K_SW64_Atom<float>>;
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
  // fp32 dQ staging for the TMA reduce-add: one (kDqRows, kDqCols) tile per group.
  using SmemLayoutdQ = decltype(tile_to_shape(DqAtom{},
                                              Shape<Int<kDqRows>, Int<kDqCols>>{}));
  // The staging as the dQ product's C operand sees it: split by columns, both
  // groups' tiles side by side, (kBlockM, D) (group g's columns are tile g, as
  // tile_to_shape lays out column blocks of the atom one after another);
  // split by keys, the group's own tile; by product, the group's own tile too
  // (its own dQ product, its own staging).
  // Split by rows: the two groups' tiles stacked along rows (tile g at g * cosize).
  using SmemLayoutdQMma = std::conditional_t<
      kDqSplitM, decltype(tile_to_shape(SmemLayoutdQ{}, Shape<Int<kBlockM>, Int<kDqCols>>{})),
      decltype(tile_to_shape(DqAtom{}, Shape<Int<kBlockM>, Int<kDqSplitN && !kByProduct ? kHeadDim : kDqCols>>{}))>;

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
                                       Shape<Int<kDqRows>, Int<kDqCols>>{}, _1{}));

  // By keys (hd64, hd128).
  struct SharedStorageByKeys {
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> k;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> v;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> dout;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutdS>> ds;
    // Buffer b, group g's TMA tile: dq + (b * kConsumerGroups + g) * cosize(SmemLayoutdQ).
    alignas(1024) cute::array_aligned<float, cosize_v<SmemLayoutdQ> * kConsumerGroups * kDqStages> dq;
    float lse_log2[kStages][kBlockM];  // LSE in log2 units, +inf for rows that see nothing
    float row_dot[kStages][kBlockM];
    alignas(16) uint64_t kv_full;
    uint64_t q_full[kStages], do_full[kStages], empty[kStages];
  };
  // By product (hd256): no dQ staging of its own (it goes into the step's Q
  // and dO stages); P^T from group 0 to group 1 in fp32, each thread's 32
  // accumulator values as 8 16-byte chunks, chunk-major (thread t of group 1
  // reads what thread t of group 0 wrote: the two accumulators share a layout).
  struct SharedStorageByProduct {
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> k;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> v;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> dout;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutdS>> ds;
    alignas(1024) cute::array_aligned<float, kBlockN * kBlockM> p;
    float lse_log2[kStages][kBlockM];
    float row_dot[kStages][kBlockM];
    alignas(16) uint64_t kv_full;
    uint64_t q_full[kStages], do_full[kStages], empty[kStages];
    // Every consumer thread has read the stage's LSE / d rows (the stage's
    // tiles go back through `empty`, which only the two leaders arrive on).
    uint64_t rows_empty[kStages];
    // dQ apart (bwd_kernel.cuh, kDqApart): group 1 has read P^T; group 0 waits
    // for it before writing the next step's.
    uint64_t p_read;
  };
  using SharedStorage = std::conditional_t<kByProduct, SharedStorageByProduct, SharedStorageByKeys>;
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 232448, "over the 227 KiB of dynamic shared memory of one sm90 block");
  static_assert(!kByProduct || (cosize_v<SmemLayoutdQ> * sizeof(float) * kStages == cosize_v<SmemLayoutQ> * sizeof(Element) &&
                                kBlockM * kDqCols == size(SmemLayoutdQ{})),
                "by product: a group's fp32 dQ staging is exactly one Q / dO stage");
  static constexpr uint32_t kTmaBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kTmaBytesKV = kBlockN * kHeadDim * sizeof(Element);
};

}  // namespace flashattn::sm90
