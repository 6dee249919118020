// The Hopper backward with dQ apart (FLASHATTN_SM90_BWD_DQ_APART; kernel_notes,
// sm90 backward v34): at hd256 the fused kernel's dQ costs more than its other
// four products together. Per step it reduce-adds a 64 x 256 fp32 partial into
// L2 (64 KiB, L2 81% busy in ncu at 16k) through staging that holds a Q / dO
// stage; with those adds compiled out the kernel ran 1.78x faster (session 36).
// Here the key-block kernel (bwd_kernel.cuh) runs without its dQ, and dQ gets a
// kernel of its own that owns 128 query rows and walks their key tiles:
//   S = Q K^T, dP = dO V^T   (wgmma, operands in shared memory)
//   P, dS                    (registers, from the saved LSE and d_i)
//   dQ += dS K               (wgmma, dS as the register A operand)
// two more products (S and dP again), no atomics, no fp32 accumulator in memory,
// and the result is deterministic by construction.
// Producer warp: Q and dO once, then K_j and V_j by TMA into three (keys, head
// dim) slots: K in slots 0 and 1 by turns, V in slot 2 (kSplitRing). K_{j+1}
// loads while step j runs, into the slot dQ_{j-1} freed; V_{j+1} loads from the
// middle of step j, once dP_j has read V_j, so neither waits on a dQ product.
// (kSplitRing = false: one ring K0 V0 K1 V1 ..., where V_{j+1} waits for
// dQ_j to free K_j's slot; the A/B baseline.)
// Consumer groups: 64 query rows each, all three products for them.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>

#include "kernels/common/bwd_common.cuh"
#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/seqlen.h"
#include "kernels/sm90/launch.h"
#include "kernels/sm90/mma_utils.cuh"

namespace flashattn::sm90 {

using namespace cute;

template <int kHeadDim_, typename Element_>
struct DqTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kConsumerGroups = 2;
  static constexpr int kGroupRows = 64;  // wgmma's M per warp group
  static constexpr int kBlockM = kConsumerGroups * kGroupRows;
  static constexpr int kBlockN = 64;  // keys per tile: N = 64 keeps S / dP's SS wgmma at shared memory's rate
  static constexpr int kSlots = 3;    // K / V slots
#ifndef FLASHATTN_SM90_DQ_SPLIT_RING
#define FLASHATTN_SM90_DQ_SPLIT_RING 1
#endif
  static constexpr bool kSplitRing = FLASHATTN_SM90_DQ_SPLIT_RING != 0;
  static constexpr int kConsumerThreads = kConsumerGroups * 128;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kEntryRegs = (65536 / kThreads) / 8 * 8;
  static constexpr int kProducerRegs = 24;
  // dQ (64 x 256 fp32: 128) + S and dP (32 + 32) + dS (16) per thread.
  static constexpr int kConsumerRegs = 240;
  static constexpr int kBlockRegs = kProducerRegs * 128 + kConsumerRegs * kConsumerThreads;
  static_assert(kBlockRegs <= kEntryRegs * kThreads, "setmaxnreg split over the launch's registers");
  static_assert(kHeadDim % 64 == 0 && kHeadDim <= 256, "128-byte swizzled rows; wgmma's N up to 256");

  using SmemAtom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>, Int<kSlots>>{}));
  // K as dQ's B operand: (head dim, keys, slot).
  using SmemLayoutKt = decltype(composition(
      SmemLayoutKV{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>, Int<kSlots>>{}, Step<_2, _1, _3>{})));
  // S and dP: (query rows, keys, head dim), one group each.
  using TiledMmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kGroupRows>, Int<kBlockN>, Int<kHeadDim>>>()));
  // dQ: (query rows, head dim, keys), A = dS from registers, B = K head-dim-major.
  using TiledMmaDq = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<Int<kGroupRows>, Int<kHeadDim>, Int<kBlockN>>,
                           GMMA::Major::K, GMMA::Major::MN>()));

  using GmemShape = Shape<int32_t, int32_t, int32_t, int32_t>;  // (rows, head dim, heads, batch)
  using GmemStride = Stride<int64_t, _1, int64_t, int64_t>;
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemShape{}, GmemStride{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutQ{},
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutKV{}),
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> dout;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> kv;
    alignas(16) uint64_t q_full;
    uint64_t kv_full[kSlots], kv_empty[kSlots];
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 232448, "over the 227 KiB of dynamic shared memory of one sm90 block");
  static constexpr uint32_t kTmaBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kTmaBytesKV = kBlockN * kHeadDim * sizeof(Element);
};

