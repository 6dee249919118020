// The sm80 backward: probabilities are recomputed from the saved LSE, never
// stored in global memory.
//   row_dot_kernel: d_i = dO_i . O_i (fp32 scratch, O(Sq) per head); zeroes the
//                   fp32 dQ accumulator when there is one;
//   dkdv_kernel:    per (kv head, key tile): dV += P^T dO, dK += dS^T Q over the
//                   visible query tiles of every query head in the group, and
//                   (default mode) dQ += dS K into the fp32 accumulator with
//                   atomics: five tile products per step;
//   dq_convert_blocked_kernel: the accumulator to dQ's dtype and layout.
// Deterministic mode replaces the atomics with dq_kernel, one block per query
// tile over the visible keys: every gradient element is then written by one
// block, bitwise reproducible, at the price of recomputing S and dP there (7
// tile products instead of 5).
#pragma once

#include <cmath>

#include "kernels/common/bwd_common.cuh"
#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"
#include "kernels/common/seqlen.h"
#include "kernels/common/step_walk.h"
#include "kernels/sm80/bwd_traits.h"
#include "kernels/sm80/tile_utils.cuh"

namespace flashattn::sm80 {

using detail::BwdKernelParams;
using detail::lse_log2_of;
using detail::row_dot_kernel;
using detail::row_slot;
using detail::score_grad;

// Adds a pair of adjacent dQ partial sums into the fp32 accumulator (one 8-byte
// atomic on sm90).
__device__ __forceinline__ void atomic_add_pair(float* dst, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(a, b));
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
#endif
}

// The fp32 dQ accumulator's layout on this path: within each (batch, query
// head) run of row slots, the rows of every whole block of 8 keep their 8 x 8
// tiles of columns contiguous (256 B each), so that one warp's pair atomics (8
// rows x 4 lanes x 2 columns) hit two 128-byte lines instead of eight; the last
// rows of a run (seqlen_q % 8) stay row-major. The same set of offsets as the
// row-major layout, so zeroing it row by row is unchanged. Offset of (row r,
// column c) from the start of r's run, head_dim a multiple of 8 (the contract).
__host__ __device__ __forceinline__ int dq_blocked_offset(int r, int c, int head_dim) {
  return (r & ~7) * head_dim + (c & ~7) * 8 + (r & 7) * 8 + (c & 7);
}

// Adds a (kBlockM x kDqChunk) block of dQ partial sums, columns col0.. of the
// fp32 accumulator, where every row and column of the block is in the problem
// (a query tile inside the sequence, and head_dim_qk == kRowStride, the
// kernel's head dim): every address is the thread's base plus a compile-time
// offset, so each atomic is one instruction. The checked form below costs ~15
// per pair (two compares, a branch, a 64-bit address), the larger part of the
// dK/dV step's excess instructions over FlashAttention-2's (ncu,
// bench/results/2026-12-01_h200_ncu_s15_sm80_bwd_vs_fa2.txt).
template <int kRowStride, int kBegin = 0, int kEnd = -1, typename Acc, typename Coord>
__device__ __forceinline__ void atomic_add_dq_whole(const Acc& acc, const Coord& coord, float* rows, int col0) {
  constexpr int kLast = kEnd < 0 ? int(decltype(size(acc))::value) : kEnd;
  const int r0 = get<0>(coord(0)), c0 = col0 + get<1>(coord(0));
  float* const base = rows + dq_blocked_offset(r0, c0, kRowStride);
  CUTE_UNROLL
  for (int e = kBegin; e < kLast; e += 2) {
    // A pair's (row, column) differs from the thread's first by multiples of 8
    // in both (m16n8 atoms), so it lies in the same place of another 8 x 8
    // block: compile-time offsets once unrolled.
    const int off = (get<0>(coord(e)) - get<0>(coord(0))) * kRowStride + (get<1>(coord(e)) - get<1>(coord(0))) * 8;
    atomic_add_pair(base + off, acc(e), acc(e + 1));
  }
}

// gemm_ss (tile_utils.cuh) with `after(Int<k>)` run after k-slice k's MMAs:
// work that should issue spread among a product's instructions. (Fold it into
// gemm_ss as an optional argument when the forward files, which include
// tile_utils.cuh, are recompiled anyway: CI's time holds one set, not both.)
template <typename Acc, typename RA, typename RB, typename SA, typename SB, typename TiledMma, typename CopyA,
          typename CopyB, typename ThrCopyA, typename ThrCopyB, typename After>
__device__ __forceinline__ void gemm_ss_each_slice(Acc& acc, RA& tCrA, RB& tCrB, const SA& tCsA, const SB& tCsB,
                                                   const TiledMma& mma, const CopyA& copy_a, const CopyB& copy_b,
                                                   const ThrCopyA& thr_a, const ThrCopyB& thr_b, After&& after) {
  constexpr int kSlices = decltype(size<2>(tCrA))::value;
  Tensor tCrA_view = thr_a.retile_D(tCrA);
  Tensor tCrB_view = thr_b.retile_D(tCrB);
  cute::copy(copy_a, tCsA(_, _, _0{}), tCrA_view(_, _, _0{}));
  cute::copy(copy_b, tCsB(_, _, _0{}), tCrB_view(_, _, _0{}));
  for_each(make_int_sequence<kSlices>{}, [&](auto k) {
    if constexpr (decltype(k)::value + 1 < kSlices) {
      cute::copy(copy_a, tCsA(_, _, Int<decltype(k)::value + 1>{}), tCrA_view(_, _, Int<decltype(k)::value + 1>{}));
      cute::copy(copy_b, tCsB(_, _, Int<decltype(k)::value + 1>{}), tCrB_view(_, _, Int<decltype(k)::value + 1>{}));
    }
    cute::gemm(mma, tCrA(_, _, k), tCrB(_, _, k), acc);
    after(k);
  });
}

