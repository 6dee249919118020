// The Hopper forward kernel (sm90a): TMA loads, wgmma products, warp-specialised,
// persistent.
//   producer warp group: one thread walks the block's tiles (fwd_scheduler.cuh)
//     and issues the TMA copies of each tile's Q and of its K and V tiles into a
//     ring of shared-memory stages; each buffer has a "full" mbarrier (TMA
//     transaction bytes) and an "empty" one (released by the consumers). The ring
//     and Q run ahead across tiles: the next tile's Q and first K/V land while
//     the consumers finish the current tile and write its output.
//   consumer warp groups (64 query rows each): S = Q K^T from shared memory, the
//     mask and online softmax in registers, P converted in registers to the A
//     operand of O += P V (V from shared memory), then the epilogue: O through
//     shared memory and a TMA store, LSE straight to memory. Within a group, S of
//     key tile i is issued with P V of key tile i-1 and the softmax of tile i
//     overlaps that P V; across the groups, named barriers hand the right to
//     issue wgmma round the groups (pingpong), so one group's softmax or epilogue
//     hides under the others' products.
// Registers move from the producer to the consumers with setmaxnreg.
// Building with FLASHATTN_SM90_HANG_CHECK turns any hang into a report and a
// trap (hang_check.cuh).
#pragma once

#include <climits>
#include <cmath>
#include <type_traits>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_conversion.h>

#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"
#include "kernels/common/quad_reduce.cuh"
#include "kernels/common/seqlen.h"
#include "kernels/sm90/fwd_scheduler.cuh"
#include "kernels/sm90/fwd_softmax.cuh"
#include "kernels/sm90/hang_check.cuh"
#include "kernels/sm90/fwd_traits.h"
#include "kernels/sm90/mma_utils.cuh"

namespace flashattn::sm90 {

using detail::FwdKernelParams;

// What the kernel receives: the call's parameters and the TMA descriptors.
template <typename Traits>
struct FwdArgs {
  FwdKernelParams p;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaKV tma_k;
  typename Traits::TmaKV tma_v;
  typename Traits::TmaO tma_o;
  TileScheduler sched;  // built on the host (fwd_scheduler.cuh)
  // A batched KV cache's keys in use per sequence (null: every key). The walk's first
  // key tile, partly past them, is then loaded ending at the last used key (TMA fills
  // rows before key 0 with zeros), so that no unused row (which may hold NaN) meets the
  // P V product; its keys that the next tile covers are masked (fwd_kv.h).
  const int32_t* seqused_k = nullptr;
  // A cut last round (fwd_split.h): piece j's normalised O, kBlockM rows of
  // kHeadDim floats from o_part + j * kBlockM * kHeadDim, and its rows' LSE from
  // lse_part + j * kBlockM; merged by fwd_merge.cuh. Null without a cut.
  float* o_part = nullptr;
  float* lse_part = nullptr;
};

// Position in a ring of mbarrier-guarded buffers. It runs on across tiles, so
// each barrier's phase parity stays in step with its completions.
template <int kStages>
struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

using detail::quad_max;
using detail::quad_sum;

// kMods: the contract's score modifiers (softcap, ALiBi; also a non-positive
// scale) run on every score before the mask; the scale is then applied here and
// p.scale_log2 is log2(e). Without them the scale is folded into exp2.
template <typename Traits, bool kMods>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fwd_kernel(const __grid_constant__ FwdArgs<Traits> args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Element = typename Traits::Element;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  using NamedBarrier = cutlass::arch::NamedBarrier;
  using Tile = FwdTile<Traits::kBlockM, Traits::kBlockN>;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kStages = Traits::kStages, kGroups = Traits::kConsumerGroups, kGroupRows = Traits::kGroupRows;
  constexpr bool kLateP = Traits::kLateP;
  const FwdKernelParams& p = args.p;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);
  const TileScheduler& sched = args.sched;
  // Packed batches are one sequence of total rows to TMA; a sequence starts at
  // its offset, and rows read past its end belong to masked keys or unstored rows.
  const bool packed = p.cu_seqlens_q != nullptr;
  const int batches = packed ? 1 : int(p.batch);
  const int rows_q = int(packed ? p.total_q : p.seqlen_q), rows_k = int(packed ? p.total_k : p.seqlen_k);