template <typename Traits>
struct DqArgs {
  BwdKernelParams p;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaQ tma_do;
  typename Traits::TmaKV tma_k;
  typename Traits::TmaKV tma_v;
};

// Load t of a query tile's K_0 V_0 K_1 V_1 ... sequence: its slot, and how many
// loads went into that slot before it (the round, for the barriers' phases).
struct KvSlot {
  int slot, round;
};
template <typename Traits>
__device__ __forceinline__ KvSlot kv_slot(int t) {
  if constexpr (Traits::kSplitRing) {
    static_assert(Traits::kSlots == 3, "K in slots 0 and 1, V in slot 2");
    return t % 2 == 0 ? KvSlot{(t / 2) % 2, t / 4} : KvSlot{2, t / 2};
  } else {
    return KvSlot{t % Traits::kSlots, t / Traits::kSlots};
  }
}

// Plain scores (no softcap / ALiBi: those keep the fused kernel); causal and
// window masks, GQA, packed batches. Grid: (query tiles, query heads, batch),
// the last query tiles first (under a causal mask they see the most keys).
template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1) dq_kernel(const __grid_constant__ DqArgs<Traits> args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Element = typename Traits::Element;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kSlots = Traits::kSlots;
  const BwdKernelParams& p = args.p;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);

  const int m_block = int(gridDim.x) - 1 - int(blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z;
  const detail::SeqLen sl(p, b);
  const int seqlen_q = int(sl.seqlen_q), seqlen_k = int(sl.seqlen_k);
  const int m0 = m_block * kBlockM;
  // Packed: a sequence shorter than the longest. (It still waits for the
  // key-block kernel, as the epilogue below does: if every block of the grid
  // ended here, the grid must not end before that kernel.)
  if (m0 >= seqlen_q) {
    detail::pdl_wait();
    return;
  }
  const detail::Mask mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
  const int r_last = min(m0 + kBlockM, seqlen_q) - 1;
  // Keys any row of the tile sees (each row's range moves right with the row).
  const int c_begin = int(mask.col_begin(m0)), c_end = int(mask.col_end(r_last));
  const int n_begin = c_begin / kBlockN;
  const int n_tiles = c_end > c_begin ? (c_end + kBlockN - 1) / kBlockN - n_begin : 0;
  const int hk = h / int(p.heads_q / p.heads_kv);
  const bool packed = p.cu_seqlens_q != nullptr;
  const int batches = packed ? 1 : int(p.batch), bb = packed ? 0 : b;

  const int warp_group = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    cute::prefetch_tma_descriptor(args.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(args.tma_do.get_tma_descriptor());
    cute::prefetch_tma_descriptor(args.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(args.tma_v.get_tma_descriptor());
    Barrier::init(&smem.q_full, 1);
    CUTE_UNROLL
    for (int s = 0; s < kSlots; ++s) {
      Barrier::init(&smem.kv_full[s], 1);
      Barrier::init(&smem.kv_empty[s], Traits::kConsumerThreads);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sdO = make_tensor(make_smem_ptr(smem.dout.data()), typename Traits::SmemLayoutQ{});
  Tensor sKV = make_tensor(make_smem_ptr(smem.kv.data()), typename Traits::SmemLayoutKV{});
  Tensor sKt = make_tensor(make_smem_ptr(smem.kv.data()), typename Traits::SmemLayoutKt{});

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (threadIdx.x != 0 || n_tiles == 0) return;
    const int rows_q = int(packed ? p.total_q : p.seqlen_q), rows_k = int(packed ? p.total_k : p.seqlen_k);
    Tensor mQ = args.tma_q.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
    Tensor mdO = args.tma_do.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
    Tensor mK = args.tma_k.get_tma_tensor(make_shape(rows_k, kHeadDim, int(p.heads_kv), batches));
    Tensor mV = args.tma_v.get_tma_tensor(make_shape(rows_k, kHeadDim, int(p.heads_kv), batches));
    const auto q_start = make_coord(int(sl.q_offset), _0{}), k_start = make_coord(int(sl.k_offset), _0{});
    using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
    using TileK = Shape<Int<kBlockN>, Int<kHeadDim>>;
    Tensor gQ = local_tile(domain_offset(q_start, mQ(_, _, h, bb)), TileQ{}, make_coord(m_block, _0{}));
    Tensor gdO = local_tile(domain_offset(q_start, mdO(_, _, h, bb)), TileQ{}, make_coord(m_block, _0{}));
    auto [tQgQ, tQsQ] = tma_partition(args.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    auto [tdOgdO, tdOsdO] = tma_partition(args.tma_do, _0{}, Layout<_1>{}, group_modes<0, 2>(sdO), group_modes<0, 2>(gdO));
    Barrier::arrive_and_expect_tx(&smem.q_full, 2 * Traits::kTmaBytesQ);
    copy(args.tma_q.with(smem.q_full), tQgQ, tQsQ);
    copy(args.tma_do.with(smem.q_full), tdOgdO, tdOsdO);
    Tensor gK = local_tile(domain_offset(k_start, mK(_, _, hk, bb)), TileK{}, make_coord(_, _0{}));  // (.., .., tile)
    Tensor gV = local_tile(domain_offset(k_start, mV(_, _, hk, bb)), TileK{}, make_coord(_, _0{}));
    auto [tKgK, tKsK] = tma_partition(args.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sKV), group_modes<0, 2>(gK));
    auto [tVgV, tVsV] = tma_partition(args.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sKV), group_modes<0, 2>(gV));
    for (int t = 0; t < 2 * n_tiles; ++t) {
      const int j = n_begin + t / 2;
      const auto [slot, round] = kv_slot<Traits>(t);
      if (round > 0) Barrier::wait(&smem.kv_empty[slot], (round - 1) & 1);
      Barrier::arrive_and_expect_tx(&smem.kv_full[slot], Traits::kTmaBytesKV);
      if (t % 2 == 0) copy(args.tma_k.with(smem.kv_full[slot]), tKgK(_, j), tKsK(_, slot));
      else copy(args.tma_v.with(smem.kv_full[slot]), tVgV(_, j), tVsV(_, slot));
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
  const int group = warp_group - 1, tidx = threadIdx.x % 128;
  typename Traits::TiledMmaS mma_s;
  typename Traits::TiledMmaDq mma_dq;
  auto thr_s = mma_s.get_thread_slice(tidx);
  auto thr_dq = mma_dq.get_thread_slice(tidx);
  using GroupTile = Shape<Int<Traits::kGroupRows>, Int<kHeadDim>>;
  Tensor tSrQ = thr_s.partition_fragment_A(local_tile(sQ, GroupTile{}, make_coord(group, _0{})));
  Tensor tSrdO = thr_s.partition_fragment_A(local_tile(sdO, GroupTile{}, make_coord(group, _0{})));
  Tensor tSrKV = thr_s.partition_fragment_B(sKV);  // (.., .., k, slot)
  Tensor tdQrK = thr_dq.partition_fragment_B(sKt);  // (.., .., k, slot)
  Tensor acc_dq = partition_fragment_C(mma_dq, GroupTile{});
  clear(acc_dq);

  // This thread's two query rows: LSE (log2 units), d_i scale and visible keys.
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<Traits::kGroupRows>, Int<kBlockN>>{}));
  Tensor coord = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
  static_assert(decltype(size<0>(coord))::value == 2, "two query rows per thread");
  const int g0 = m0 + group * Traits::kGroupRows;
  float lse2[2], d_scaled[2];
  int lo[2], hi[2];
  CUTE_UNROLL
  for (int mi = 0; mi < 2; ++mi) {
    const int i = g0 + get<0>(coord(mi, 0));
    const bool in = i < seqlen_q;
    const int64_t slot = in ? detail::row_slot(p, sl, b, h, i) : 0;
    lse2[mi] = in ? p.lse_log2[slot] : 0.f;
    d_scaled[mi] = in ? p.row_dot[slot] * p.softmax_scale : 0.f;
    lo[mi] = in ? int(mask.col_begin(i)) : 0;
    hi[mi] = in ? int(mask.col_end(i)) : 0;
  }
  const int j0 = get<1>(coord(0, 0));  // the thread's first key column in a tile

  if (n_tiles > 0) Barrier::wait(&smem.q_full, 0);
  for (int jt = 0; jt < n_tiles; ++jt) {
    const auto [sk, rk] = kv_slot<Traits>(2 * jt);
    const auto [sv, rv] = kv_slot<Traits>(2 * jt + 1);
    const int k0 = (n_begin + jt) * kBlockN;
    Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<Traits::kGroupRows>, Int<kBlockN>>{});
    Tensor acc_dp = partition_fragment_C(mma_s, Shape<Int<Traits::kGroupRows>, Int<kBlockN>>{});
    Barrier::wait(&smem.kv_full[sk], rk & 1);
    wgmma_issue<true, false>(mma_s, tSrQ, tSrKV(_, _, _, sk), acc_s);
    Barrier::wait(&smem.kv_full[sv], rv & 1);
    wgmma_issue<true, false>(mma_s, tSrdO, tSrKV(_, _, _, sv), acc_dp);

    // P from S while dP runs; keys outside a row's range (and rows past the
    // sequence, whose range is empty) get 0.
    warpgroup_wait<1>();
    warpgroup_fence_operand(acc_s);
    Tensor sc = make_tensor(acc_s.data(), acc_rowcol(acc_s.layout()));
    const bool need_mask = m0 + kBlockM > seqlen_q || !mask.tile_full(m0, m0 + kBlockM, k0, k0 + kBlockN);
    if (need_mask) {
      CUTE_UNROLL
      for (int mi = 0; mi < 2; ++mi) {
        const int l = lo[mi] - k0 - j0, u = hi[mi] - k0 - j0;
        CUTE_UNROLL
        for (int ni = 0; ni < size<1>(sc); ++ni) {
          const int c = get<1>(coord(0, ni)) - j0;  // a constant once unrolled
          sc(mi, ni) = c >= l && c < u ? exp2f(fmaf(sc(mi, ni), p.scale_log2, -lse2[mi])) : 0.f;
        }
      }
    } else {
      CUTE_UNROLL
      for (int mi = 0; mi < 2; ++mi) {
        CUTE_UNROLL
        for (int ni = 0; ni < size<1>(sc); ++ni) sc(mi, ni) = exp2f(fmaf(sc(mi, ni), p.scale_log2, -lse2[mi]));
      }
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dp);
    Barrier::arrive(&smem.kv_empty[sv]);  // V_j is read
    // dS = P (dP - d) scale, as one fma per element with d scale per row.
    Tensor dp = make_tensor(acc_dp.data(), acc_rowcol(acc_dp.layout()));
    CUTE_UNROLL
    for (int mi = 0; mi < 2; ++mi) {
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(dp); ++ni) dp(mi, ni) = sc(mi, ni) * fmaf(dp(mi, ni), p.softmax_scale, -d_scaled[mi]);
    }
    Tensor rdS = make_tensor<Element>(acc_dp.layout());
    convert_into(acc_dp, rdS);
    wgmma_issue<false, true>(mma_dq, make_tensor(rdS.data(), acc_as_a(rdS.layout())), tdQrK(_, _, _, sk), acc_dq);
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dq);
    Barrier::arrive(&smem.kv_empty[sk]);  // K_j is read
  }

  // Epilogue: dQ (dS carried the softmax scale) from registers, two columns
  // per store; rows past the sequence not written.
  Tensor tdQc = thr_dq.partition_C(make_identity_tensor(GroupTile{}));
  Tensor dq_coord = make_tensor(tdQc.data(), acc_rowcol(tdQc.layout()));
  Tensor dq_rc = make_tensor(acc_dq.data(), acc_rowcol(acc_dq.layout()));
  CUTE_UNROLL
  for (int mi = 0; mi < size<0>(dq_rc); ++mi) {
    const int i = g0 + get<0>(dq_coord(mi, 0));
    if (i >= seqlen_q) continue;
    Element* row = static_cast<Element*>(p.dq) + sl.q_row(b, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, h, i);
    CUTE_UNROLL
    for (int ni = 0; ni < size<1>(dq_rc); ni += 2) {
      cutlass::Array<Element, 2> pair;
      pair[0] = Element(dq_rc(mi, ni));
      pair[1] = Element(dq_rc(mi, ni + 1));
      *reinterpret_cast<cutlass::Array<Element, 2>*>(row + get<1>(dq_coord(mi, ni))) = pair;
    }
  }
  // Launched early beside the key-block kernel (launch_dq): this grid ends only
  // after that one, so whatever the stream runs next sees dK and dV too.
  detail::pdl_wait();
