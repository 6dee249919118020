// The Hopper forward kernel (sm90a): TMA loads, wgmma products, warp-specialised.
//   producer warp group: one thread issues the TMA copies of Q (once) and of the
//     K and V tiles into a ring of shared-memory stages; each stage has a "full"
//     mbarrier (TMA transaction bytes) and an "empty" one (released by consumers);
//   consumer warp groups (64 query rows each): S = Q K^T from shared memory, the
//     mask and online softmax in registers, P converted in registers to the A
//     operand of O += P V (V from shared memory), then the epilogue. Within a
//     group, S of tile i is issued with P V of tile i-1 and the softmax of tile i
//     overlaps that P V; across the two groups, named barriers alternate their
//     wgmma issue (pingpong), so one group's softmax hides under the other's
//     products.
// Registers move from the producer to the consumers with setmaxnreg.
#pragma once

#include <cmath>
#include <type_traits>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_conversion.h>

#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"
#include "kernels/common/quad_reduce.cuh"
#include "kernels/common/seqlen.h"
#include "kernels/sm90/fwd_traits.h"
#include "kernels/sm90/mma_utils.cuh"

namespace flashattn::sm90 {

using detail::FwdKernelParams;

// What the kernel receives: the call's parameters and the three TMA descriptors.
template <typename Traits>
struct FwdArgs {
  FwdKernelParams p;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaKV tma_k;
  typename Traits::TmaKV tma_v;
};

using detail::quad_max;
using detail::quad_sum;

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fwd_kernel(const __grid_constant__ FwdArgs<Traits> args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Element = typename Traits::Element;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kStages = Traits::kStages;
  const FwdKernelParams& p = args.p;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);

  const bool reverse = p.window_right >= 0;  // causal-like: longer query tiles first
  const int m_block = reverse ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / int(p.heads_q / p.heads_kv);
  const detail::SeqLen sl(p, b);
  const int seqlen_q = int(sl.seqlen_q), seqlen_k = int(sl.seqlen_k);
  const int m0 = m_block * kBlockM;
  if (m0 >= seqlen_q) return;  // packed: a sequence shorter than the longest
  const detail::Mask mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
  const int m_end = min(m0 + kBlockM, seqlen_q);
  const int c_begin = int(mask.col_begin(m0)), c_end = int(mask.col_end(m_end - 1));
  const int n_block_min = c_begin / kBlockN;
  const int n_block_max = c_end > c_begin ? (c_end + kBlockN - 1) / kBlockN : n_block_min;
  const int n_tiles = n_block_max - n_block_min;

  const int warp_group = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    Barrier::init(&smem.q_full, 1);
    CUTE_UNROLL
    for (int s = 0; s < kStages; ++s) {
      Barrier::init(&smem.k_full[s], 1);
      Barrier::init(&smem.v_full[s], 1);
      Barrier::init(&smem.k_empty[s], Traits::kConsumerThreads);
      Barrier::init(&smem.v_empty[s], Traits::kConsumerThreads);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKV{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutKV{});
  Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutVt{});