// The same for any tile: rows past valid_rows and columns past head_dim (the
// accumulator's row stride) are skipped; rows from blocked_rows on (the run's
// last seqlen_q % 8) are row-major.
template <typename Acc, typename Coord>
__device__ __forceinline__ void atomic_add_dq_checked(const Acc& acc, const Coord& coord, float* rows, int head_dim,
                                                      int valid_rows, int blocked_rows, int col0) {
  CUTE_UNROLL
  for (int e = 0; e < size(acc); e += 2) {
    const int r = get<0>(coord(e)), c = col0 + get<1>(coord(e));
    const int off = r < blocked_rows ? dq_blocked_offset(r, c, head_dim) : r * head_dim + c;
    if (r < valid_rows && c < head_dim) atomic_add_pair(rows + off, acc(e), acc(e + 1));
  }
}

// dQ = the accumulator (dq_blocked_offset's layout) in dQ's dtype, times the
// softmax scale: a lane group per row (row_lanes of head_dim_qk), 8 columns
// per lane and step, which are contiguous in either part of the layout.
// (The Hopper backward's accumulator is row-major: detail::dq_convert_kernel.)
template <typename Element>
__global__ void dq_convert_blocked_kernel(const __grid_constant__ BwdKernelParams p) {
  const int lanes = detail::row_lanes(p.head_dim_qk);
  const int t = blockIdx.x * blockDim.x + threadIdx.x, sub = threadIdx.x % lanes;
  const int h = blockIdx.y, b = blockIdx.z;
  const detail::SeqLen sl(p, b);
  const int i = t / lanes;
  if (i >= sl.seqlen_q) return;
  const int d = int(p.head_dim_qk);
  const bool blocked = i < (int(sl.seqlen_q) & ~7);
  // Column c % 8 == 0 of row i: blocked, at the row block's start + c * 8 + (i % 8) * 8.
  const float* acc = p.dq_accum + row_slot(p, sl, b, h, blocked ? i & ~7 : i) * d + (blocked ? (i & 7) * 8 : 0);
  const int col_scale = blocked ? 8 : 1;
  auto* dq = static_cast<Element*>(p.dq) + sl.q_row(b, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, h, i);
  for (int c = sub * 8; c < d; c += lanes * 8) {
    const float4 lo = *reinterpret_cast<const float4*>(acc + c * col_scale);
    const float4 hi = *reinterpret_cast<const float4*>(acc + c * col_scale + 4);
    const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    uint4 out;
    Element* oe = reinterpret_cast<Element*>(&out);
    CUTE_UNROLL
    for (int e = 0; e < 8; ++e) oe[e] = Element(v[e] * p.softmax_scale);
    *reinterpret_cast<uint4*>(dq + c) = out;
  }
}

