// The Hopper backward kernel (sm90a): dK, dV and the fp32 dQ accumulator of one
// (kv head, key tile) per block (128 keys; 64 at hd256); probabilities
// recomputed from the LSE.
//   producer warp: TMA copies of K and V (once) and of the Q and dO tiles of
//     every step into a ring of stages; its lanes copy the steps' LSE (in log2
//     units) and d_i = dO_i . O_i beside them;
//   consumer warp groups (64 keys each; at hd256 the two groups split the
//     products of the 64 keys instead, kByProduct): the five products of
//     bwd_traits.h, the score gradient in registers, dS^T through shared memory
//     for dQ, and dQ's partial sums added to global memory by a TMA reduce-add.
// The row-dot pre-pass and the dQ conversion are the kernels of
// kernels/common/bwd_common.cuh.
#pragma once

#include <cmath>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "kernels/common/bwd_common.cuh"
#include "kernels/common/cp_async.cuh"
#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/seqlen.h"
#include "kernels/common/step_walk.h"
#include "kernels/sm90/bwd_order.h"
#include "kernels/sm90/bwd_scores.cuh"
#include "kernels/sm90/bwd_stores.cuh"
#include "kernels/sm90/bwd_switches.h"
#include "kernels/sm90/bwd_traits.h"
#include "kernels/sm90/dq_layout.h"
#include "kernels/sm90/mma_utils.cuh"

#ifndef FLASHATTN_SM90_BWD_ATOMIC_DQ
#define FLASHATTN_SM90_BWD_ATOMIC_DQ 0
#endif
// The dispatch sends deterministic calls to the plain kernels where dQ is apart
// (bwd_switches.h), which it cannot be with atomic adds: one or the other.
#if FLASHATTN_SM90_BWD_ATOMIC_DQ && FLASHATTN_SM90_BWD_DQ_APART
#error "FLASHATTN_SM90_BWD_ATOMIC_DQ and FLASHATTN_SM90_BWD_DQ_APART are alternatives: set one"
#endif

namespace flashattn::sm90 {

using detail::BwdKernelParams;

// FLASHATTN_SM90_BWD_ATOMIC_DQ (an A/B switch, 0 by default; kernel_notes, sm90
// backward v33): dQ's partial sums added from the accumulator's registers by vector
// atomics (RED.F32x2) instead of shared-memory staging and a TMA reduce-add, in the
// kernels without score modifiers (the deterministic mode is a kMods kernel: it
// orders reduce-adds). 1: by product (hd192, hd256); 3: every head dim (the
// accumulator then in plain column order); 2 and 4: the same with the adds left
// out, timing probes only (dQ is wrong).
template <typename Traits, bool kMods>
inline constexpr bool kAtomicDq =
    !kMods && (FLASHATTN_SM90_BWD_ATOMIC_DQ >= 3 || (FLASHATTN_SM90_BWD_ATOMIC_DQ >= 1 && Traits::kByProduct));
inline constexpr bool kAtomicDqAdds = FLASHATTN_SM90_BWD_ATOMIC_DQ % 2 == 1;
// dQ apart (bwd_switches.h): the plain hd192 / hd256 kernels compute dK and dV only, and
// dQ comes from a kernel of its own (bwd_dq_kernel.cuh), which recomputes S and
// dP per query tile instead of reduce-adding 64 KiB of fp32 per step into L2.
// The kMods kernels (softcap, ALiBi) keep the fused dQ.
template <typename Traits, bool kMods>
inline constexpr bool kDqApart = bwd_dq_apart(Traits::kHeadDim) && !kMods && Traits::kByProduct && !kAtomicDq<Traits, kMods>;
// dQ apart, back to back (v38): each group issues the next step's S^T / dP^T
// right behind this step's dV / dK and waits for them at the next step's start,
// instead of waiting for dV / dK alone before it issues the next product (the
// wait that held 13.7% of the key-block kernel's stall samples, session 37);
// the stage dV / dK read goes back to the producer as soon as they are done.
#ifndef FLASHATTN_SM90_BWD_APART_B2B
#define FLASHATTN_SM90_BWD_APART_B2B 0
#endif
template <typename Traits, bool kMods>
inline constexpr bool kApartB2B = kDqApart<Traits, kMods> && FLASHATTN_SM90_BWD_APART_B2B != 0;
// = 2 also reads the thread's LSE (group 0) or d_i (group 1) values of the step
// into registers before it waits for S^T / dP^T, so their shared-memory latency
// hides under the product (short-scoreboard stalls on them: 8.8% of the samples).
template <typename Traits, bool kMods>
inline constexpr bool kApartRowRegs = kApartB2B<Traits, kMods> && FLASHATTN_SM90_BWD_APART_B2B >= 2;
// hd128's by-keys kernel (plain scores) reads its step's LSE into registers once Q's stage
// is in, before S^T is issued, and d_i before it waits for dP^T (v41): read from shared
// memory at their use, the exp2 argument's fma waited on them behind the products'
// shared-memory traffic (5.5% of the kernel's stall samples, ncu, session 40; v40's
// reads just before the S^T wait, which by then no longer waits, gained nothing).
// FLASHATTN_SM90_BWD_ROW_REGS=0 restores the reads at their use, for A/B runs.
#ifndef FLASHATTN_SM90_BWD_ROW_REGS
#define FLASHATTN_SM90_BWD_ROW_REGS 1
#endif
template <typename Traits, bool kMods>
inline constexpr bool kKeysRowRegs =
    !Traits::kByProduct && Traits::kHeadDim == 128 && !kMods && FLASHATTN_SM90_BWD_ROW_REGS != 0;

// A step's dQ (a thread's accumulator acc, (row, column) of each element in rc)
// added to the fp32 accumulator tile (rows kLd floats apart), two columns per
// vector atomic; rows from rows_left on (past the sequence) left out.
template <int kLd, typename Acc, typename Coord>
__device__ __forceinline__ void add_dq_atomic(const Acc& acc, const Coord& rc, float* tile, int rows_left) {
  CUTE_UNROLL
  for (int e = 0; e < size(acc); e += 2) {
    const int r = get<0>(rc(e)), c = get<1>(rc(e));
    if (kAtomicDqAdds && r < rows_left)
      atomicAdd(reinterpret_cast<float2*>(tile + r * kLd + c), make_float2(acc(e), acc(e + 1)));
  }
}

template <typename Traits>
struct BwdArgs {
  BwdKernelParams p;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaQ tma_do;
  typename Traits::TmaKV tma_k;
  typename Traits::TmaKV tma_v;
  typename Traits::TmadQ tma_dq;
};

// Causal / window masks, GQA, packed batches; kMods: softcap, ALiBi and any
// scale (ScoreMods) and the deterministic mode (order_wait), a kernel of its
// own so that the plain one keeps its code (as a runtime branch in one kernel
// the plain path measured 1-10% slower: kernel_notes, sm90 backward v17).
// Dropout runs on the sm80 backward.
template <typename Traits, bool kMods>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    bwd_kernel(const __grid_constant__ BwdArgs<Traits> args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Element = typename Traits::Element;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kStages = Traits::kStages, kDqCols = Traits::kDqCols;
  constexpr bool kSplitN = Traits::kDqSplitN;
  constexpr bool kDsFirst = Traits::kDsFirst;
  // dQ by atomics (kAtomicDq above): by product, every consumer thread hands
  // the Q / dO stage back as soon as its products have read it.
  constexpr bool kAtomic = kAtomicDq<Traits, kMods>;
  // dQ apart (kDqApart above): no dQ product, staging or dS^T for it here.
  constexpr bool kApart = kDqApart<Traits, kMods>;
  constexpr bool kStaged = !kAtomic && !kApart;  // dQ through shared memory and a TMA reduce-add
  constexpr int kEmptyArrivals = kStaged ? Traits::kEmptyArrivals : Traits::kConsumerThreads;
  const BwdKernelParams& p = args.p;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);