  if (warp_group == 0) {
    // Producer. Tiles are walked from the last key tile down, as the consumers do.
    cutlass::arch::warpgroup_reg_dealloc<24>();
    if (threadIdx.x != 0 || n_tiles == 0) return;
    // Packed batches are one sequence of total rows to TMA; a sequence starts at
    // its offset, and rows read past its end belong to masked keys or unstored rows.
    const bool packed = p.cu_seqlens_q != nullptr;
    const int batches = packed ? 1 : int(p.batch), bb = packed ? 0 : b;
    const int rows_q = int(packed ? p.total_q : p.seqlen_q), rows_k = int(packed ? p.total_k : p.seqlen_k);
    Tensor mQ = args.tma_q.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
    Tensor mK = args.tma_k.get_tma_tensor(make_shape(rows_k, kHeadDim, int(p.heads_kv), batches));
    Tensor mV = args.tma_v.get_tma_tensor(make_shape(rows_k, kHeadDim, int(p.heads_kv), batches));
    const auto q_start = make_coord(int(sl.q_offset), _0{}), k_start = make_coord(int(sl.k_offset), _0{});
    Tensor gQ = local_tile(domain_offset(q_start, mQ(_, _, h, bb)), Shape<Int<kBlockM>, Int<kHeadDim>>{},
                           make_coord(m_block, _0{}));
    Tensor gK = local_tile(domain_offset(k_start, mK(_, _, hk, bb)), Shape<Int<kBlockN>, Int<kHeadDim>>{},
                           make_coord(_, _0{}));
    Tensor gV = local_tile(domain_offset(k_start, mV(_, _, hk, bb)), Shape<Int<kBlockN>, Int<kHeadDim>>{},
                           make_coord(_, _0{}));
    auto [tQgQ, tQsQ] = tma_partition(args.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    auto [tKgK, tKsK] = tma_partition(args.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
    auto [tVgV, tVsV] = tma_partition(args.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));

    Barrier::arrive_and_expect_tx(&smem.q_full, Traits::kTmaBytesQ);
    copy(args.tma_q.with(smem.q_full), tQgQ, tQsQ);
    for (int i = 0; i < n_tiles; ++i) {
      const int n_block = n_block_max - 1 - i, s = i % kStages, round = i / kStages;
      if (round > 0) Barrier::wait(&smem.k_empty[s], (round - 1) & 1);
      Barrier::arrive_and_expect_tx(&smem.k_full[s], Traits::kTmaBytesKV);
      copy(args.tma_k.with(smem.k_full[s]), tKgK(_, n_block), tKsK(_, s));
      if (round > 0) Barrier::wait(&smem.v_empty[s], (round - 1) & 1);
      Barrier::arrive_and_expect_tx(&smem.v_full[s], Traits::kTmaBytesKV);
      copy(args.tma_v.with(smem.v_full[s]), tVgV(_, n_block), tVsV(_, s));
    }
    return;
  }

  // Consumers.
  cutlass::arch::warpgroup_reg_alloc<240>();
  const int tidx = threadIdx.x - 128;
  typename Traits::TiledMmaS mma_s;
  typename Traits::TiledMmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(tidx);
  auto thr_o = mma_o.get_thread_slice(tidx);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);   // smem descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);   // (.., .., k, stage)
  Tensor tOrV = thr_o.partition_fragment_B(sVt);  // (.., .., k, stage)
  Tensor acc_o = partition_fragment_C(mma_o, Shape<Int<kBlockM>, Int<kHeadDim>>{});
  clear(acc_o);
  Tensor o_rc = make_tensor(acc_o.data(), acc_rowcol(acc_o.layout()));
  // (row, col) of every score this thread holds, within the block's tile.
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  Tensor coord = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
  constexpr int kRows = decltype(size<0>(coord))::value;
  float row_max[kRows], row_sum[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.f;
  }
  const float scale_log2 = p.scale_log2;