template <typename Traits, bool kMods>
__global__ void __launch_bounds__(Traits::kThreadsKV, 1)
    dkdv_kernel(const __grid_constant__ BwdKernelParams p) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kThreads = Traits::kThreadsKV, kStages = Traits::kStagesQ;
  constexpr int kDqChunk = Traits::kDqChunk;
  constexpr bool kLateLoad = Traits::kLateLoad;
  // P before dP^T (BwdTraits::early_p); those kernels also keep LSE / d at
  // BwdTraits::lse_slot, the LSE already in log2 units (the row-dot pass's).
  constexpr bool kEarlyP = Traits::early_p(kMods);
  // Stages issued at the step's start (hd96-hd256): one barrier a step, not
  // two. The closing one held every warp behind the slowest one's dQ atomics
  // (8.5% of the warps' stall samples at hd128, ncu): +0.5-1.7% without it
  // (kernel notes, sm80 backward v11). With three stages (hd128 on the large
  // tier) each is issued two steps ahead of its use.
  constexpr bool kTopLoad = !kLateLoad && kStages >= 2;
  constexpr int kAhead = kTopLoad ? kStages - 1 : 1;
  static_assert(kAhead <= 2, "stages are issued at most two steps ahead");
  constexpr int kQSize = kBlockM * kHeadDim;  // elements of one Q (or dO) stage
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  extern __shared__ __align__(128) char smem[];
  const int tidx = threadIdx.x;
  const int n_block = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;

  const detail::SeqLen sl(p, b);
  const int seqlen_q = int(sl.seqlen_q), seqlen_k = int(sl.seqlen_k);
  const int c0 = n_block * kBlockN;
  if (c0 >= seqlen_k) return;
  const detail::Mask mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
  const int c_last = min(c0 + kBlockN, seqlen_k) - 1;
  const int r_begin = int(mask.row_begin(c0)), r_end = int(mask.row_end(c_last));
  const int m_block_min = r_begin / kBlockM;
  const int m_block_max = r_end > r_begin ? (r_end + kBlockM - 1) / kBlockM : m_block_min;
  const int group = int(p.heads_q / p.heads_kv);
  const int diag_offset = seqlen_k - seqlen_q;
  // One step per (query head of the group, visible query tile).
  const int n_m = m_block_max - m_block_min, n_steps = n_m * group;
  // The 64-row steps walk them by counters (StepWalk; +1-2% at hd128 / hd256);
  // the 128-row ones (kLateLoad, hd64) divide the step index, as the walker's
  // registers cost them more spills than its instructions save (-1%; kernel
  // notes, sm80 backward v10). The walker is at the top of a step that step,
  // from there on the next one, the step every load_step below is for.
  constexpr bool kWalk = !kLateLoad;
  detail::StepWalk walk(hk * group, m_block_min, m_block_max, m_block_min);
  auto step_head = [&](int s) { return kWalk ? walk.h : hk * group + s / n_m; };
  auto step_row0 = [&](int s) { return (kWalk ? walk.m : m_block_min + s % n_m) * kBlockM; };
  // Two steps ahead the loads keep a walker of their own, at the step the next
  // load_step is for.
  detail::StepWalk load_walk = walk;
  auto load_head = [&](int s) { return kAhead == 2 ? load_walk.h : step_head(s); };
  auto load_row0 = [&](int s) { return kAhead == 2 ? load_walk.m * kBlockM : step_row0(s); };

  using SmemKV = typename Traits::template SmemRows<kBlockN>;
  using SmemQ = typename Traits::template SmemRows<kBlockM>;
  Tensor sK = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), SmemKV{});
  Tensor sV = make_tensor(sK.data() + size(sK), SmemKV{});
  Tensor sQ = make_tensor(sV.data() + size(sV), SmemQ{});  // kStages tiles
  Tensor sdO = make_tensor(sQ.data() + kStages * kQSize, SmemQ{});
  Tensor sP = make_tensor(sdO.data() + kStages * kQSize, typename Traits::SmemLayoutPdS{});
  Tensor sdS = make_tensor(sP.data() + size(sP), typename Traits::SmemLayoutPdS{});
  float* s_lse = reinterpret_cast<float*>((sdS.data() + size(sdS)).get());  // raw LSE, kStages rows
  float* s_d = s_lse + kStages * kBlockM;
  Tensor sQt = make_tensor(sQ.data(), typename Traits::template SmemRowsT<kBlockM>{});
  Tensor sQtNoSwizzle = make_tensor(sQ.data().get(), typename Traits::template SmemRowsTNoSwizzle<kBlockM>{});
  Tensor sdOt = make_tensor(sdO.data(), typename Traits::template SmemRowsT<kBlockM>{});
  Tensor sdOtNoSwizzle = make_tensor(sdO.data().get(), typename Traits::template SmemRowsTNoSwizzle<kBlockM>{});
  Tensor sdSt = make_tensor(sdS.data(), typename Traits::SmemLayoutdSt{});
  Tensor sdStNoSwizzle = make_tensor(sdS.data().get(), typename Traits::SmemLayoutdStNoSwizzle{});
  Tensor sKt = make_tensor(sK.data(), typename Traits::template SmemRowsT<kBlockN>{});
  Tensor sKtNoSwizzle = make_tensor(sK.data().get(), typename Traits::template SmemRowsTNoSwizzle<kBlockN>{});

  // Global -> shared copies.
  typename Traits::template GmemCopyAsync<kThreads> gmem_copy;
  auto gmem_thr = gmem_copy.get_thread_slice(tidx);
  Tensor tKsK = gmem_thr.partition_D(sK);
  Tensor tVsV = gmem_thr.partition_D(sV);
  Tensor tQsQ = gmem_thr.partition_D(sQ);
  Tensor tdOsdO = gmem_thr.partition_D(sdO);
  Tensor tKcK = gmem_thr.partition_S(make_identity_tensor(TileKV{}));
  Tensor tQcQ = gmem_thr.partition_S(make_identity_tensor(TileQ{}));
  Tensor qk_ok = make_tensor<bool>(make_shape(size<2>(tKsK)));
  Tensor v_ok = make_tensor<bool>(make_shape(size<2>(tKsK)));
  CUTE_UNROLL
  for (int k = 0; k < size(qk_ok); ++k) {
    qk_ok(k) = get<1>(tKcK(0, 0, k)) < p.head_dim_qk;
    v_ok(k) = get<1>(tKcK(0, 0, k)) < p.head_dim_v;
  }
  auto rows = [](const void* base, int64_t row0, int64_t rs, auto tile) {
    return make_tensor(make_gmem_ptr(static_cast<const Element*>(base) + row0), tile, make_stride(int(rs), _1{}));
  };
  {
    const int64_t k_off = sl.k_row(b, p.k_batch_stride, p.k_row_stride, p.k_head_stride, hk, c0);
    const int64_t v_off = sl.k_row(b, p.v_batch_stride, p.v_row_stride, p.v_head_stride, hk, c0);
    copy_tile(gmem_copy, gmem_thr.partition_S(rows(p.k, k_off, p.k_row_stride, TileKV{})), tKsK, tKcK, qk_ok, seqlen_k - c0);
    copy_tile(gmem_copy, gmem_thr.partition_S(rows(p.v, v_off, p.v_row_stride, TileKV{})), tVsV, tKcK, v_ok, seqlen_k - c0);
    cute::cp_async_fence();
  }
  // Q, dO, LSE and d of step s into stage `stage`; rows past the sequence read 0.
  auto load_step = [&](int s, int stage) {
    const int h = load_head(s), m0 = load_row0(s);
    const int64_t q_off = sl.q_row(b, p.q_batch_stride, p.q_row_stride, p.q_head_stride, h, m0);
    const int64_t do_off = sl.q_row(b, p.do_batch_stride, p.do_row_stride, p.do_head_stride, h, m0);
    copy_tile(gmem_copy, gmem_thr.partition_S(rows(p.q, q_off, p.q_row_stride, TileQ{})),
              stage_at(tQsQ, stage * kQSize), tQcQ, qk_ok, seqlen_q - m0);
    copy_tile(gmem_copy, gmem_thr.partition_S(rows(p.dout, do_off, p.do_row_stride, TileQ{})),
              stage_at(tdOsdO, stage * kQSize), tQcQ, v_ok, seqlen_q - m0);
    if (tidx < kBlockM) {
      const int i = m0 + tidx;
      const bool in = i < seqlen_q;
      if constexpr (kEarlyP) {
        const int64_t slot = in ? row_slot(p, sl, b, h, i) : 0;
        const int at = stage * kBlockM + Traits::lse_slot(tidx);
        cp_async_zfill<4>(s_lse + at, p.lse_log2 + slot, in);
        cp_async_zfill<4>(s_d + at, p.row_dot + slot, in);
      } else {
        cp_async_zfill<4>(s_lse + stage * kBlockM + tidx, in ? p.lse + sl.lse_index(p, b, h, i) : p.lse, in);
        cp_async_zfill<4>(s_d + stage * kBlockM + tidx, in ? p.row_dot + row_slot(p, sl, b, h, i) : p.row_dot, in);
      }
    }
    cute::cp_async_fence();
    if constexpr (kAhead == 2) load_walk.next();
  };
  if (n_steps > 0) load_step(0, 0);
  if (kAhead == 2 && n_steps > 1) load_step(1, 1);

  // S^T and dP^T.
  typename Traits::TiledMmaSdP mma_sdp;
  auto thr_sdp = mma_sdp.get_thread_slice(tidx);
  Tensor tSrK = thr_sdp.partition_fragment_A(sK);
  Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);
  Tensor tdPrV = thr_sdp.partition_fragment_A(sV);
  Tensor tdPrdO = thr_sdp.partition_fragment_B(sdO);
  auto copy_a_sdp = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, mma_sdp);
  auto thr_a_sdp = copy_a_sdp.get_thread_slice(tidx);
  auto copy_b_sdp = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, mma_sdp);
  auto thr_b_sdp = copy_b_sdp.get_thread_slice(tidx);
  Tensor tSsK = thr_a_sdp.partition_S(sK);
  Tensor tSsQ = thr_b_sdp.partition_S(sQ);
  Tensor tdPsV = thr_a_sdp.partition_S(sV);
  Tensor tdPsdO = thr_b_sdp.partition_S(sdO);
  auto copy_c = make_tiled_copy_C(typename Traits::SmemCopyAtomStore{}, mma_sdp);
  auto thr_c = copy_c.get_thread_slice(tidx);
  Tensor tPsP = thr_c.partition_D(sP);
  Tensor tdSsdS = thr_c.partition_D(sdS);
  // (key row, query col) of every S^T element this thread holds.
  Tensor tScS = thr_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{}));
  Tensor coord = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
  const int lse_slot0 = kEarlyP ? Traits::lse_slot(get<1>(coord(0, 0))) : 0;  // this thread's LSE / d run

  // dV += P^T dO and dK += dS^T Q.
  typename Traits::TiledMmadKV mma_dkv;
  auto thr_dkv = mma_dkv.get_thread_slice(tidx);
  Tensor tdVrP = thr_dkv.partition_fragment_A(sP);
  Tensor tdVrdOt = thr_dkv.partition_fragment_B(sdOtNoSwizzle);
  Tensor tdKrdS = thr_dkv.partition_fragment_A(sdS);
  Tensor tdKrQt = thr_dkv.partition_fragment_B(sQtNoSwizzle);
  Tensor acc_dk = partition_fragment_C(mma_dkv, TileKV{});
  Tensor acc_dv = partition_fragment_C(mma_dkv, TileKV{});
  clear(acc_dk);
  clear(acc_dv);
  auto copy_a_dkv = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, mma_dkv);
  auto thr_a_dkv = copy_a_dkv.get_thread_slice(tidx);
  auto copy_bt_dkv = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, mma_dkv);
  auto thr_bt_dkv = copy_bt_dkv.get_thread_slice(tidx);
  Tensor tdVsP = thr_a_dkv.partition_S(sP);
  Tensor tdVsdOt = thr_bt_dkv.partition_S(sdOt);
  Tensor tdKsdS = thr_a_dkv.partition_S(sdS);
  Tensor tdKsQt = thr_bt_dkv.partition_S(sQt);

  // dQ += dS K (atomic mode): dS read back transposed from dS^T, K as K^T.
  typename Traits::TiledMmadQ mma_dq;
  auto thr_dq = mma_dq.get_thread_slice(tidx);
  auto copy_at_dq = make_tiled_copy_A(typename Traits::SmemCopyAtomTransposed{}, mma_dq);
  auto thr_at_dq = copy_at_dq.get_thread_slice(tidx);
  auto copy_bt_dq = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, mma_dq);
  auto thr_bt_dq = copy_bt_dq.get_thread_slice(tidx);
  Tensor tdQsdS = thr_at_dq.partition_S(sdSt);
  Tensor tdQrdS = thr_dq.partition_fragment_A(sdStNoSwizzle);
  // (query row, column) of every dQ-chunk element this thread holds.
  Tensor tdQcdQ = thr_dq.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kDqChunk>>{}));

  int stage3 = 0;  // step % 3 with three stages
  for (int step = 0; step < n_steps; ++step) {
    const int stage = kStages == 3 ? stage3 : kStages == 2 ? step & 1 : 0;
    const int h = step_head(step), m0 = step_row0(step);
    if constexpr (kWalk) walk.next();
    // kTopLoad: the next stage is issued after this step's opening barrier,
    // which every warp reaches only once done with the last step, so that
    // barrier also orders this step's shared-memory writes (the stage the last
    // step read, P^T, dS^T) after the last step's reads, and the step needs no
    // closing one. Two ahead, the next step's copies may still be in flight.
    if (kAhead == 2 && step + 1 < n_steps) cute::cp_async_wait<1>();
    else cute::cp_async_wait<0>();
    __syncthreads();
    if (kTopLoad && step + kAhead < n_steps)  // lands while this step (and the next) compute
      load_step(step + kAhead, kAhead == 1 ? stage ^ 1 : stage == 0 ? 2 : stage - 1);
    const int q_stage = stage * kQSize;

    Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
    clear(acc_s);
    clear(acc_dp);
    gemm_ss(acc_s, tSrK, tSrQ, tSsK, stage_at(tSsQ, q_stage), mma_sdp, copy_a_sdp, copy_b_sdp, thr_a_sdp, thr_b_sdp);
    if constexpr (!kEarlyP) {
      gemm_ss(acc_dp, tdPrV, tdPrdO, tdPsV, stage_at(tdPsdO, q_stage), mma_sdp, copy_a_sdp, copy_b_sdp, thr_a_sdp, thr_b_sdp);
      // kLateLoad: the next step's stage issued here instead, its address math
      // beside the products. The other stage was last read by the previous step,
      // which ended at a barrier.
      if (kLateLoad && step + 1 < n_steps) load_step(step + 1, stage ^ 1);
    }

    const float slope = (kMods && p.alibi_slopes) ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.f;
    const bool need_mask = !mask.tile_full(m0, min(m0 + kBlockM, seqlen_q), c0, c0 + kBlockN);
    const float* lse_row = s_lse + stage * kBlockM;
    const float* d_row = s_d + stage * kBlockM;
    Tensor s = make_tensor(acc_s.data(), acc_rowcol(acc_s.layout()));
    Tensor dp = make_tensor(acc_dp.data(), acc_rowcol(acc_dp.layout()));
    // Without score modifiers, masked scores become -inf here, on the tiles that
    // cut the mask only, so the per-score passes below do no index math.
    if (!kMods && need_mask) {
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(s); ++ni) {
        const int i = m0 + get<1>(coord(0, ni));
        const int lo = int(mask.col_begin(i)), hi = int(mask.col_end(i));
        CUTE_UNROLL
        for (int mi = 0; mi < size<0>(s); ++mi) {
          const int j = c0 + get<0>(coord(mi, ni));
          if (j < lo || j >= hi) s(mi, ni) = -INFINITY;
        }
      }
    }
    // P^T and dS^T go through shared memory: the dK/dV products need them as
    // A operands split differently across warps than the S^T product made them.
    if constexpr (kEarlyP) {
      // P from S^T alone, before the dP^T product: its exponentials then issue
      // among that product's loads and MMAs. It is stored after the product,
      // since the compiler keeps shared-memory stores and ldmatrix in order.
      // This thread's columns' LSE and d, contiguous at lse_slot (rows past the
      // sequence read 0: their Q and dO rows are 0 as well, so P = 1 there
      // meets zero dO and dP, and adds nothing).
      static_assert(decltype(size<1>(s))::value == Traits::kColsPerThread, "one lse_slot run per thread");
      const float4* lse4 = reinterpret_cast<const float4*>(lse_row + lse_slot0);
      const float4* d4 = reinterpret_cast<const float4*>(d_row + lse_slot0);
      CUTE_UNROLL
      for (int g = 0; g < size<1>(s) / 4; ++g) {
        const float4 l = lse4[g];
        const float lse2[4] = {l.x, l.y, l.z, l.w};
        CUTE_UNROLL
        for (int k = 0; k < 4; ++k) {
          CUTE_UNROLL
          for (int mi = 0; mi < size<0>(s); ++mi) s(mi, 4 * g + k) = exp2f(fmaf(s(mi, 4 * g + k), p.scale_log2, -lse2[k]));
        }
      }
      gemm_ss(acc_dp, tdPrV, tdPrdO, tdPsV, stage_at(tdPsdO, q_stage), mma_sdp, copy_a_sdp, copy_b_sdp, thr_a_sdp, thr_b_sdp);
      cute::copy(copy_c, thr_c.retile_S(convert_fragment<Element>(acc_s)), tPsP);
      if (kLateLoad && step + 1 < n_steps) load_step(step + 1, stage ^ 1);  // as above
      CUTE_UNROLL
      for (int g = 0; g < size<1>(s) / 4; ++g) {
        const float4 dd = d4[g];
        const float d[4] = {dd.x, dd.y, dd.z, dd.w};
        CUTE_UNROLL
        for (int k = 0; k < 4; ++k) {
          CUTE_UNROLL
          for (int mi = 0; mi < size<0>(s); ++mi)
            dp(mi, 4 * g + k) = s(mi, 4 * g + k) * (dp(mi, 4 * g + k) - d[k]);  // score_grad's dS
        }
      }
    } else {
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(s); ++ni) {
        const int il = get<1>(coord(0, ni)), i = m0 + il;
        const float lse2 = i < seqlen_q ? lse_log2_of(lse_row[il]) : INFINITY, d = d_row[il];
        const int lo = need_mask ? int(mask.col_begin(i)) : 0;
        const int hi = need_mask ? int(mask.col_end(i)) : seqlen_k;
        CUTE_UNROLL
        for (int mi = 0; mi < size<0>(s); ++mi) {
          const int j = c0 + get<0>(coord(mi, ni));
          const bool visible = j >= lo && j < hi;
          const bool keep = kMods && p.dropout_p > 0.f ? p.rng.keep(b, h, i, j) : true;
          float pv, ds;
          score_grad<kMods>(p, s(mi, ni), dp(mi, ni), lse2, d, slope, i, j, diag_offset, visible, keep, pv, ds);
          s(mi, ni) = pv;
          dp(mi, ni) = ds;
        }
      }
      cute::copy(copy_c, thr_c.retile_S(convert_fragment<Element>(acc_s)), tPsP);
    }
    cute::copy(copy_c, thr_c.retile_S(convert_fragment<Element>(acc_dp)), tdSsdS);
    __syncthreads();
    gemm_ss(acc_dv, tdVrP, tdVrdOt, tdVsP, stage_at(tdVsdOt, q_stage), mma_dkv, copy_a_dkv, copy_bt_dkv, thr_a_dkv, thr_bt_dkv);
    // kDkBetween (two dQ chunks, hd256): dK's product after the first chunk, with
    // that chunk's atomics spread over its k-slices: issued as one burst, the
    // second chunk's first ldmatrix waited on their source registers (ncu,
    // session 28: 2.2% of the samples).
    constexpr bool kDkBetween = !kLateLoad && kHeadDim / kDqChunk == 2;
    if constexpr (!kLateLoad && !kDkBetween)
      gemm_ss(acc_dk, tdKrdS, tdKrQt, tdKsdS, stage_at(tdKsQt, q_stage), mma_dkv, copy_a_dkv, copy_bt_dkv, thr_a_dkv, thr_bt_dkv);
    // kLateLoad (128-row steps): dQ and its atomics before dK, so that the atomics
    // leave under dK's product (sm80 backward v8). dk_done: dK's product has run.
    bool dk_done = !kLateLoad && !kDkBetween;
    if (p.dq_accum != nullptr) {
      // dQ(m0 rows) += dS K, kDqChunk columns at a time, added into fp32 with atomics.
      float* dq_rows = p.dq_accum + row_slot(p, sl, b, h, m0) * p.head_dim_qk;
      const bool whole = m0 + kBlockM <= seqlen_q && p.head_dim_qk == kHeadDim;
      for_each(make_int_sequence<kHeadDim / kDqChunk>{}, [&](auto chunk) {
        using ChunkTile = Shape<Int<kDqChunk>, Int<kBlockN>>;
        Tensor tdQrKt = thr_dq.partition_fragment_B(local_tile(sKtNoSwizzle, ChunkTile{}, make_coord(chunk, _0{})));
        Tensor tdQsKt = thr_bt_dq.partition_S(local_tile(sKt, ChunkTile{}, make_coord(chunk, _0{})));
        Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kDqChunk>>{});
        clear(acc_dq);
        gemm_ss(acc_dq, tdQrdS, tdQrKt, tdQsdS, tdQsKt, mma_dq, copy_at_dq, copy_bt_dq, thr_at_dq, thr_bt_dq);
        constexpr int col0 = decltype(chunk)::value * kDqChunk;
        // dK's product with this chunk's whole-tile atomics spread over its
        // k-slices, so that they leave under it rather than as one burst whose
        // source registers the next product's first loads wait for: the one
        // chunk of the 128-row steps (sm80 backward v18), the first of hd256's
        // two (v20). A tile cut by the sequence end takes the checked atomics;
        // its dK follows them between hd256's chunks, after the loop otherwise.
        if constexpr ((kEarlyP && kLateLoad && kHeadDim == kDqChunk) || (kDkBetween && decltype(chunk)::value == 0)) {
          if (whole) {
            constexpr int kSlices = decltype(size<2>(tdKrdS))::value;
            constexpr int kPer = int(decltype(size(acc_dq))::value) / kSlices;
            static_assert(kPer % 2 == 0, "pairs of dQ atomics per dK k-slice");
            gemm_ss_each_slice(acc_dk, tdKrdS, tdKrQt, tdKsdS, stage_at(tdKsQt, q_stage), mma_dkv, copy_a_dkv,
                               copy_bt_dkv, thr_a_dkv, thr_bt_dkv, [&](auto slice) {
                                 constexpr int k = decltype(slice)::value;
                                 atomic_add_dq_whole<kHeadDim, k * kPer, (k + 1) * kPer>(acc_dq, tdQcdQ, dq_rows, col0);
                               });
            dk_done = true;
          } else {
            atomic_add_dq_checked(acc_dq, tdQcdQ, dq_rows, int(p.head_dim_qk), seqlen_q - m0, (seqlen_q & ~7) - m0, col0);
            if constexpr (kDkBetween) {
              gemm_ss(acc_dk, tdKrdS, tdKrQt, tdKsdS, stage_at(tdKsQt, q_stage), mma_dkv, copy_a_dkv, copy_bt_dkv,
                      thr_a_dkv, thr_bt_dkv);
              dk_done = true;
            }
          }
        } else {
          if (whole) atomic_add_dq_whole<kHeadDim>(acc_dq, tdQcdQ, dq_rows, col0);
          else atomic_add_dq_checked(acc_dq, tdQcdQ, dq_rows, int(p.head_dim_qk), seqlen_q - m0, (seqlen_q & ~7) - m0, col0);
        }
      });
    }
    if (!dk_done)
      gemm_ss(acc_dk, tdKrdS, tdKrQt, tdKsdS, stage_at(tdKsQt, q_stage), mma_dkv, copy_a_dkv, copy_bt_dkv, thr_a_dkv, thr_bt_dkv);
    if constexpr (!kTopLoad) __syncthreads();  // this stage and P^T / dS^T are rewritten next
    if (kStages == 1 && step + 1 < n_steps) load_step(step + 1, 0);
    if constexpr (kStages == 3) stage3 = stage3 == 2 ? 0 : stage3 + 1;
  }

  // Epilogue: dK and dV through shared memory (K's and V's space) to global. A
  // block no query sees never waited for its K/V copies: let them land first.
  // dS left the softmax scale out (score_grad): dK takes it here.
  CUTE_UNROLL
  for (int e = 0; e < size(acc_dk); ++e) acc_dk(e) *= p.softmax_scale;
  Tensor rdK = convert_fragment<Element>(acc_dk);
  Tensor rdV = convert_fragment<Element>(acc_dv);
  cute::cp_async_wait<0>();
  __syncthreads();
  auto copy_c_dkv = make_tiled_copy_C(typename Traits::SmemCopyAtomStore{}, mma_dkv);
  auto thr_c_dkv = copy_c_dkv.get_thread_slice(tidx);
  cute::copy(copy_c_dkv, thr_c_dkv.retile_S(rdK), thr_c_dkv.partition_D(sK));
  cute::copy(copy_c_dkv, thr_c_dkv.retile_S(rdV), thr_c_dkv.partition_D(sV));
  __syncthreads();
  typename Traits::template GmemCopyStore<kThreads> gmem_store;
  auto store_thr = gmem_store.get_thread_slice(tidx);
  auto write = [&](auto& s_tile, void* base, int64_t off, int64_t rs, int d_valid) {
    Tensor g = make_tensor(make_gmem_ptr(static_cast<Element*>(base) + off), TileKV{}, make_stride(int(rs), _1{}));
    Tensor src = store_thr.partition_S(s_tile);
    Tensor dst = store_thr.partition_D(g);
    Tensor reg = make_tensor<Element>(shape(dst));
    cute::copy(gmem_store, src, reg);
    CUTE_UNROLL
    for (int m = 0; m < size<1>(dst); ++m)
      if (get<0>(tKcK(0, m, 0)) < seqlen_k - c0) {
        CUTE_UNROLL
        for (int k = 0; k < size<2>(dst); ++k)
          if (get<1>(tKcK(0, m, k)) < d_valid) cute::copy(gmem_store, reg(_, m, k), dst(_, m, k));
      }
  };
  write(sK, p.dk, sl.k_row(b, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, hk, c0), p.dk_row_stride, int(p.head_dim_qk));
  write(sV, p.dv, sl.k_row(b, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, hk, c0), p.dv_row_stride, int(p.head_dim_v));
}