  const int warp_group = threadIdx.x / 128;
#ifdef FLASHATTN_SM90_HANG_CHECK
  HangMarks* const marks = &smem.hang;
#else
  HangMarks* const marks = nullptr;
#endif
  if (threadIdx.x == 0) {
    hang_init(marks);
    Barrier::init(&smem.q_full, 1);
    Barrier::init(&smem.q_empty, Traits::kConsumerThreads);
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
    // Producer: per tile, K of its first key tile, then Q once the consumers are
    // done with the previous Q, then V; then the rest of the key tiles, walked
    // from the last down, as the consumers do.
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
#ifdef FLASHATTN_SM90_HANG_CHECK
    if (threadIdx.x == 32) hang_watchdog(marks, kGroups);
#endif
    if (threadIdx.x != 0) return;
    Tensor mQ = args.tma_q.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
    Tensor mK = args.tma_k.get_tma_tensor(make_shape(rows_k, kHeadDim, int(p.heads_kv), batches));
    Tensor mV = args.tma_v.get_tma_tensor(make_shape(rows_k, kHeadDim, int(p.heads_kv), batches));
    const int group_size = int(p.heads_q / p.heads_kv);
    PipeState<kStages> kv;
    uint32_t q_phase = 0;
    for (int r = 0; sched.valid(sched.tile(r)); ++r) {
      const int t = sched.tile(r);
      const Tile tile(p, sched.decode(t), args.seqused_k);
      if (!tile.has_work()) continue;
      const int bb = packed ? 0 : tile.b, hk = tile.h / group_size;
      const auto q_start = make_coord(tile.q_offset, _0{}), k_start = make_coord(tile.k_offset, _0{});
      Tensor gQ = local_tile(domain_offset(q_start, mQ(_, _, tile.h, bb)), Shape<Int<kBlockM>, Int<kHeadDim>>{},
                             make_coord(tile.m_block, _0{}));
      Tensor gK = local_tile(domain_offset(k_start, mK(_, _, hk, bb)), Shape<Int<kBlockN>, Int<kHeadDim>>{},
                             make_coord(_, _0{}));
      Tensor gV = local_tile(domain_offset(k_start, mV(_, _, hk, bb)), Shape<Int<kBlockN>, Int<kHeadDim>>{},
                             make_coord(_, _0{}));
      auto [tQgQ, tQsQ] = tma_partition(args.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
      auto [tKgK, tKsK] = tma_partition(args.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
      auto [tVgV, tVsV] = tma_partition(args.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
      // With a KV cache, the first key tile when it runs past the used keys: its rows end
      // at the last used key (keys kBlockN before it; below 0 TMA gives zeros).
      const bool shift = args.seqused_k != nullptr && tile.n_block_max * kBlockN > tile.seqlen_k;
      // K or V of the shifted tile into stage s (only built when it is loaded, for the
      // producer's few registers).
      auto copy_shifted = [&](const auto& tma, auto& mX, auto& sX, uint64_t& bar, int s) __attribute__((always_inline)) {
        const int row0 = tile.k_offset + tile.seqlen_k - kBlockN;
        Tensor gX = local_tile(domain_offset(make_coord(row0, _0{}), mX(_, _, hk, bb)),
                               Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(_0{}, _0{}));
        auto [tXgX, tXsX] = tma_partition(tma, _0{}, Layout<_1>{}, group_modes<0, 2>(sX), group_modes<0, 2>(gX));
        copy(tma.with(bar), tXgX, tXsX(_, s));
      };
      for (int i = 0; i < tile.n_tiles; ++i) {
        const int n_block = tile.n_block_max - 1 - i, s = kv.stage;
        // Parity phase ^ 1: on the ring's first lap this returns at once.
        wait_barrier(&smem.k_empty[s], kv.phase ^ 1, Where::kKEmpty, s, t, n_block, marks, 0);
        Barrier::arrive_and_expect_tx(&smem.k_full[s], Traits::kTmaBytesKV);
        if (shift && i == 0) copy_shifted(args.tma_k, mK, sK, smem.k_full[s], s);
        else copy(args.tma_k.with(smem.k_full[s]), tKgK(_, n_block), tKsK(_, s));
        if (i == 0) {
          wait_barrier(&smem.q_empty, q_phase ^ 1, Where::kQEmpty, 0, t, -1, marks, 0);
          Barrier::arrive_and_expect_tx(&smem.q_full, Traits::kTmaBytesQ);
          copy(args.tma_q.with(smem.q_full), tQgQ, tQsQ);
          q_phase ^= 1;
        }
        wait_barrier(&smem.v_empty[s], kv.phase ^ 1, Where::kVEmpty, s, t, n_block, marks, 0);
        Barrier::arrive_and_expect_tx(&smem.v_full[s], Traits::kTmaBytesKV);
        if (shift && i == 0) copy_shifted(args.tma_v, mV, sV, smem.v_full[s], s);
        else copy(args.tma_v.with(smem.v_full[s]), tVgV(_, n_block), tVsV(_, s));
        kv.advance();
      }
    }
    hang_mark(marks, 0, Where::kDone, 0);
    return;
  }

  // Consumers.
  const int tidx = threadIdx.x - 128;
  // kUniformGroup: the same index, broadcast from lane 0, which ptxas then knows
  // to be warp-uniform (uniform registers for what derives from it; fwd_traits.h).
  const int group = Traits::kUniformGroup ? cutlass::canonical_warp_group_idx() - 1 : tidx / 128;
  const bool elected = tidx % 128 == 0;
  const int slot = group + 1;  // hang-check role
  hang_mark(marks, slot, Where::kRegs, 0);
  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
  hang_mark(marks, slot, Where::kBusy, 0);
  typename Traits::TiledMmaS mma_s;
  typename Traits::TiledMmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(tidx);
  auto thr_o = mma_o.get_thread_slice(tidx);
  // Q's descriptors depend on the group alone: from the slice of the group's first
  // thread (a warp-uniform index with kUniformGroup) they are uniform values, formed
  // in uniform registers without a move per wgmma (as the backward's, v45), and held
  // there across the key loop (q_desc_in_loop's re-derivation, whose empty asm would
  // put them back in a thread register, is left out unless the table entry asks for
  // it: fwd_traits.h). The score-modifier kernels keep the thread's slice (8 bytes
  // of spill at hd128 otherwise).
  constexpr bool kGroupDesc = Traits::kUniformGroup && !kMods;
  constexpr bool kQDescHere = Traits::kQDescInLoop && (!kGroupDesc || Traits::kQDescRederiveUniform);
  auto grp_s = mma_s.get_thread_slice(kGroupDesc ? group * 128 : tidx);
  Tensor tSrQ = grp_s.partition_fragment_A(sQ);   // smem descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);   // (.., .., k, stage)
  Tensor tOrV = thr_o.partition_fragment_B(sVt);  // (.., .., k, stage)
  Tensor acc_o = partition_fragment_C(mma_o, Shape<Int<kBlockM>, Int<kHeadDim>>{});
  Tensor o_rc = make_tensor(acc_o.data(), acc_rowcol(acc_o.layout()));
  // (row, col) of every score this thread holds, within the block's tile.
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  Tensor coord = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
  constexpr int kRows = decltype(size<0>(coord))::value;
  float row_max[kRows], row_sum[kRows], rescale[kRows];
  bool moved = false;  // the last softmax moved a reference max of the warp (fwd_softmax.cuh)
  const float scale_log2 = p.scale_log2;

  // Epilogue pieces: the normalised O goes through shared memory (stmatrix) and
  // leaves with one TMA store per group; sO is Q's buffer when O has no tile of
  // its own (Traits::kOInQ).
  Element* o_smem = Traits::kOInQ ? smem.q.data() : smem.o.data();
  Tensor sO = make_tensor(make_smem_ptr(o_smem), typename Traits::SmemLayoutQ{});
  Tensor sOg = make_tensor(make_smem_ptr(o_smem + group * Traits::kGroupOffset), typename Traits::SmemLayoutGroup{});
  auto copy_o = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_o);
  auto thr_copy_o = copy_o.get_thread_slice(tidx);
  Tensor tOsO = thr_copy_o.partition_D(sO);

  // Pingpong: the groups take turns issuing their products, 0, 1, .., 0, 1, ..
  // (named barrier g grants group g; the previous group arrives on it after its
  // turn), so one group's softmax runs while another's wgmmas occupy the tensor
  // cores. Turns continue from tile to tile; the last group hands the first turn
  // of the next tile over only when that tile has work, so that no arrival is left
  // pending when the block exits.
  // Named-barrier ids (cutlass adds its 8 reserved ones): turns 0 .. kGroups-1,
  // group syncs kGroups .. 2 kGroups-1, at most 13 of the 16.
  static_assert(2 * kGroups + cutlass::arch::NamedBarrier::ReservedNamedBarrierCount <= 16, "named barrier ids");
  int t = 0;  // the current tile's number, for the hang report
  auto wait_turn = [&]() __attribute__((always_inline)) {
    hang_mark(marks, slot, Where::kTurn, t);
    NamedBarrier::sync(2 * 128, group);
    hang_mark(marks, slot, Where::kBusy, t);
  };
  auto pass_turn = [&]() __attribute__((always_inline)) {
    NamedBarrier::arrive(2 * 128, group + 1 == kGroups ? 0 : group + 1);
  };
  // Only the group's elected thread stores O, so only it waits for the store.
  auto store_wait = [&]() __attribute__((always_inline)) {
    if (elected) {
      hang_mark(marks, slot, Where::kStoreWait, t);
      tma_store_wait<0>();
      hang_mark(marks, slot, Where::kBusy, t);
    }
  };
  auto group_sync = [&]() __attribute__((always_inline)) {
    hang_mark(marks, slot, Where::kGroupSync, t);
    NamedBarrier::sync(128, kGroups + group);
    hang_mark(marks, slot, Where::kBusy, t);
  };
  bool owes_pass = group == kGroups - 1;  // the grant of the first turn

  Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<kBlockM>, Int<kBlockN>>{});
  Tensor rP = make_tensor<Element>(acc_s.layout());
  Tensor tOrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
  PipeState<kStages> kv;
  uint32_t q_phase = 0;
  for (int r = 0; sched.valid(sched.tile(r)); ++r) {
    t = sched.tile(r);
    const Tile tile(p, sched.decode(t), args.seqused_k);
    if (!tile.has_rows()) continue;
    const int m0 = tile.m0, seqlen_q = tile.seqlen_q;
    clear(acc_o);
    // The mask's bounds for this thread's rows and for the whole tile, as 32-bit
    // values (lengths are below 2^30), computed once per tile.
    int row_lo[kRows], row_hi[kRows], full_lo, full_hi;
    {
      const detail::Mask mask = tile.mask(p);
      CUTE_UNROLL
      for (int mi = 0; mi < kRows; ++mi) {
        const int row = m0 + get<0>(coord(mi, 0));
        row_lo[mi] = int(mask.col_begin(row));
        row_hi[mi] = int(mask.col_end(row));
        row_max[mi] = -INFINITY;
        row_sum[mi] = 0.f;
      }
      // Key tiles [n0, n0 + kBlockN) with full_lo <= n0 and n0 + kBlockN <= full_hi
      // are visible to every row of the tile (Mask::tile_full).
      full_lo = int(mask.col_begin(tile.m_end - 1));
      full_hi = int(mask.col_end(m0));
    }

    const float slope = kMods && p.alibi_slopes != nullptr ? p.alibi_slopes[tile.b * p.alibi_batch_stride + tile.h] : 0.f;

    // Scores of key tile n0 -> probabilities: score modifiers, mask, new running
    // max, the factor that rescales what was accumulated (applied to O later, once
    // P V of the previous tile has landed), exp2, row sums.
    auto softmax = [&](auto& acc, int n0) __attribute__((always_inline)) {
      Tensor sc = make_tensor(acc.data(), acc_rowcol(acc.layout()));
      if constexpr (kMods) {
        const int diag_offset = tile.seqlen_k - seqlen_q;  // key position of row 0
        CUTE_UNROLL
        for (int mi = 0; mi < kRows; ++mi) {
          const int i = m0 + get<0>(coord(mi, 0));
          CUTE_UNROLL
          for (int ni = 0; ni < size<1>(sc); ++ni) {
            const int j = n0 + get<1>(coord(mi, ni));
            float x = sc(mi, ni) * p.softmax_scale;
            if (p.softcap > 0.f) x = p.softcap * tanhf(x / p.softcap);
            if (p.alibi_slopes != nullptr) x -= slope * float(abs(i + diag_offset - j));
            sc(mi, ni) = x;
          }
        }
      }
      if (n0 < full_lo || n0 + kBlockN > full_hi) {
        // Columns relative to this thread's first one are constants once unrolled,
        // so each score meets its row's bounds, shifted to match, as compares with
        // immediates: no index per score. A tile right of every row's left bound
        // (n0 >= full_lo: every causal tile) tests the right bound alone. ncu of
        // hd64 causal N = 512 beside cuDNN (kernel notes, sm90 forward v10): the
        // two-bound test with an index per score was 4.6M of the kernel's 12M
        // instructions more than cuDNN's.
        const int c0 = get<1>(coord(0, 0));
        auto mask_scores = [&](auto test_lo) __attribute__((always_inline)) {
          CUTE_UNROLL
          for (int mi = 0; mi < kRows; ++mi) {
            const int lo = row_lo[mi] - n0 - c0, hi = row_hi[mi] - n0 - c0;
            CUTE_UNROLL
            for (int ni = 0; ni < size<1>(sc); ++ni) {
              const int q = get<1>(coord(mi, ni)) - c0;
              if ((decltype(test_lo)::value && q < lo) || q >= hi) sc(mi, ni) = -INFINITY;
            }
          }
        };
        if (n0 >= full_lo) mask_scores(std::false_type{});
        else mask_scores(std::true_type{});
      }
      moved = softmax_rows_lazy<Traits::kLazyRescale>(sc, row_max, row_sum, rescale, scale_log2);
    };

    // Key tiles this group's rows cannot see. The walk starts at the last key
    // tile, and under a causal mask its first `skip` tiles lie past every key the
    // group's last row sees (hd64's 192-row blocks over 128-key tiles: one or two
    // diagonal tiles for groups 0 and 1); a group whose rows all lie past the
    // sequence's end (the last query tile's) sees none (skip = n_tiles). The group
    // idles through those tiles: no products, no softmax; it still takes and
    // passes its turns and releases each K / V stage once it has landed, in the
    // order the working groups do, so the producer's ring and the turns (n_tiles
    // + 1 a tile for every group) run as usual. Three-group blocks only: in
    // two-group kernels the idle path's code alone cost hd128 1-5% where it never
    // runs (kernel notes, sm90 forward v16).
    int skip = 0;
    if constexpr (kGroups == 3) {
      const int g_row0 = m0 + group * kGroupRows;
      if (g_row0 >= seqlen_q) {
        skip = tile.n_tiles;
      } else {
        const int g_last = min(g_row0 + kGroupRows, seqlen_q) - 1;
        const int g_hi = int(tile.mask(p).col_end(g_last));  // the group's keys end here
        skip = min(max(tile.n_block_max - (g_hi + kBlockN - 1) / kBlockN, 0), tile.n_tiles);
      }
    }
    const bool group_idle = skip == tile.n_tiles;
    // The key tiles this group works on: [w_max - w_tiles, w_max).
    const int w_max = tile.n_block_max - skip, w_tiles = tile.n_tiles - skip;
    // The last group hands the first turn of the next tile over only when that
    // tile has work (owes_pass otherwise).
    auto pass_last_turn = [&]() __attribute__((always_inline)) {
      if (group + 1 < kGroups) {
        pass_turn();
      } else {
        const int t_next = sched.tile(r + 1);
        if (sched.valid(t_next) && Tile(p, sched.decode(t_next), args.seqused_k).has_work()) pass_turn();
        else owes_pass = true;
      }
    };
    // The first `count` key tiles of the walk without products: one turn each,
    // K released once it has landed, V once it has landed and the next tile's
    // turn has come (as P V would have). Returns the last tile's V stage, which
    // the caller releases.
    auto idle_through = [&](int count) __attribute__((always_inline)) {
      PipeState<kStages> held;
      for (int i = 0; i < count; ++i) {
        const int n_block = tile.n_block_max - 1 - i;
        wait_barrier(&smem.k_full[kv.stage], kv.phase, Where::kKFull, kv.stage, t, n_block, marks, slot);
        wait_turn();
        if (i > 0) wait_barrier(&smem.v_full[held.stage], held.phase, Where::kVFull, held.stage, t, n_block + 1, marks, slot);
        pass_turn();
        Barrier::arrive(&smem.k_empty[kv.stage]);
        if (i > 0) Barrier::arrive(&smem.v_empty[held.stage]);
        held = kv;
        kv.advance();
      }
      return held;
    };
    if (tile.has_work() && group_idle) {
      if (owes_pass) {
        pass_turn();
        owes_pass = false;
      }
      wait_barrier(&smem.q_full, q_phase, Where::kQFull, 0, t, -1, marks, slot);
      q_phase ^= 1;
      const PipeState<kStages> prev = idle_through(tile.n_tiles);
      if constexpr (!Traits::kOInQ) Barrier::arrive(&smem.q_empty);
      wait_barrier(&smem.v_full[prev.stage], prev.phase, Where::kVFull, prev.stage, t,
                   tile.n_block_max - tile.n_tiles, marks, slot);
      wait_turn();
      pass_last_turn();
      Barrier::arrive(&smem.v_empty[prev.stage]);
    } else if (tile.has_work()) {
      if (owes_pass) {
        pass_turn();
        owes_pass = false;
      }
      if (skip > 0) {  // the key tiles past this group's rows first
        const PipeState<kStages> held = idle_through(skip);
        wait_barrier(&smem.v_full[held.stage], held.phase, Where::kVFull, held.stage, t, w_max, marks, slot);
        Barrier::arrive(&smem.v_empty[held.stage]);
      }
      // Software pipeline inside a group: S of key tile i is issued together with
      // P V of key tile i-1, and the softmax of tile i is meant to run while that
      // P V is on the tensor cores (in the SASS it does only with kLateP).
      wait_barrier(&smem.q_full, q_phase, Where::kQFull, 0, t, -1, marks, slot);
      q_phase ^= 1;
      wait_barrier(&smem.k_full[kv.stage], kv.phase, Where::kKFull, kv.stage, t, w_max - 1, marks, slot);
      wait_turn();
      wgmma_issue<true, false>(mma_s, desc_here<kQDescHere>(tSrQ), tSrK(_, _, _, kv.stage), acc_s);
      pass_turn();
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_s);
      Barrier::arrive(&smem.k_empty[kv.stage]);
      if (args.seqused_k != nullptr && skip == 0 && tile.n_block_max * kBlockN > tile.seqlen_k) {
        // The producer's shifted first tile (KV cache): keys [Sk - kBlockN, Sk), of
        // which those below this tile's own start belong to the next tile: masked.
        const int own = (w_max - 1) * kBlockN;
        int lo_kept[kRows];
        CUTE_UNROLL
        for (int mi = 0; mi < kRows; ++mi) {
          lo_kept[mi] = row_lo[mi];
          row_lo[mi] = max(row_lo[mi], own);
        }
        const int full_lo_kept = full_lo;
        full_lo = INT_MAX;  // every score takes both bounds
        softmax(acc_s, tile.seqlen_k - kBlockN);
        full_lo = full_lo_kept;
        CUTE_UNROLL
        for (int mi = 0; mi < kRows; ++mi) row_lo[mi] = lo_kept[mi];
      } else {
        softmax(acc_s, (w_max - 1) * kBlockN);
      }
      if constexpr (!kLateP) convert_into(acc_s, rP);
      PipeState<kStages> prev = kv, prev2 = kv;  // prev2: kLateP's V to release
      kv.advance();
      // With kLateP, P of a tile is formed at the top of the next loop turn,
      // after the wait for the P V that still reads P's registers: placed right
      // after the softmax, that wait is hoisted above it by ptxas (it schedules
      // the wait as early as its block allows), and the softmax then never
      // overlaps P V (ncu, hd128: 13.8% of the consumers' stall samples on it).
      // O then takes each tile's factor while S of the next tile runs.
      auto form_p = [&](bool release_v) __attribute__((always_inline)) {
        warpgroup_wait<0>();  // P V of two tiles back is done (nothing in flight at i = 1)
        warpgroup_fence_operand(acc_o);
        warpgroup_fence_operand(rP);
        if (release_v) Barrier::arrive(&smem.v_empty[prev2.stage]);
        convert_into(acc_s, rP);
      };
      for (int i = 1; i < w_tiles; ++i) {
        const int n_block = w_max - 1 - i;
        if constexpr (kLateP) form_p(i > 1);
        wait_barrier(&smem.k_full[kv.stage], kv.phase, Where::kKFull, kv.stage, t, n_block, marks, slot);
        wait_turn();
        wgmma_issue<true, false>(mma_s, desc_here<kQDescHere>(tSrQ), tSrK(_, _, _, kv.stage), acc_s);
        if constexpr (kLateP) rescale_rows_if(o_rc, rescale, moved);
        wait_barrier(&smem.v_full[prev.stage], prev.phase, Where::kVFull, prev.stage, t, n_block + 1, marks, slot);
        wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, prev.stage), acc_o);
        pass_turn();
        warpgroup_wait<1>();  // S of tile i is in; P V of tile i-1 may still run
        warpgroup_fence_operand(acc_s);
        Barrier::arrive(&smem.k_empty[kv.stage]);
        softmax(acc_s, n_block * kBlockN);
        if constexpr (!kLateP) {
          warpgroup_wait<0>();
          warpgroup_fence_operand(acc_o);
          warpgroup_fence_operand(rP);
          Barrier::arrive(&smem.v_empty[prev.stage]);
          rescale_rows_if(o_rc, rescale, moved);
          convert_into(acc_s, rP);
        }
        prev2 = prev;
        prev = kv;
        kv.advance();
      }
      if constexpr (kLateP) form_p(w_tiles > 1);
      // Every S of the tile has completed: Q may be replaced by the next tile's
      // (unless O is staged in it).
      if constexpr (!Traits::kOInQ) Barrier::arrive(&smem.q_empty);
      wait_barrier(&smem.v_full[prev.stage], prev.phase, Where::kVFull, prev.stage, t,
                   tile.n_block_max - tile.n_tiles, marks, slot);
      if constexpr (kLateP) {
        if (w_tiles > 1) rescale_rows_if(o_rc, rescale, moved);
      }
      wait_turn();
      wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, prev.stage), acc_o);
      pass_last_turn();
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_o);
      Barrier::arrive(&smem.v_empty[prev.stage]);
    }

    // Epilogue: normalise, LSE straight to memory, then O. A piece of a cut tile
    // (fwd_split.h) writes both to its scratch slot instead; one whose scores were
    // all -inf weighs nothing in the merge (O = 0, LSE = -inf), as its row may see
    // finite scores in another piece.
    const detail::SeqLen sl(p, tile.b);
    const float ln2 = 0.6931471805599453f;
    const int piece = t - sched.whole;  // >= 0: the piece's slot
    float inv[kRows];
    CUTE_UNROLL
    for (int mi = 0; mi < kRows; ++mi) {
      const float sum = quad_sum(row_sum[mi]);
      const int i = m0 + get<0>(coord(mi, 0));
      inv[mi] = 1.f / sum;
      float lse = row_max[mi] * scale_log2 * ln2 + logf(sum);
      if (sum == 0.f) {
        const bool sees_keys = row_lo[mi] < row_hi[mi] && piece < 0;
        inv[mi] = sees_keys ? NAN : 0.f;
        lse = sees_keys ? NAN : -INFINITY;
      }
      if (i < seqlen_q && get<1>(coord(mi, 0)) == 0) {
        if (piece >= 0) args.lse_part[int64_t(piece) * kBlockM + (i - m0)] = lse;
        else if (p.lse != nullptr) p.lse[sl.lse_index(p, tile.b, tile.h, i)] = lse;
      }
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(o_rc); ++ni) o_rc(mi, ni) *= inv[mi];
    }
    // A packed sequence ends inside the tensor TMA sees, so a group whose rows
    // cross its end stores from registers (only rows < seqlen_q); batched tensors
    // end with the sequence and TMA drops the rows past it. Tiles without keys
    // never touched Q's buffer and store zeros directly.
    const int g_row0 = m0 + group * kGroupRows;
    const bool via_tma = tile.has_work() && (!packed || g_row0 + kGroupRows <= seqlen_q);
    if (piece >= 0) {
      // fp32 rows straight from registers: a quad's four threads write 32
      // consecutive bytes of a row. Pieces always have keys.
      Tensor tOcO = thr_o.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
      Tensor ocoord = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
      float* const o_piece = args.o_part + int64_t(piece) * kBlockM * kHeadDim;
      CUTE_UNROLL
      for (int mi = 0; mi < kRows; ++mi) {
        const int row = get<0>(coord(mi, 0));
        if (m0 + row >= seqlen_q) continue;
        CUTE_UNROLL
        for (int ni = 0; ni < size<1>(o_rc); ni += 2)
          *reinterpret_cast<float2*>(o_piece + row * kHeadDim + get<1>(ocoord(mi, ni))) =
              make_float2(o_rc(mi, ni), o_rc(mi, ni + 1));
      }
      if constexpr (Traits::kOInQ) Barrier::arrive(&smem.q_empty);
    } else if (via_tma) {
      Tensor rO = make_tensor<Element>(acc_o.layout());
      convert_into(acc_o, rO);
      if constexpr (!Traits::kOInQ)
        store_wait();  // the previous tile's store has read sO
      group_sync();
      copy(copy_o, thr_copy_o.retile_S(rO), tOsO);
      tma_store_fence();  // generic-proxy writes, visible to the TMA unit
      group_sync();
      if (elected && g_row0 < seqlen_q) {
        const int bb = packed ? 0 : tile.b;
        Tensor mO = args.tma_o.get_tma_tensor(make_shape(rows_q, kHeadDim, int(p.heads_q), batches));
        Tensor gO = local_tile(domain_offset(make_coord(tile.q_offset, _0{}), mO(_, _, tile.h, bb)),
                               Shape<Int<kGroupRows>, Int<kHeadDim>>{}, make_coord(g_row0 / kGroupRows, _0{}));
        auto [tOgO, tOsOg] = tma_partition(args.tma_o, _0{}, Layout<_1>{}, group_modes<0, 2>(sOg), group_modes<0, 2>(gO));
        copy(args.tma_o, tOsOg, tOgO);
        tma_store_arrive();
      }
      if constexpr (Traits::kOInQ) {
        // The next Q may land once this group's rows have been read out.
        store_wait();
        group_sync();
        Barrier::arrive(&smem.q_empty);
      }
    } else {
      Tensor tOcO = thr_o.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
      Tensor ocoord = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
      CUTE_UNROLL
      for (int mi = 0; mi < kRows; ++mi) {
        const int i = m0 + get<0>(coord(mi, 0));
        if (i >= seqlen_q) continue;
        Element* o_row = static_cast<Element*>(p.out) +
                         sl.q_row(tile.b, p.o_batch_stride, p.o_row_stride, p.o_head_stride, tile.h, i);
        CUTE_UNROLL
        for (int ni = 0; ni < size<1>(o_rc); ni += 2) {
          const int c = get<1>(ocoord(mi, ni));
          cutlass::Array<Element, 2> pair;
          pair[0] = Element(o_rc(mi, ni));
          pair[1] = Element(o_rc(mi, ni + 1));
          *reinterpret_cast<cutlass::Array<Element, 2>*>(o_row + c) = pair;
        }
      }
      if constexpr (Traits::kOInQ)
        if (tile.has_work()) Barrier::arrive(&smem.q_empty);
    }
  }
  // Shared memory must outlive the reads of the last TMA store.
  store_wait();
  hang_mark(marks, slot, Where::kDone, t);
#endif
}

}  // namespace flashattn::sm90