  // Scores of tile n0 -> probabilities: mask, new running max, the factor that
  // rescales what was accumulated (applied to O later, once P V of the previous
  // tile has landed), exp2, row sums.
  float rescale[kRows];
  auto softmax = [&](auto& acc_s, int n0) __attribute__((always_inline)) {
    Tensor sc = make_tensor(acc_s.data(), acc_rowcol(acc_s.layout()));
    if (!mask.tile_full(m0, m_end, n0, n0 + kBlockN)) {
      CUTE_UNROLL
      for (int mi = 0; mi < kRows; ++mi) {
        const int row = m0 + get<0>(coord(mi, 0));
        const int lo = int(mask.col_begin(row)), hi = int(mask.col_end(row));
        CUTE_UNROLL
        for (int ni = 0; ni < size<1>(sc); ++ni) {
          const int j = n0 + get<1>(coord(mi, ni));
          if (j < lo || j >= hi) sc(mi, ni) = -INFINITY;
        }
      }
    }
    CUTE_UNROLL
    for (int mi = 0; mi < kRows; ++mi) {
      float mx = row_max[mi];
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(sc); ++ni) mx = fmaxf(mx, sc(mi, ni));
      mx = quad_max(mx);
      // A row that has seen nothing keeps max -inf; use 0 so -inf - -inf never happens.
      const float base = mx == -INFINITY ? 0.f : mx * scale_log2;
      rescale[mi] = exp2f(row_max[mi] * scale_log2 - base);
      row_max[mi] = mx;
      float sum = 0.f;
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(sc); ++ni) {
        sc(mi, ni) = exp2f(fmaf(sc(mi, ni), scale_log2, -base));
        sum += sc(mi, ni);
      }
      row_sum[mi] = row_sum[mi] * rescale[mi] + sum;
    }
  };
  auto rescale_o = [&]() __attribute__((always_inline)) {
    CUTE_UNROLL
    for (int mi = 0; mi < kRows; ++mi) {
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(o_rc); ++ni) o_rc(mi, ni) *= rescale[mi];
    }
  };
  // Pingpong: the two consumer groups take turns issuing their products (named
  // barrier 0 grants group 0, 1 grants group 1), so one group's softmax runs
  // while the other's wgmmas occupy the tensor cores.
  const int group = warp_group - 1;
  auto wait_turn = [&]() { cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, group); };
  auto pass_turn = [&]() { cutlass::arch::NamedBarrier::arrive(Traits::kConsumerThreads, 1 - group); };

  // Software pipeline inside a group: S of tile i is issued together with P V of
  // tile i-1, and the softmax of tile i runs while that P V is on the tensor cores.
  Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<kBlockM>, Int<kBlockN>>{});
  Tensor rP = make_tensor<Element>(acc_s.layout());
  Tensor tOrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
  if (n_tiles > 0) {
    if (group == 1) pass_turn();  // group 0 goes first
    Barrier::wait(&smem.q_full, 0);
    Barrier::wait(&smem.k_full[0], 0);
    wait_turn();
    wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, 0), acc_s);
    pass_turn();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_s);
    Barrier::arrive(&smem.k_empty[0]);
    softmax(acc_s, (n_block_max - 1) * kBlockN);
    convert_into(acc_s, rP);
  }
  for (int i = 1; i < n_tiles; ++i) {
    const int n_block = n_block_max - 1 - i, s = i % kStages, phase = (i / kStages) & 1;
    const int sp = (i - 1) % kStages, phase_p = ((i - 1) / kStages) & 1;
    Barrier::wait(&smem.k_full[s], phase);
    wait_turn();
    wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, s), acc_s);
    Barrier::wait(&smem.v_full[sp], phase_p);
    wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, sp), acc_o);
    pass_turn();
    warpgroup_wait<1>();  // S of tile i is in; P V of tile i-1 may still run
    warpgroup_fence_operand(acc_s);
    Barrier::arrive(&smem.k_empty[s]);
    softmax(acc_s, n_block * kBlockN);
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_o);
    warpgroup_fence_operand(rP);
    Barrier::arrive(&smem.v_empty[sp]);
    rescale_o();
    convert_into(acc_s, rP);
  }
  if (n_tiles > 0) {
    const int sp = (n_tiles - 1) % kStages, phase_p = ((n_tiles - 1) / kStages) & 1;
    Barrier::wait(&smem.v_full[sp], phase_p);
    wait_turn();
    wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, sp), acc_o);
    if (group == 0) pass_turn();  // group 1 takes no further turn
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_o);
    Barrier::arrive(&smem.v_empty[sp]);
  }

  // Epilogue: normalise, LSE, O straight from registers (pairs of columns).
  const float ln2 = 0.6931471805599453f;
  Tensor tOcO = thr_o.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  Tensor ocoord = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
  CUTE_UNROLL
  for (int mi = 0; mi < kRows; ++mi) {
    const float sum = quad_sum(row_sum[mi]);
    const int i = m0 + get<0>(coord(mi, 0));
    float inv = 1.f / sum, lse = row_max[mi] * scale_log2 * ln2 + logf(sum);
    if (sum == 0.f) {
      const bool sees_keys = mask.col_begin(i) < mask.col_end(i);
      inv = sees_keys ? NAN : 0.f;
      lse = sees_keys ? NAN : -INFINITY;
    }
    if (i >= seqlen_q) continue;
    if (p.lse != nullptr && get<1>(coord(mi, 0)) == 0) p.lse[sl.lse_index(p, b, h, i)] = lse;
    Element* o_row = static_cast<Element*>(p.out) + sl.q_row(b, p.o_batch_stride, p.o_row_stride, p.o_head_stride, h, i);
    CUTE_UNROLL
    for (int ni = 0; ni < size<1>(o_rc); ni += 2) {
      const int c = get<1>(ocoord(mi, ni));
      cutlass::Array<Element, 2> pair;
      pair[0] = Element(o_rc(mi, ni) * inv);
      pair[1] = Element(o_rc(mi, ni + 1) * inv);
      *reinterpret_cast<cutlass::Array<Element, 2>*>(o_row + c) = pair;
    }
  }
#endif
}

}  // namespace flashattn::sm90