  // The deterministic mode (kMods kernels only) orders dQ's reduce-adds by key
  // block (order_wait below); under a right window bound (causal-like) in
  // decreasing block order, with the blocks launched last-first.
  const bool det = kMods && p.deterministic;
  const bool det_desc = det && p.window_right >= 0;
  const int n_block = det_desc ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int hk = blockIdx.y, b = blockIdx.z;
  const detail::SeqLen sl(p, b);
  const int seqlen_q = int(sl.seqlen_q), seqlen_k = int(sl.seqlen_k);
  const int c0 = n_block * kBlockN;
  // dQ apart: the dQ kernel reads nothing this one writes, so it may take each
  // SM this grid's last wave leaves (programmatic dependent launch, launch_dq).
  if constexpr (kApart) detail::pdl_trigger();
  if (c0 >= seqlen_k) return;  // packed: a sequence shorter than the longest
  const detail::Mask mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
  const int c_last = min(c0 + kBlockN, seqlen_k) - 1;
  const int r_begin = int(mask.row_begin(c0)), r_end = int(mask.row_end(c_last));
  const int m_block_min = r_begin / kBlockM;
  const int m_block_max = r_end > r_begin ? (r_end + kBlockM - 1) / kBlockM : m_block_min;
  const int group_size = int(p.heads_q / p.heads_kv);
  // One step per (query head of the group, visible query tile).
  const int n_m = m_block_max - m_block_min, n_steps = n_m * group_size;
  // Without a right window bound every key tile sees the same query tiles, and
  // the blocks of one head, launched side by side, would walk them in lockstep:
  // each step every block reads the same Q / dO tile at its first touch (from
  // DRAM) and reduce-adds into the same dQ tile. Block n starts at its own tile
  // instead and reads what block n + 1 read a step before (from L2): hd64 N =
  // 2048 steps 4.24 -> 3.17 us (kernel_notes, sm90 backward v10). Under a
  // causal-like mask each block already starts at its own diagonal. By product
  // (hd256) it measured no gain and keeps the plain order.
  // The deterministic mode (kMods kernels only) walks the plain
  // order: its key blocks add each dQ tile in block order (see order_wait).
  const int rot = p.window_right < 0 && !Traits::kByProduct && n_m > 0 && !det ? n_block % n_m : 0;
  // The steps in that order by counters (StepWalk): +1-4% at hd64 / hd128, and
  // in the producer at hd256. The by-product consumers (hd192 / hd256) divide
  // the step index: walking there measured 9-12% slower, with the same memory
  // operations and barriers in the SASS (kernel notes, sm90 backward v23).
  const detail::StepWalk walk0(hk * group_size, m_block_min, m_block_max, m_block_min + rot);
  auto step_head = [&](int s) { return hk * group_size + s / n_m; };
  auto step_mblock = [&](int s) { return m_block_min + (s % n_m + rot) % n_m; };
  const bool packed = p.cu_seqlens_q != nullptr;
  const int batches = packed ? 1 : int(p.batch), bb = packed ? 0 : b;