template <typename Traits, bool kMods>
__global__ void __launch_bounds__(Traits::kThreadsQ, 1)
    dq_kernel(const __grid_constant__ BwdKernelParams p) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockMdQ, kBlockN = Traits::kBlockNdQ, kHeadDim = Traits::kHeadDim;
  constexpr int kThreads = Traits::kThreadsQ;
  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  extern __shared__ __align__(128) char smem[];
  const int tidx = threadIdx.x;
  const bool reverse = p.window_right >= 0;
  const int m_block = reverse ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / int(p.heads_q / p.heads_kv);

  const detail::SeqLen sl(p, b);
  const int seqlen_q = int(sl.seqlen_q), seqlen_k = int(sl.seqlen_k);
  const int m0 = m_block * kBlockM;
  if (m0 >= seqlen_q) return;
  const detail::Mask mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
  const int m_end = min(m0 + kBlockM, seqlen_q);
  const int c_begin = int(mask.col_begin(m0)), c_end = int(mask.col_end(m_end - 1));
  const int n_block_min = c_begin / kBlockN;
  const int n_block_max = c_end > c_begin ? (c_end + kBlockN - 1) / kBlockN : n_block_min;
  const float slope = (kMods && p.alibi_slopes) ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.f;
  const int diag_offset = seqlen_k - seqlen_q;

  using SmemQ = typename Traits::template SmemRows<kBlockM>;
  using SmemKV = typename Traits::template SmemRows<kBlockN>;
  Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), SmemQ{});
  Tensor sdO = make_tensor(sQ.data() + size(sQ), SmemQ{});
  Tensor sK = make_tensor(sdO.data() + size(sdO), SmemKV{});
  Tensor sV = make_tensor(sK.data() + size(sK), SmemKV{});
  Tensor sKt = make_tensor(sK.data(), typename Traits::template SmemRowsT<kBlockN>{});
  Tensor sKtNoSwizzle = make_tensor(sK.data().get(), typename Traits::template SmemRowsTNoSwizzle<kBlockN>{});

  typename Traits::template GmemCopyAsync<kThreads> gmem_copy;
  auto gmem_thr = gmem_copy.get_thread_slice(tidx);
  Tensor tQsQ = gmem_thr.partition_D(sQ);
  Tensor tdOsdO = gmem_thr.partition_D(sdO);
  Tensor tKsK = gmem_thr.partition_D(sK);
  Tensor tVsV = gmem_thr.partition_D(sV);
  Tensor tQcQ = gmem_thr.partition_S(make_identity_tensor(TileQ{}));
  Tensor tKcK = gmem_thr.partition_S(make_identity_tensor(TileKV{}));
  Tensor qk_ok = make_tensor<bool>(make_shape(size<2>(tQsQ)));
  Tensor v_ok = make_tensor<bool>(make_shape(size<2>(tQsQ)));
  CUTE_UNROLL
  for (int k = 0; k < size(qk_ok); ++k) {
    qk_ok(k) = get<1>(tQcQ(0, 0, k)) < p.head_dim_qk;
    v_ok(k) = get<1>(tQcQ(0, 0, k)) < p.head_dim_v;
  }
  auto rows = [](const void* base, int64_t row0, int64_t rs, auto tile) {
    return make_tensor(make_gmem_ptr(static_cast<const Element*>(base) + row0), tile, make_stride(int(rs), _1{}));
  };
  copy_tile(gmem_copy, gmem_thr.partition_S(rows(p.q, sl.q_row(b, p.q_batch_stride, p.q_row_stride, p.q_head_stride, h, m0), p.q_row_stride, TileQ{})),
            tQsQ, tQcQ, qk_ok, seqlen_q - m0);
  copy_tile(gmem_copy, gmem_thr.partition_S(rows(p.dout, sl.q_row(b, p.do_batch_stride, p.do_row_stride, p.do_head_stride, h, m0), p.do_row_stride, TileQ{})),
            tdOsdO, tQcQ, v_ok, seqlen_q - m0);
  cute::cp_async_fence();

  typename Traits::TiledMmaQ tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(tidx);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);
  Tensor tSrK = thr_mma.partition_fragment_B(sK);
  Tensor tdPrdO = thr_mma.partition_fragment_A(sdO);
  Tensor tdPrV = thr_mma.partition_fragment_B(sV);
  Tensor tdQrKt = thr_mma.partition_fragment_B(sKtNoSwizzle);
  Tensor acc_dq = partition_fragment_C(tiled_mma, TileQ{});
  clear(acc_dq);
  auto copy_a = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto thr_a = copy_a.get_thread_slice(tidx);
  auto copy_b = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto thr_b = copy_b.get_thread_slice(tidx);
  auto copy_bt = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma);
  auto thr_bt = copy_bt.get_thread_slice(tidx);
  Tensor tSsQ = thr_a.partition_S(sQ);
  Tensor tSsK = thr_b.partition_S(sK);
  Tensor tdPsdO = thr_a.partition_S(sdO);
  Tensor tdPsV = thr_b.partition_S(sV);
  Tensor tdQsKt = thr_bt.partition_S(sKt);

  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  Tensor coord = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
  constexpr int kRows = decltype(size<0>(coord))::value;
  float lse2[kRows], dvals[kRows];
  CUTE_UNROLL
  for (int mi = 0; mi < kRows; ++mi) {
    const int i = m0 + get<0>(coord(mi, 0));
    const bool in = i < seqlen_q;
    lse2[mi] = in ? lse_log2_of(p.lse[sl.lse_index(p, b, h, i)]) : INFINITY;
    dvals[mi] = in ? p.row_dot[row_slot(p, sl, b, h, i)] : 0.f;
  }

  for (int n_block = n_block_min; n_block < n_block_max; ++n_block) {
    const int n0 = n_block * kBlockN;
    copy_tile(gmem_copy, gmem_thr.partition_S(rows(p.k, sl.k_row(b, p.k_batch_stride, p.k_row_stride, p.k_head_stride, hk, n0), p.k_row_stride, TileKV{})),
              tKsK, tKcK, qk_ok, seqlen_k - n0);
    copy_tile(gmem_copy, gmem_thr.partition_S(rows(p.v, sl.k_row(b, p.v_batch_stride, p.v_row_stride, p.v_head_stride, hk, n0), p.v_row_stride, TileKV{})),
              tVsV, tKcK, v_ok, seqlen_k - n0);
    cute::cp_async_fence();
    cute::cp_async_wait<0>();
    __syncthreads();

    Tensor acc_s = partition_fragment_C(tiled_mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
    Tensor acc_dp = partition_fragment_C(tiled_mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
    clear(acc_s);
    clear(acc_dp);
    gemm_ss(acc_s, tSrQ, tSrK, tSsQ, tSsK, tiled_mma, copy_a, copy_b, thr_a, thr_b);
    gemm_ss(acc_dp, tdPrdO, tdPrV, tdPsdO, tdPsV, tiled_mma, copy_a, copy_b, thr_a, thr_b);

    const bool need_mask = !mask.tile_full(m0, m_end, n0, n0 + kBlockN);
    Tensor s = make_tensor(acc_s.data(), acc_rowcol(acc_s.layout()));
    Tensor dp = make_tensor(acc_dp.data(), acc_rowcol(acc_dp.layout()));
    CUTE_UNROLL
    for (int mi = 0; mi < kRows; ++mi) {
      const int i = m0 + get<0>(coord(mi, 0));
      const int lo = need_mask ? int(mask.col_begin(i)) : 0;
      const int hi = need_mask ? int(mask.col_end(i)) : seqlen_k;
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(s); ++ni) {
        const int j = n0 + get<1>(coord(mi, ni));
        const bool visible = j >= lo && j < hi;
        if (!kMods && !visible) s(mi, ni) = -INFINITY;  // score_grad's mask without modifiers
        const bool keep = kMods && p.dropout_p > 0.f ? p.rng.keep(b, h, i, j) : true;
        float pv, ds;
        score_grad<kMods>(p, s(mi, ni), dp(mi, ni), lse2[mi], dvals[mi], slope, i, j, diag_offset,
                          visible, keep, pv, ds);
        dp(mi, ni) = ds;
      }
    }
    Tensor rdS = convert_fragment<Element>(acc_dp);
    Tensor tdQrdS = make_tensor(rdS.data(), acc_as_a(rdS.layout()));
    gemm_rs(acc_dq, tdQrdS, tdQrKt, tdQsKt, tiled_mma, copy_bt, thr_bt);
    __syncthreads();  // K and V are overwritten next step
  }

  // Epilogue: dQ through shared memory (Q's space) to global. A block that sees
  // no key never waited for its Q/dO copies: let them land first. dS left the
  // softmax scale out (score_grad): dQ takes it here.
  CUTE_UNROLL
  for (int e = 0; e < size(acc_dq); ++e) acc_dq(e) *= p.softmax_scale;
  Tensor rdQ = convert_fragment<Element>(acc_dq);
  cute::cp_async_wait<0>();
  __syncthreads();
  auto copy_c = make_tiled_copy_C(typename Traits::SmemCopyAtomStore{}, tiled_mma);
  auto thr_c = copy_c.get_thread_slice(tidx);
  cute::copy(copy_c, thr_c.retile_S(rdQ), thr_c.partition_D(sQ));
  __syncthreads();
  typename Traits::template GmemCopyStore<kThreads> gmem_store;
  auto store_thr = gmem_store.get_thread_slice(tidx);
  Tensor g = make_tensor(make_gmem_ptr(static_cast<Element*>(p.dq) + sl.q_row(b, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, h, m0)),
                         TileQ{}, make_stride(int(p.dq_row_stride), _1{}));
  Tensor src = store_thr.partition_S(sQ);
  Tensor dst = store_thr.partition_D(g);
  Tensor reg = make_tensor<Element>(shape(dst));
  cute::copy(gmem_store, src, reg);
  CUTE_UNROLL
  for (int m = 0; m < size<1>(dst); ++m)
    if (get<0>(tQcQ(0, m, 0)) < seqlen_q - m0) {
      CUTE_UNROLL
      for (int k = 0; k < size<2>(dst); ++k)
        if (get<1>(tQcQ(0, m, k)) < p.head_dim_qk) cute::copy(gmem_store, reg(_, m, k), dst(_, m, k));
    }
}

}  // namespace flashattn::sm80