#endif
}

// A tensor of the backward's as TMA sees it, (rows, head dim, heads, batch).
// Packed batches are one "batch" of total rows (the kernels offset each
// sequence); its batch stride only has to be a valid one.
template <int kHeadDim, typename T>
auto gmem_view(const BwdKernelParams& p, T* ptr, int64_t rows, int64_t heads, int64_t batch_stride,
               int64_t row_stride, int64_t head_stride) {
  const bool packed = p.is_varlen();
  return make_tensor(make_gmem_ptr(ptr),
                     make_shape(int32_t(rows), int32_t(kHeadDim), int32_t(heads), int32_t(packed ? 1 : p.batch)),
                     make_stride(row_stride, _1{}, head_stride, packed ? rows * row_stride : batch_stride));
}

// Host side: the dQ kernel's TMA descriptors (per call, so a call stays
// capturable in a CUDA graph) and its launch on the caller's stream. After_keys:
// the key-block kernel was launched just before, and the dQ kernel may start
// while its last blocks run (programmatic dependent launch; FLASHATTN_SM90_PDL=0
// turns that off). Not after the row-dot pass alone: dQ reads its d_i.
template <typename Traits>
cudaError_t launch_dq(const BwdKernelParams& p, cudaStream_t stream, bool after_keys) {
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  const bool packed = p.is_varlen();
  const int64_t rows_q = packed ? p.total_q : p.seqlen_q, rows_k = packed ? p.total_k : p.seqlen_k;
  auto gmem = [&](const void* ptr, int64_t rows, int64_t heads, int64_t batch_stride, int64_t row_stride,
                  int64_t head_stride) {
    return gmem_view<kHeadDim>(p, static_cast<const Element*>(ptr), rows, heads, batch_stride, row_stride, head_stride);
  };
  using TileQ = Shape<Int<Traits::kBlockM>, Int<kHeadDim>>;
  using TileK = Shape<Int<Traits::kBlockN>, Int<kHeadDim>>;
  const auto smem_kv = take<0, 2>(typename Traits::SmemLayoutKV{});
  DqArgs<Traits> args{
      p,
      make_tma_copy(SM90_TMA_LOAD{}, gmem(p.q, rows_q, p.heads_q, p.q_batch_stride, p.q_row_stride, p.q_head_stride),
                    typename Traits::SmemLayoutQ{}, TileQ{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{},
                    gmem(p.dout, rows_q, p.heads_q, p.do_batch_stride, p.do_row_stride, p.do_head_stride),
                    typename Traits::SmemLayoutQ{}, TileQ{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gmem(p.k, rows_k, p.heads_kv, p.k_batch_stride, p.k_row_stride, p.k_head_stride),
                    smem_kv, TileK{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gmem(p.v, rows_k, p.heads_kv, p.v_batch_stride, p.v_row_stride, p.v_head_stride),
                    smem_kv, TileK{}, _1{})};
  auto kernel = dq_kernel<Traits>;
  static const cudaError_t ready = prepare_kernel<Traits>(reinterpret_cast<const void*>(kernel));
  if (ready != cudaSuccess) return ready;
  const unsigned m_blocks = static_cast<unsigned>((p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM);
  return detail::launch_early(after_keys && programmatic_launch_enabled(), kernel,
                              dim3(m_blocks, static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch)),
                              dim3(Traits::kThreads), Traits::kSmemBytes, stream, args);
}

}  // namespace flashattn::sm90