  // Broadcast from lane 0, so that the compiler knows it is warp-uniform (and
  // what derives from it, such as the wgmma descriptors below).
  const int warp_group = cutlass::canonical_warp_group_idx();
  if (threadIdx.x == 0) {
    // Fetch the descriptors now rather than at their first use.
    cute::prefetch_tma_descriptor(args.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(args.tma_v.get_tma_descriptor());
    cute::prefetch_tma_descriptor(args.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(args.tma_do.get_tma_descriptor());
    cute::prefetch_tma_descriptor(args.tma_dq.get_tma_descriptor());
    Barrier::init(&smem.kv_full, 1);
    CUTE_UNROLL
    for (int s = 0; s < kStages; ++s) {
      Barrier::init(&smem.q_full[s], 1 + 32);  // the TMA thread + each lane once its LSE / d copies land
      Barrier::init(&smem.do_full[s], 1);
      Barrier::init(&smem.empty[s], kEmptyArrivals);
      if constexpr (Traits::kByProduct) Barrier::init(&smem.rows_empty[s], Traits::kConsumerThreads);
    }
    if constexpr (kApart) Barrier::init(&smem.p_read, 128);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKV{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutKV{});
  Tensor sKt = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKt{});
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sdO = make_tensor(make_smem_ptr(smem.dout.data()), typename Traits::SmemLayoutQ{});
  Tensor sQt = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQt{});
  Tensor sdOt = make_tensor(make_smem_ptr(smem.dout.data()), typename Traits::SmemLayoutQt{});
  Tensor sdS = make_tensor(make_smem_ptr(smem.ds.data()), typename Traits::SmemLayoutdS{});

  if (warp_group == 0) {
    // Producer: warp 0; lane 0 issues the TMA copies.
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (threadIdx.x >= 32 || n_steps == 0) return;
    const int lane = threadIdx.x;
    const int rows_q = int(packed ? p.total_q : p.seqlen_q), rows_k = int(packed ? p.total_k : p.seqlen_k);
    Tensor mQ = args.tma_q.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
    Tensor mdO = args.tma_do.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
    Tensor mK = args.tma_k.get_tma_tensor(make_shape(rows_k, kHeadDim, int(p.heads_kv), batches));
    Tensor mV = args.tma_v.get_tma_tensor(make_shape(rows_k, kHeadDim, int(p.heads_kv), batches));
    const auto q_start = make_coord(int(sl.q_offset), _0{}), k_start = make_coord(int(sl.k_offset), _0{});
    using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
    using TileK = Shape<Int<kBlockN>, Int<kHeadDim>>;
    if (lane == 0) {
      Tensor gK = local_tile(domain_offset(k_start, mK(_, _, hk, bb)), TileK{}, make_coord(n_block, _0{}));
      Tensor gV = local_tile(domain_offset(k_start, mV(_, _, hk, bb)), TileK{}, make_coord(n_block, _0{}));
      auto [tKgK, tKsK] = tma_partition(args.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
      auto [tVgV, tVsV] = tma_partition(args.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
      Barrier::arrive_and_expect_tx(&smem.kv_full, 2 * Traits::kTmaBytesKV);
      copy(args.tma_k.with(smem.kv_full), tKgK, tKsK);
      copy(args.tma_v.with(smem.kv_full), tVgV, tVsV);
    }
    detail::StepWalk walk = walk0;
    for (int step = 0; step < n_steps; ++step, walk.next()) {
      const int s = step % kStages, round = step / kStages;
      const int h = walk.h, m_block = walk.m;
      if (round > 0) {
        Barrier::wait(&smem.empty[s], (round - 1) & 1);
        if constexpr (Traits::kByProduct) Barrier::wait(&smem.rows_empty[s], (round - 1) & 1);
      }
      if (lane == 0) {
        Tensor gQ = local_tile(domain_offset(q_start, mQ(_, _, h, bb)), TileQ{}, make_coord(m_block, _0{}));
        Tensor gdO = local_tile(domain_offset(q_start, mdO(_, _, h, bb)), TileQ{}, make_coord(m_block, _0{}));
        auto [tQgQ, tQsQ] = tma_partition(args.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ(_, _, s)), group_modes<0, 2>(gQ));
        auto [tdOgdO, tdOsdO] = tma_partition(args.tma_do, _0{}, Layout<_1>{}, group_modes<0, 2>(sdO(_, _, s)), group_modes<0, 2>(gdO));
        Barrier::arrive_and_expect_tx(&smem.q_full[s], Traits::kTmaBytesQ);
        copy(args.tma_q.with(smem.q_full[s]), tQgQ, tQsQ);
        Barrier::arrive_and_expect_tx(&smem.do_full[s], Traits::kTmaBytesQ);
        copy(args.tma_do.with(smem.do_full[s]), tdOgdO, tdOsdO);
      }
      // The rows' LSE (log2 units, from the row-dot pass) and d_i by cp.async,
      // each lane's arrival on q_full deferred until its copies land: no load
      // latency in the producer's own path. Rows past the sequence get zeros;
      // the consumers mask every query tile that reaches past it.
      const int m0 = m_block * kBlockM;
      CUTE_UNROLL
      for (int r = lane; r < kBlockM; r += 32) {
        const int i = m0 + r;
        const bool in = i < seqlen_q;
        const int64_t slot = in ? detail::row_slot(p, sl, b, h, i) : 0;
        detail::cp_async_zfill<4>(&smem.lse_log2[s][r], p.lse_log2 + slot, in);
        detail::cp_async_zfill<4>(&smem.row_dot[s][r], p.row_dot + slot, in);
      }
      detail::cp_async_mbarrier_arrive(&smem.q_full[s]);
    }
    return;
  }

  // Consumers.
  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
  // Deterministic dQ (kMods kernels, p.deterministic): each dQ tile (query head,
  // query tile, consumer group) is reduce-added by its key blocks in block
  // order: increasing without a right window bound, decreasing with one (there
  // block n + 1 reaches each tile two steps before block n, since its rows start
  // one key block further down the diagonal). Before its reduce-add the
  // group's leader waits until the tile's counter says the key block before it
  // in that order is done, if that block touches the tile at all (the blocks
  // touching a tile are consecutive); after it, it waits for the add to
  // complete and stores its own block + 1. A block waits only on the block
  // launched just before it (decreasing order: the blocks are launched
  // last-first), and the first block of each run waits on none, so the chain
  // always moves. The plain query-tile order (no rotation).
  int prev_lo = 0, prev_hi = 0;  // query tiles the key block before this one (in order) touches
  const int prev_block = det_desc ? n_block + 1 : n_block - 1;
  if (det && prev_block >= 0 && prev_block * kBlockN < seqlen_k) {
    const int pc0 = prev_block * kBlockN;
    const int pb = int(mask.row_begin(pc0)), pe = int(mask.row_end(min(pc0 + kBlockN, seqlen_k) - 1));
    prev_lo = pb / kBlockM;
    prev_hi = pe > pb ? (pe + kBlockM - 1) / kBlockM : prev_lo;
  }
  // The counters (bwd_order.h): after the accumulator's rows.
  int* const dq_order =
      det ? reinterpret_cast<int*>(p.dq_accum + dq_order_offset(p.heads_q * (packed ? p.total_q : p.batch * p.seqlen_q) *
                                                                p.head_dim_qk))
          : nullptr;
  const int64_t order_per_head = dq_order_per_head(p.seqlen_q);
  auto order_slot = [&](int h, int m, int g) {
    return dq_order + (int64_t(b) * p.heads_q + h) * order_per_head + m * 2 + g;
  };
  auto order_wait = [&](int h, int m, int g) {
    if (m >= prev_lo && m < prev_hi) {
      const int* slot = order_slot(h, m, g);
      int done;
      do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(done) : "l"(slot) : "memory");
      } while (det_desc ? done != n_block + 2 : done < n_block);  // the previous adder stored its block + 1
    }
    asm volatile("fence.proxy.async.global;" ::: "memory");  // the TMA add after the acquire
  };
  auto order_release = [&](int h, int m, int g) {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // the add has completed
    asm volatile("fence.proxy.async.global;" ::: "memory");
    asm volatile("st.release.gpu.global.b32 [%0], %1;" :: "l"(order_slot(h, m, g)), "r"(n_block + 1) : "memory");
  };
  // Score modifiers (ScoreMods, kMods only): softcap's factor where it is on.
  const bool with_cap = kMods && p.softcap > 0.f;
  // The fp32 dQ accumulator's tile of query head h from row m0 (kAtomic): row
  // slots in LSE order, [B, Hq, Sq] or [Hq, total_q], head dim floats each.
  auto dq_tile = [&](int h, int m0) {
    const int64_t rows = packed ? p.total_q : p.seqlen_q;
    return p.dq_accum + ((int64_t(bb) * p.heads_q + h) * rows + sl.q_offset + m0) * kHeadDim;
  };
  auto head_slope = [&](int h) {
    return kMods && p.alibi_slopes != nullptr ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.f;
  };
  if constexpr (Traits::kByProduct) {
    // By product (hd256, 64 keys; bwd_traits.h): group 0 runs S^T = K Q^T, P^T,
    // dV += P^T dO and dQ's columns [0, 128); group 1 dP^T = V dO^T, dS^T (with
    // group 0's fp32 P^T), dK += dS^T Q and dQ's columns [128, 256). Both groups
    // run the same instruction stream on their own operands but for the
    // elementwise part. Per step they meet twice: P^T ready (group 0 arrives,
    // group 1 waits; kBarP) and dS ready (both wait; kBarDs).
    // Reuse of the single P^T and dS buffers: group 0 writes P^T of the next
    // step only after kBarDs, which group 1 reaches after reading P^T; group 1
    // writes dS^T of the next step only after the next kBarP, which group 0
    // reaches after its wait for this step's dQ (the reader of dS).
    constexpr int kBarP = 3, kBarDs = 4;  // 1 and 2 are the groups' own barriers
    const int group = warp_group - 1;
    const int tidx = threadIdx.x % 128;  // thread within its group
    const bool g0 = group == 0;
    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmadKV mma_dkv;
    typename Traits::TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(tidx);
    auto thr_dkv = mma_dkv.get_thread_slice(tidx);
    auto thr_dq = mma_dq.get_thread_slice(tidx);
    // The group's operands: A of S^T / dP^T (K or V), B of S^T / dP^T (Q or
    // dO) and B of dV / dK (dO or Q, head-dim-major).
    Tensor sA = make_tensor(make_smem_ptr(g0 ? smem.k.data() : smem.v.data()), typename Traits::SmemLayoutKV{});
    Tensor sB = make_tensor(make_smem_ptr(g0 ? smem.q.data() : smem.dout.data()), typename Traits::SmemLayoutQ{});
    Tensor sBt = make_tensor(make_smem_ptr(g0 ? smem.dout.data() : smem.q.data()), typename Traits::SmemLayoutQt{});
    Tensor tSrA = thr_sdp.partition_fragment_A(sA);
    Tensor tSrB = thr_sdp.partition_fragment_B(sB);    // (.., .., k, stage)
    Tensor tKVrB = thr_dkv.partition_fragment_B(sBt);  // (.., .., k, stage)
    Tensor tdQrdS = thr_dq.partition_fragment_A(sdS);  // (.., .., k, 1)
    Tensor tdQrK = thr_dq.partition_fragment_B(
        local_tile(sKt, Shape<Int<kDqCols>, Int<kBlockN>>{}, make_coord(group, _0{})));
    Tensor acc_kv = partition_fragment_C(mma_dkv, Shape<Int<kBlockN>, Int<kHeadDim>>{});  // dV or dK
    clear(acc_kv);

    // (key, query row) of every S^T / dP^T element this thread holds; the same
    // for both groups (one accumulator layout).
    Tensor tScS = thr_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{}));
    Tensor coord = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
    Tensor tdSoff = thr_sdp.partition_C(
        make_tensor(counting_iterator<int>{0}, typename Traits::SmemLayoutdSt{}.layout_b()));
    static_assert(decltype(size<0>(coord))::value == 2, "two key rows per thread");
    const KeyRows key_rows(coord, mask, c0, seqlen_k);
    // dQ: the group's (kBlockM, 128) fp32 half, staged in this step's dO stage
    // (group 0) or Q stage (group 1) and reduce-added from there, in the plain
    // column order (Traits::kDqColPerm).
    static_assert(!Traits::kDqColPerm, "by product: the accumulator's plain column order");
    Tensor tdQoff = thr_dq.partition_C(
        make_tensor(counting_iterator<int>{0}, typename Traits::SmemLayoutdQMma{}.layout_b()));
    Tensor tdQc = thr_dq.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kDqCols>>{}));
    const bool dq_leader = tidx == 0;
    const int rows_q = int(packed ? p.total_q : p.seqlen_q);
    Tensor mdQ = args.tma_dq.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
    auto group_sync = [&]() { cutlass::arch::NamedBarrier::sync(128, 1 + group); };
    Element* const staging = g0 ? smem.dout.data() : smem.q.data();
    constexpr int kStageElems = kBlockM * kHeadDim;  // one Q / dO stage
    static_assert(cosize_v<typename Traits::SmemLayoutQ> == kStages * kStageElems, "stages back to back");
    // P^T from group 0 to group 1: chunk c (4 floats) of thread t at c * 128 + t.
    float4* const p_x = reinterpret_cast<float4*>(smem.p.data()) + tidx;
    constexpr int kChunks = decltype(size(tScS))::value / 4;

    const int k0 = c0;
    constexpr bool kB2B = kApartB2B<Traits, kMods>;
    // Step j + 1's stage must not wait on the release of step j's, which comes
    // after it in the loop: two stages at least.
    static_assert(!kB2B || kStages >= 2, "back to back needs two Q / dO stages");
    // Back to back: S^T / dP^T of step 0 here, of step + 1 behind dV / dK.
    Tensor acc_next = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
    if (n_steps > 0) Barrier::wait(&smem.kv_full, 0);
    if (kB2B && n_steps > 0) {
      Barrier::wait(g0 ? &smem.q_full[0] : &smem.do_full[0], 0);
      wgmma_issue<true, false>(mma_sdp, tSrA, tSrB(_, _, _, 0), acc_next);
    }
    for (int step = 0; step < n_steps; ++step) {
      const int s = step % kStages, phase = (step / kStages) & 1;
      const int m_block = step_mblock(step), m0 = m_block * kBlockM;
      const float slope = head_slope(step_head(step));

      Tensor acc_step = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      auto& acc = kB2B ? acc_next : acc_step;  // S^T or dP^T
      if (!kB2B) {
        Barrier::wait(g0 ? &smem.q_full[s] : &smem.do_full[s], phase);
        wgmma_issue<true, false>(mma_sdp, tSrA, tSrB(_, _, _, s), acc);
      }
      // The previous step's reduce-add has read its staging: that stage goes
      // back to the producer (both leaders; kEmptyArrivals = 2).
      if (kStaged && dq_leader && step > 0) {
        tma_store_wait<0>();
        Barrier::arrive(&smem.empty[(step - 1) % kStages]);
      }
      // The other tile (dV's / dK's B), and LSE and d_i with Q.
      if (kB2B && step > 0) {
        // dV / dK of the previous step (issued before this step's S^T / dP^T) have
        // read its stage: back to the producer before this step's product is waited for.
        warpgroup_wait<1>();
        warpgroup_fence_operand(acc_kv);
        Barrier::arrive(&smem.empty[(step - 1) % kStages]);
      }
      Barrier::wait(g0 ? &smem.do_full[s] : &smem.q_full[s], phase);
      // The step's row values (LSE for group 0, d_i for group 1; both stages' q_full
      // has been waited for here) while the product runs.
      constexpr int kRowVals = decltype(size<1>(acc_rowcol(acc.layout())))::value;
      [[maybe_unused]] float row_vals[kRowVals];
      if constexpr (kApartRowRegs<Traits, kMods>) read_row_vals(row_vals, g0 ? smem.lse_log2[s] : smem.row_dot[s], coord);
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc);
      Tensor x = make_tensor(acc.data(), acc_rowcol(acc.layout()));
      Tensor rA = make_tensor<Element>(acc.layout());  // P^T or dS^T in 16 bits: dV's / dK's A
      if (g0) {
        // P^T, masked as by keys (the rows that see each of the thread's two keys).
        const bool need_mask = m0 + kBlockM > seqlen_q || !mask.tile_full(m0, m0 + kBlockM, k0, k0 + kBlockN);
        if constexpr (kMods) key_rows.probs_mods(x, coord, smem.lse_log2[s], m0, ScoreMods(p, c0, seqlen_q, seqlen_k, slope));
        else if constexpr (kApartRowRegs<Traits, kMods>)
          key_rows.probs(x, coord, [&](int ni) { return row_vals[ni]; }, need_mask, m0, p.scale_log2);
        else key_rows.probs(x, coord, smem.lse_log2[s], need_mask, m0, p.scale_log2);
        Barrier::arrive(&smem.rows_empty[s]);  // this thread's LSE reads of the stage are done
        // dQ apart: group 1 has read the previous step's P^T (fused, both groups
        // meet at kBarDs before dQ, after that read).
        if (kApart && step > 0) {
          Barrier::wait(&smem.p_read, (step - 1) & 1);
          asm volatile("" ::: "memory");  // the stores below stay after the wait (its asm names no memory)
        }
        CUTE_UNROLL
        for (int c = 0; c < kChunks; ++c)
          p_x[c * 128] = make_float4(acc(4 * c), acc(4 * c + 1), acc(4 * c + 2), acc(4 * c + 3));
        cutlass::arch::NamedBarrier::arrive(Traits::kConsumerThreads, kBarP);
        convert_into(acc, rA);
      } else {
        // dS^T = P^T (dP^T - d), with group 0's fp32 P^T; the softmax scale is
        // left to dK's epilogue and dQ's conversion (as in the other formation).
        Tensor pt = make_tensor_like(acc);
        cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, kBarP);
        CUTE_UNROLL
        for (int c = 0; c < kChunks; ++c) {
          const float4 v = p_x[c * 128];
          pt(4 * c) = v.x;
          pt(4 * c + 1) = v.y;
          pt(4 * c + 2) = v.z;
          pt(4 * c + 3) = v.w;
        }
        if (kApart) {
          asm volatile("" ::: "memory");  // the loads above stay before the arrive (its asm names no memory)
          Barrier::arrive(&smem.p_read);  // P^T is read
        }
        Tensor pr = make_tensor(pt.data(), acc_rowcol(pt.layout()));
        CUTE_UNROLL
        for (int ni = 0; ni < size<1>(x); ++ni) {
          const float d = kApartRowRegs<Traits, kMods> ? row_vals[ni] : smem.row_dot[s][get<1>(coord(0, ni))];
          CUTE_UNROLL
          for (int mi = 0; mi < size<0>(x); ++mi) x(mi, ni) = pr(mi, ni) * (x(mi, ni) - d);
        }
        if (with_cap) ScoreMods(p, c0, seqlen_q, seqlen_k, slope).apply_cap_grad(x, pr, coord, smem.lse_log2[s], m0);
        Barrier::arrive(&smem.rows_empty[s]);  // this thread's d reads of the stage are done
        convert_into(acc, rA);
      }
      wgmma_issue<false, true>(mma_dkv, make_tensor(rA.data(), acc_as_a(rA.layout())), tKVrB(_, _, _, s), acc_kv);
      if constexpr (kB2B) {
        if (step + 1 < n_steps) {
          const int s1 = (step + 1) % kStages, phase1 = ((step + 1) / kStages) & 1;
          Barrier::wait(g0 ? &smem.q_full[s1] : &smem.do_full[s1], phase1);
          wgmma_issue<true, false>(mma_sdp, tSrA, tSrB(_, _, _, s1), acc);
        }
        continue;
      } else if constexpr (kApart) {
        warpgroup_wait<0>();
        warpgroup_fence_operand(acc_kv);
        Barrier::arrive(&smem.empty[s]);  // this thread's products have read the stage
        continue;
      }
      if (!g0) {
        // dS^T to shared memory for both groups' dQ (under dK), two query
        // columns per 32-bit store as by keys.
        store_pairs<Element>(reinterpret_cast<char*>(smem.ds.data()), tdSoff(_, _, _, 0), rA);
        cutlass::arch::fence_view_async_shared();  // generic-proxy writes, read by wgmma
      }
      cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, kBarDs);
      Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kDqCols>>{});
      wgmma_issue<true, false>(mma_dq, tdQrdS(_, _, _, 0), tdQrK, acc_dq);
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_kv);
      warpgroup_fence_operand(acc_dq);
      if constexpr (kAtomic) {
        Barrier::arrive(&smem.empty[s]);  // this thread's products have read the stage
        add_dq_atomic<kHeadDim>(acc_dq, tdQc, dq_tile(step_head(step), m0) + group * kDqCols, seqlen_q - m0);
        continue;
      }
      // Staging in this step's dO (group 0) / Q (group 1) stage: its other
      // readers are done (dP^T / S^T of the other group, before kBarDs / kBarP),
      // and this group's four warps have waited for their own wgmma.
      char* const stage_bytes = reinterpret_cast<char*>(staging + s * kStageElems);
      group_sync();
      const uint32_t dq_base = opaque(uint32_t(tdQoff(0)));
      CUTE_UNROLL
      for (int e = 0; e < size(acc_dq); e += 2)
        *reinterpret_cast<float2*>(stage_bytes + swizzled_byte_offset<float, Traits::kDqSwizzleBits>(tdQoff, dq_base, e)) =
            make_float2(acc_dq(e), acc_dq(e + 1));
      cutlass::arch::fence_view_async_shared();
      group_sync();
      if (dq_leader) {
        const int h = step_head(step);
        Tensor gdQ = local_tile(domain_offset(make_coord(int(sl.q_offset), _0{}), mdQ(_, _, h, bb)),
                                Shape<Int<kBlockM>, Int<kDqCols>>{}, make_coord(m_block, group));
        Tensor sdQ = make_tensor(make_smem_ptr(reinterpret_cast<float*>(stage_bytes)), typename Traits::SmemLayoutdQ{});
        auto cta = args.tma_dq.get_slice(_0{});
        if (det) order_wait(h, m_block, group);
        copy(args.tma_dq, cta.partition_S(sdQ), cta.partition_D(gdQ));
        tma_store_arrive();
        if (det) order_release(h, m_block, group);
      }
    }
    if (kStaged && dq_leader) tma_store_wait<0>();
    if (kB2B && n_steps > 0) {
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_kv);
      Barrier::arrive(&smem.empty[(n_steps - 1) % kStages]);
    }

    // Epilogue: dV (group 0) or dK (group 1, times the softmax scale that dS left
    // out) straight from registers, keys past the sequence not written.
    Tensor tKVc = thr_dkv.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDim>>{}));
    Tensor kv_coord = make_tensor(tKVc.data(), acc_rowcol(tKVc.layout()));
    Tensor kv_rc = make_tensor(acc_kv.data(), acc_rowcol(acc_kv.layout()));
    Element* const out = static_cast<Element*>(g0 ? p.dv : p.dk);
    const float factor = g0 ? 1.f : p.softmax_scale;
    const int64_t out_batch = g0 ? p.dv_batch_stride : p.dk_batch_stride;
    const int64_t out_row = g0 ? p.dv_row_stride : p.dk_row_stride;
    const int64_t out_head = g0 ? p.dv_head_stride : p.dk_head_stride;
    CUTE_UNROLL
    for (int mi = 0; mi < size<0>(kv_rc); ++mi) {
      const int j = k0 + get<0>(kv_coord(mi, 0));
      if (j >= seqlen_k) continue;
      Element* row = out + sl.k_row(b, out_batch, out_row, out_head, hk, j);
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(kv_rc); ni += 2) {
        cutlass::Array<Element, 2> pair;
        pair[0] = Element(kv_rc(mi, ni) * factor);
        pair[1] = Element(kv_rc(mi, ni + 1) * factor);
        *reinterpret_cast<cutlass::Array<Element, 2>*>(row + get<1>(kv_coord(mi, ni))) = pair;
      }
    }
  } else {
    const int tidx = threadIdx.x - 128;
    const int group = warp_group - 1;
    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmadKV mma_dkv;
    typename Traits::TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(tidx);
    auto thr_dkv = mma_dkv.get_thread_slice(tidx);
    // Split by columns (hd128) or rows (hd64), the dQ product spans both groups.
    auto thr_dq = mma_dq.get_thread_slice(tidx);

    // The shared-memory operands' descriptors depend on the warp group alone:
    // taken from the slice of the group's first thread (a warp-uniform index)
    // they are uniform values, formed in uniform registers with no move per
    // wgmma from a thread's registers.
    // (The score-modifier kernels keep the thread's own slice: there the uniform
    // form spills a register at hd128.)
    const int desc_thread = kMods ? tidx : group * 128;
    auto grp_sdp = mma_sdp.get_thread_slice(desc_thread);
    auto grp_dkv = mma_dkv.get_thread_slice(desc_thread);
    auto grp_dq = mma_dq.get_thread_slice(desc_thread);
    Tensor tSrK = grp_sdp.partition_fragment_A(sK);
    Tensor tSrQ = grp_sdp.partition_fragment_B(sQ);     // (.., .., k, stage)
    Tensor tdPrV = grp_sdp.partition_fragment_A(sV);
    Tensor tdPrdO = grp_sdp.partition_fragment_B(sdO);  // (.., .., k, stage)
    Tensor tdVrdO = grp_dkv.partition_fragment_B(sdOt);  // (.., .., k, stage)
    Tensor tdKrQ = grp_dkv.partition_fragment_B(sQt);    // (.., .., k, stage)
    Tensor tdQrdS = grp_dq.partition_fragment_A(sdS);  // (.., .., k, buffer)
    Tensor tdQrK = grp_dq.partition_fragment_B(sKt);

    Tensor acc_dk = partition_fragment_C(mma_dkv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    Tensor acc_dv = partition_fragment_C(mma_dkv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    clear(acc_dk);
    clear(acc_dv);
    // (key, query row) of every S^T element this thread holds, within the block's tile.
    Tensor tScS = thr_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{}));
    Tensor coord = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
    // dS^T goes to shared memory by stmatrix: the S^T accumulator's fragment is
    // stmatrix's 8 x 8 layout (keys as its rows, 16 bytes of query rows each), so
    // one STSM.x4 stores four 32-bit pairs a thread where 32-bit stores took four
    // instructions and their swizzled addresses took four more each (-6% of the
    // step's instructions at hd128, -11% at hd64). The partition over the
    // unswizzled layout gives each stmatrix's row start (the thread's address) as
    // an element offset, (.., atom, buffer); the addresses are formed at each step
    // from an opaque base, as for the dQ staging (CuTe's own swizzled partition
    // keeps them live across the loop: spills). With score modifiers the
    // four-register groups spill (52 bytes at hd128), so those kernels keep
    // 32-bit stores (kDsStsm).
    constexpr bool kDsStsm = !kMods;
    Tensor tdSoff32 = thr_sdp.partition_C(
        make_tensor(counting_iterator<int>{0}, typename Traits::SmemLayoutdSt{}.layout_b()));  // (.., .., .., buffer)
    auto ds_copy = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_sdp);
    auto thr_ds_copy = ds_copy.get_thread_slice(tidx);
    Tensor tdSoff = thr_ds_copy.partition_D(
        make_tensor(counting_iterator<int>{0}, typename Traits::SmemLayoutdSt{}.layout_b()));  // ((8, atom), 1, 1, buffer)
    static_assert(decltype(size<0, 0>(tdSoff))::value == 8 && decltype(size<1>(tdSoff))::value == 1 &&
                      decltype(size<2>(tdSoff))::value == 1,
                  "a thread's stmatrix rows: 8 elements each, every atom in the first mode");
    const uint32_t sds_addr = cast_smem_ptr_to_uint(smem.ds.data());
    // The query rows that see each of this thread's two keys (KeyRows).
    static_assert(decltype(size<0>(coord))::value == 2, "two key rows per thread");
    const KeyRows key_rows(coord, mask, c0, seqlen_k);

    // fp32 dQ staging of both groups and their TMA reduce-adds into the
    // accumulator. The dQ product writes through SmemLayoutdQMma, which spans
    // both groups' tiles of a buffer (group g's columns / rows are its tile);
    // columns permuted within 32-float groups, 16 at hd96 (Traits::kDqColPerm,
    // dq_layout.h).
    Tensor tdQoff = thr_dq.partition_C(
        make_tensor(counting_iterator<int>{0}, typename Traits::SmemLayoutdQMma{}.layout_b()));
    char* const sdQ_bytes = reinterpret_cast<char*>(smem.dq.data());
    Tensor tdQc = thr_dq.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
    const bool dq_leader = tidx % 128 == 0;
    const int rows_q = int(packed ? p.total_q : p.seqlen_q);
    Tensor mdQ = args.tma_dq.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
    auto group_sync = [&]() { cutlass::arch::NamedBarrier::sync(128, 1 + group); };

    const int k0 = c0;  // first key of the block
    // dQ is issued before dK so that its staging runs under the dK product.
    // (Running it under the next step's S^T instead would leave a wgmma in flight
    // across the loop's back edge, which ptxas answers by serialising the wgmma
    // pipeline.)
    // dQ staging, deferred (split by columns, hd128, or rows, hd64).
    // Step t's dQ goes to staging buffer t & 1 (both groups' tiles side by side,
    // 32 KiB; group g writes only its own TMA tile) under its
    // dK product, with no fence or barrier of its own; its reduce-add is issued
    // in step t + 1 under that step's dQ / dK products. Ordering, per buffer b:
    //  - writers: the 128 threads of group g, generic proxy (STS), step t, after
    //    the wait for step t's dQ product;
    //  - reader: the TMA reduce-add of step t (async proxy), issued by group g's
    //    leader in step t + 1 after the 256-thread barrier 0. Every writer has by
    //    then executed step t + 1's fence.proxy.async (the one that publishes
    //    dS^T to wgmma; it covers all of the thread's earlier shared-memory
    //    writes) before arriving at that barrier: RAW across proxies ordered by
    //    fence + barrier, as the single-buffered path's fence + group barrier did;
    //  - reuse: step t + 2 writes buffer b again, after its own barrier 0, at
    //    which the leader arrives only after cp.async.bulk.wait_group.read 0.
    //    The leader's only bulk group outstanding there is step t's reduce-add
    //    (issued in step t + 1; step t + 1's is issued after this barrier), so
    //    the read of b has finished before any thread of the group passes the
    //    barrier: WAR ordered by wait_group.read + barrier, as before. The wait
    //    is for a reduce-add issued a whole step earlier.
    //  - after the loop the last step's staging gets its fence, a group barrier
    //    and its reduce-add, then wait_group.read 0 as before.
    // Per step and group this drops two 128-thread barriers and one fence
    // (MEMBAR + FENCE.VIEW.ASYNC, which waited for the staging stores) off the
    // end of the step, where they ran under dK only; the stores remain.
    static_assert(Traits::kDqStages == 2, "two staging buffers, published by the 256-thread dS barrier");
    constexpr int kDqBufElems = cosize_v<typename Traits::SmemLayoutdQ> * Traits::kConsumerGroups;
    static_assert(kDqBufElems * sizeof(float) % 1024 == 0 && cosize_v<typename Traits::SmemLayoutdQMma> == kDqBufElems,
                  "the product's view spans one buffer, each buffer 1024-byte aligned (the byte swizzle holds)");
    auto stage_dq = [&](const auto& acc_dq, int buf) __attribute__((always_inline)) {
      if constexpr (Traits::kDqColPerm) {
        // dq_layout.h's XOR form needs the thread's base and its elements'
        // offsets to share no bit. At hd96 that holds only within the group's
        // tile (group 1's starts at 12 KiB, the column blocks' bits), so the
        // tile start goes into the pointer there; elsewhere base and buffer
        // stay in the XOR value.
        constexpr int kBits = Traits::kDqSwizzleBits;
        constexpr int kTile = cosize_v<typename Traits::SmemLayoutdQ>;
        const int tile = kBits == 2 ? buf * kDqBufElems + group * kTile : 0;
        char* const dst = sdQ_bytes + tile * int(sizeof(float));
        const uint32_t dq_base = opaque(dq_stage_base<kBits>(
            kBits == 2 ? uint32_t(tdQoff(0)) - uint32_t(group * kTile) : uint32_t(tdQoff(0)) + uint32_t(buf * kDqBufElems)));
        CUTE_UNROLL
        for (int e = 0; e < size(acc_dq); e += 2)
          *reinterpret_cast<float2*>(dst + dq_stage_offset<kBits>(tdQoff, dq_base, e)) = make_float2(acc_dq(e), acc_dq(e + 1));
      } else {
        const uint32_t dq_base = opaque(uint32_t(tdQoff(0)) + uint32_t(buf * kDqBufElems));
        CUTE_UNROLL
        for (int e = 0; e < size(acc_dq); e += 2)
          *reinterpret_cast<float2*>(sdQ_bytes + swizzled_byte_offset<float, Traits::kDqSwizzleBits>(tdQoff, dq_base, e)) =
              make_float2(acc_dq(e), acc_dq(e + 1));
      }
    };
    // The leader's reduce-add of step st's staging (buffer st & 1, its group's
    // tile), that step's query head h and tile m_block.
    auto issue_dq = [&](int st, int h, int m_block) __attribute__((always_inline)) {
      Tensor gdQ = local_tile(domain_offset(make_coord(int(sl.q_offset), _0{}), mdQ(_, _, h, bb)),
                              Shape<Int<Traits::kDqRows>, Int<kDqCols>>{},
                              make_coord(Traits::kDqSplitM ? 2 * m_block + group : m_block, kSplitN ? group : 0));
      Tensor sdQ_st = make_tensor(
          make_smem_ptr(smem.dq.data() + (st & 1) * kDqBufElems + group * cosize_v<typename Traits::SmemLayoutdQ>),
          typename Traits::SmemLayoutdQ{});
      auto cta = args.tma_dq.get_slice(_0{});
      copy(args.tma_dq, cta.partition_S(sdQ_st), cta.partition_D(gdQ));
      tma_store_arrive();
    };
    // In the deterministic mode, in key-block order (order_wait above).
    auto issue_dq_ordered = [&](int st, int h, int m) __attribute__((always_inline)) {
      if (det) order_wait(h, m, group);
      issue_dq(st, h, m);
      if (det) order_release(h, m, group);
    };

    if (n_steps > 0) Barrier::wait(&smem.kv_full, 0);
    detail::StepWalk walk = walk0, prev = walk0;  // this step's, the previous step's
    for (int step = 0; step < n_steps; prev = walk, walk.next(), ++step) {
      const int s = step % kStages, phase = (step / kStages) & 1;
      const int h = walk.h, m_block = walk.m, m0 = m_block * kBlockM;
      const int ds_buf = step & 1;
      const float slope = head_slope(h);

      constexpr bool kRowRegs = kKeysRowRegs<Traits, kMods>;
      Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      Tensor sc = make_tensor(acc_s.data(), acc_rowcol(acc_s.layout()));
      constexpr int kRowVals = decltype(size<1>(sc))::value;
      [[maybe_unused]] float row_vals[kRowVals];
      Barrier::wait(&smem.q_full[s], phase);
      if constexpr (kRowRegs) read_row_vals(row_vals, smem.lse_log2[s], coord);
      wgmma_issue<true, false>(mma_sdp, tSrK, tSrQ(_, _, _, s), acc_s);
      Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      Barrier::wait(&smem.do_full[s], phase);
      wgmma_issue<true, false>(mma_sdp, tdPrV, tdPrdO(_, _, _, s), acc_dp);

      // P^T as soon as S^T lands (dP^T still running), then dV += P^T dO while
      // dS^T is formed and goes to shared memory; then dQ = dS K and dK += dS^T Q.
      // Rows past the sequence (zero LSE in shared memory) are masked too.
      const bool need_mask = m0 + kBlockM > seqlen_q || !mask.tile_full(m0, m0 + kBlockM, k0, k0 + kBlockN);
      Tensor dp = make_tensor(acc_dp.data(), acc_rowcol(acc_dp.layout()));
      warpgroup_wait<1>();
      warpgroup_fence_operand(acc_s);
      if constexpr (kMods) key_rows.probs_mods(sc, coord, smem.lse_log2[s], m0, ScoreMods(p, c0, seqlen_q, seqlen_k, slope));
      else if constexpr (kRowRegs)
        key_rows.probs(sc, coord, [&](int ni) { return row_vals[ni]; }, need_mask, m0, p.scale_log2);
      else key_rows.probs(sc, coord, smem.lse_log2[s], need_mask, m0, p.scale_log2);
      // dV's place (Traits::kDsFirst): issued here it runs under dS's formation;
      // with dS first (the fp32 P is then dead) it runs under dS^T's conversion,
      // stores and barrier only.
      Tensor rP = make_tensor<Element>(acc_s.layout());
      Tensor tdVrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
      if constexpr (!kDsFirst) {
        convert_into(acc_s, rP);
        wgmma_issue<false, true>(mma_dkv, tdVrP, tdVrdO(_, _, _, s), acc_dv);
      }
      if constexpr (kRowRegs) read_row_vals(row_vals, smem.row_dot[s], coord);  // P^T is formed: d_i's turn
      warpgroup_wait<kDsFirst ? 0 : 1>();
      warpgroup_fence_operand(acc_dp);
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(sc); ++ni) {
        // dS = P (dP - d), two instructions a score; the softmax scale is applied
        // once to dK (epilogue) and to dQ (its conversion pass), not per step.
        const float d = kRowRegs ? row_vals[ni] : smem.row_dot[s][get<1>(coord(0, ni))];
        CUTE_UNROLL
        for (int mi = 0; mi < size<0>(sc); ++mi) dp(mi, ni) = sc(mi, ni) * (dp(mi, ni) - d);
      }
      if (with_cap) ScoreMods(p, c0, seqlen_q, seqlen_k, slope).apply_cap_grad(dp, sc, coord, smem.lse_log2[s], m0);
      if constexpr (kDsFirst) {
        convert_into(acc_s, rP);
        wgmma_issue<false, true>(mma_dkv, tdVrP, tdVrdO(_, _, _, s), acc_dv);
      }
      Tensor rdS = make_tensor<Element>(acc_dp.layout());
      convert_into(acc_dp, rdS);
      Tensor tdKrdS = make_tensor(rdS.data(), acc_as_a(rdS.layout()));
      if constexpr (!kDsStsm) {  // two query columns (adjacent there) per store
        store_pairs<Element>(reinterpret_cast<char*>(smem.ds.data()), tdSoff32(_, _, _, ds_buf), rdS);
      } else {
        Tensor tdSrdS = thr_ds_copy.retile_S(rdS);  // ((8, atom), 1, 1), a register pair per 2 values
        static_assert(size(tdSrdS) == size(tdSoff) / 2, "the registers' atoms are the stores' atoms");
        store_stsm_rows<Element>(sds_addr, tdSoff(make_coord(0, _), 0, 0, ds_buf), tdSrdS);
      }
      // Generic-proxy writes, read by wgmma (dS^T) and by the TMA reduce-add
      // issued below (the previous step's dQ staging).
      cutlass::arch::fence_view_async_shared();
      // The reduce-add of two steps ago has read the buffer this step writes.
      if (!kAtomic && dq_leader) tma_store_wait<0>();
      cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, 0);

      Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
      wgmma_issue<true, false>(mma_dq, tdQrdS(_, _, _, ds_buf), tdQrK, acc_dq);
      wgmma_issue<false, true>(mma_dkv, tdKrdS, tdKrQ(_, _, _, s), acc_dk);
      // Under dQ and dK: the previous step's staging, published by the fence and
      // barrier above.
      if (!kAtomic && dq_leader && step > 0) issue_dq_ordered(step - 1, prev.h, prev.m);
      warpgroup_wait<1>();  // dV and dQ are in; dK runs under dQ's staging
      warpgroup_fence_operand(acc_dq);
      if constexpr (kAtomic) add_dq_atomic<kHeadDim>(acc_dq, tdQc, dq_tile(h, m0), seqlen_q - m0);
      else stage_dq(acc_dq, step & 1);
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_dv);
      warpgroup_fence_operand(acc_dk);
      Barrier::arrive(&smem.empty[s]);  // Q and dO of this stage are no longer read
    }
    // The last step's staging: its fence, the group's barrier (group g wrote
    // only its own tile), its reduce-add.
    if (!kAtomic && n_steps > 0) {
      cutlass::arch::fence_view_async_shared();
      group_sync();
      if (dq_leader) issue_dq_ordered(n_steps - 1, prev.h, prev.m);
    }
    if (!kAtomic && dq_leader) tma_store_wait<0>();

    // Epilogue: dK and dV straight from registers (pairs of columns), keys past
    // the sequence not written. dS left out the softmax scale: dK takes it here.
    Tensor tdKcdK = thr_dkv.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDim>>{}));
    Tensor kv_coord = make_tensor(tdKcdK.data(), acc_rowcol(tdKcdK.layout()));
    Tensor dk_rc = make_tensor(acc_dk.data(), acc_rowcol(acc_dk.layout()));
    Tensor dv_rc = make_tensor(acc_dv.data(), acc_rowcol(acc_dv.layout()));
    CUTE_UNROLL
    for (int mi = 0; mi < size<0>(dk_rc); ++mi) {
      const int j = k0 + get<0>(kv_coord(mi, 0));
      if (j >= seqlen_k) continue;
      Element* dk_row = static_cast<Element*>(p.dk) + sl.k_row(b, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, hk, j);
      Element* dv_row = static_cast<Element*>(p.dv) + sl.k_row(b, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, hk, j);
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(dk_rc); ni += 2) {
        const int c = get<1>(kv_coord(mi, ni));
        cutlass::Array<Element, 2> pk, pv;
        pk[0] = Element(dk_rc(mi, ni) * p.softmax_scale);
        pk[1] = Element(dk_rc(mi, ni + 1) * p.softmax_scale);
        pv[0] = Element(dv_rc(mi, ni));
        pv[1] = Element(dv_rc(mi, ni + 1));
        *reinterpret_cast<cutlass::Array<Element, 2>*>(dk_row + c) = pk;
        *reinterpret_cast<cutlass::Array<Element, 2>*>(dv_row + c) = pv;
      }
    }
  }
#endif
}

}  // namespace flashattn::sm90
