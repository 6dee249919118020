// The sm80 forward kernel (FlashAttention-2 structure, mma.sync tensor cores):
// one thread block computes kBlockM query rows of one (sequence, head). Q stays
// in shared memory; K and V tiles arrive by cp.async, K of the next step while
// the current one is in use; S = Q K^T and O += P V run on the tensor cores with
// fp32 accumulators; the online softmax keeps a running max and sum per row.
// Key tiles outside the mask are never loaded; the mask is evaluated per element
// only on tiles that cut the diagonal, the window edges or the sequence end.
#pragma once

#include <cmath>
#include <type_traits>

#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/seqlen.h"
#include "kernels/sm80/fwd_kv.h"
#include "kernels/sm80/tile_utils.cuh"
#include "kernels/sm80/traits.h"

namespace flashattn::sm80 {

using detail::FwdKernelParams;

// Turns raw q.k accumulators of one tile into the exponent base of the softmax:
// the contract's score modifiers and mask, applied in order. With kMods off the
// scale is folded into exp2 later (scale_log2); with kMask off the tile is known
// to be fully visible.
template <bool kMods, bool kMask, typename Scores, typename Coords>
__device__ __forceinline__ void apply_scores(Scores& s, const Coords& coord, const FwdKernelParams& p,
                                             int seqlen_q, int seqlen_k, float slope, int m0, int n0) {
  // Sequence lengths are below 2^30 (checked on the host): 32-bit indices suffice.
  const detail::Mask mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
  const int diag_offset = seqlen_k - seqlen_q;
  CUTE_UNROLL
  for (int mi = 0; mi < size<0>(s); ++mi) {
    const int i = m0 + get<0>(coord(mi, 0));
    int lo = 0, hi = 0;
    if constexpr (kMask) {
      lo = int(mask.col_begin(i));
      hi = int(mask.col_end(i));
    }
    CUTE_UNROLL
    for (int ni = 0; ni < size<1>(s); ++ni) {
      const int j = n0 + get<1>(coord(mi, ni));
      float x = s(mi, ni);
      if constexpr (kMods) {
        x *= p.softmax_scale;
        if (p.softcap > 0.f) x = p.softcap * tanhf(x / p.softcap);
        if (p.alibi_slopes) x -= slope * float(abs(i + diag_offset - j));
      }
      if (kMask && (j < lo || j >= hi)) x = -INFINITY;
      s(mi, ni) = x;
    }
  }
}

// K buffers of a forward kernel. Two for the plain kernels at hd128 and hd256's
// 128 x 64 tiles: the next K tile is then issued at a tile's start, beside V's,
// where the scores are not live yet, and without a branch. Issued after the
// scores (one buffer) its copies' addresses and predicates spilled at the
// register limit of these kernels, and a branch around it was if-converted.
// Measured (sm80 forward v8): hd128 +2-4% from N = 4096 (spills 184 -> 112 B),
// hd256 128 x 64 +4% (52 B -> none). The extra buffer (16 / 32 KiB) is launched
// as dynamic shared memory past V. hd96 measured level with it on the H200, and
// its 60 KiB would fit one block per SM where it now fits two (GPUs of 100 KiB
// per SM), so it keeps one.
template <typename Traits, bool kMods>
constexpr int fwd_k_buffers() {
  constexpr int d = Traits::kHeadDim;
  return !kMods && (d == 128 || (d == 256 && Traits::kBlockM == 128)) ? 2 : 1;
}

// kKv: a KV cache's used lengths and block table (FwdKvArgs), a variant of its own so
// that the kernels of plain calls stay as they were (with the table's per-tile branch
// in them the hd128 kernel ran 4-8% slower: kernel notes, session 40).
template <typename Traits, bool kMods, bool kKv>
__global__ void __launch_bounds__(Traits::kNThreads, 1)
    fwd_kernel(const __grid_constant__ std::conditional_t<kKv, FwdKvArgs, FwdKernelParams> p) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  extern __shared__ __align__(128) char smem[];
  const int tidx = threadIdx.x;
  const bool reverse = p.window_right >= 0;  // causal-like: later query tiles are longer, start them first
  const int m_block = reverse ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z;
  // Tile loads without branches (sm80 forward v7): +0.3-2.4% at hd64 and
  // +4-7% at hd256's 64 x 64 tiles, but -2-4% at hd128 and -1-4% at hd256's
  // 128 x 64 below N = 4096, whose spills grew with it; measured, so per kernel.
  constexpr bool kFlatLoads = kHeadDim == 64 || (kHeadDim == 256 && kBlockM == 64);
  // Two K buffers (fwd_k_buffers): the next K tile issued at a tile's start.
  constexpr bool kTwoK = fwd_k_buffers<Traits, kMods>() == 2;
  constexpr bool kFlatV = kFlatLoads || kTwoK;

  const detail::SeqLen sl(p, b);
  // A KV cache's used keys (validated on the host only as a device pointer: clamped).
  // Whole tiles end before them; the last one's rows past them are predicated off
  // and zero-filled by cp.async, so the unused rows never meet P.
  const int seqlen_q = int(sl.seqlen_q);
  int seqlen_k = int(sl.seqlen_k);
  if constexpr (kKv)
    if (p.seqused_k) seqlen_k = max(0, min(p.seqused_k[b], seqlen_k));
  const int m0 = m_block * kBlockM;
  if (m0 >= seqlen_q) return;
  int n_block_min, n_block_max;
  {
    const detail::Mask mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
    const int c_begin = int(mask.col_begin(m0));
    const int c_end = int(mask.col_end(min(m0 + kBlockM, seqlen_q) - 1));
    n_block_min = c_begin / kBlockN;
    n_block_max = c_end > c_begin ? (c_end + kBlockN - 1) / kBlockN : n_block_min;
  }
  const int hk = h / int(p.heads_q / p.heads_kv);
  const float slope = (kMods && p.alibi_slopes) ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.f;

  // Row strides fit in 32 bits (checked on the host); 64-bit math is done once
  // per tile on the base pointer, so per-thread offsets stay 32-bit.
  const int q_rs = int(p.q_row_stride), k_rs = int(p.k_row_stride), v_rs = int(p.v_row_stride),
            o_rs = int(p.o_row_stride);
  const auto* q_base = static_cast<const Element*>(p.q) + sl.q_row(b, p.q_batch_stride, p.q_row_stride, p.q_head_stride, h, m0);
  // A paged cache: each tile's block comes from this sequence's row of the table (an
  // entry outside the pool, which the host cannot check in device memory, is clamped
  // into it); the bases then hold the head only.
  const int32_t* blocks = nullptr;
  if constexpr (kKv)
    if (p.block_table) blocks = p.block_table + b * p.block_table_stride;
  const auto* k_base = static_cast<const Element*>(p.k) +
                       (blocks ? hk * p.k_head_stride : sl.k_row(b, p.k_batch_stride, p.k_row_stride, p.k_head_stride, hk, 0));
  const auto* v_base = static_cast<const Element*>(p.v) +
                       (blocks ? hk * p.v_head_stride : sl.k_row(b, p.v_batch_stride, p.v_row_stride, p.v_head_stride, hk, 0));
  auto* o_base = static_cast<Element*>(p.out) + sl.q_row(b, p.o_batch_stride, p.o_row_stride, p.o_head_stride, h, m0);
  // Offset of key tile n_block's first row from k_base / v_base.
  auto tile_row0 = [&](int n_block, int64_t batch_stride, int64_t row_stride) -> int64_t {
    if constexpr (kKv) {
      if (blocks != nullptr) {
        const int j = n_block * kBlockN;
        const int block = min(max(blocks[j / p.page_size], 0), p.num_blocks - 1);
        return int64_t(block) * batch_stride + int64_t(j % p.page_size) * row_stride;
      }
    }
    return int64_t(n_block) * kBlockN * row_stride;
  };
  auto k_tile = [&](int n_block) {
    return make_tensor(make_gmem_ptr(k_base + tile_row0(n_block, p.k_batch_stride, p.k_row_stride)), TileKV{},
                       make_stride(k_rs, _1{}));
  };
  auto v_tile = [&](int n_block) {
    return make_tensor(make_gmem_ptr(v_base + tile_row0(n_block, p.v_batch_stride, p.v_row_stride)), TileKV{},
                       make_stride(v_rs, _1{}));
  };
  Tensor gQ = make_tensor(make_gmem_ptr(q_base), TileQ{}, make_stride(q_rs, _1{}));
  Tensor gO = make_tensor(make_gmem_ptr(o_base), TileQ{}, make_stride(o_rs, _1{}));

  Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(sQ.data() + size(sQ), typename Traits::SmemLayoutKV{});
  Tensor sV = make_tensor(sK.data() + size(sK), typename Traits::SmemLayoutKV{});
  constexpr int kKSize = kBlockN * kHeadDim;  // elements of a K buffer; kTwoK's second one follows V
  Tensor sVt = make_tensor(sV.data(), typename Traits::SmemLayoutVt{});
  Tensor sVtNoSwizzle = make_tensor(sV.data().get(), typename Traits::SmemLayoutVtNoSwizzle{});

  // Global -> shared copies with row and head-dim predicates.
  typename Traits::GmemTiledCopyQKV gmem_copy;
  auto gmem_thr = gmem_copy.get_thread_slice(tidx);
  Tensor tQsQ = gmem_thr.partition_D(sQ);
  Tensor tKsK = gmem_thr.partition_D(sK);
  Tensor tVsV = gmem_thr.partition_D(sV);
  Tensor tQcQ = gmem_thr.partition_S(make_identity_tensor(TileQ{}));
  Tensor tKcK = gmem_thr.partition_S(make_identity_tensor(TileKV{}));
  Tensor qk_col_ok = make_tensor<bool>(make_shape(size<2>(tQsQ)));
  Tensor v_col_ok = make_tensor<bool>(make_shape(size<2>(tVsV)));
  CUTE_UNROLL
  for (int k = 0; k < size(qk_col_ok); ++k) {
    qk_col_ok(k) = get<1>(tQcQ(0, 0, k)) < p.head_dim_qk;
    v_col_ok(k) = get<1>(tKcK(0, 0, k)) < p.head_dim_v;
  }
  // Only the last key tile can end inside the sequence: rows are tested for that
  // one (the prologue's) and not in the main loop.
  auto load_k = [&](auto check_rows, int n_block) {
    copy_tile<decltype(check_rows)::value>(gmem_copy, gmem_thr.partition_S(k_tile(n_block)), tKsK, tKcK,
                                           qk_col_ok, seqlen_k - n_block * kBlockN);
  };
  auto load_v = [&](auto check_rows, int n_block) {
    copy_tile<decltype(check_rows)::value>(gmem_copy, gmem_thr.partition_S(v_tile(n_block)), tVsV, tKcK,
                                           v_col_ok, seqlen_k - n_block * kBlockN);
  };
  // The K tile after n_block, without a branch (kFlatLoads, kTwoK), into the K
  // buffer `offset` elements past sK: on the last tile its copies read nothing
  // and zero-fill that buffer, which nothing reads again.
  auto load_next_k = [&](int n_block, int offset) {
    const bool more = n_block > n_block_min;
    Tensor ok = make_tensor<bool>(make_shape(size(qk_col_ok)));
    CUTE_UNROLL
    for (int k = 0; k < size(ok); ++k) ok(k) = more && qk_col_ok(k);
    copy_tile<false>(gmem_copy, gmem_thr.partition_S(k_tile(more ? n_block - 1 : n_block)), stage_at(tKsK, offset),
                     tKcK, ok, 0);
    cute::cp_async_fence();
  };

  // Tensor-core partitions.
  typename Traits::TiledMma tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(tidx);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);
  Tensor tSrK = thr_mma.partition_fragment_B(sK);
  Tensor tOrVt = thr_mma.partition_fragment_B(sVtNoSwizzle);
  Tensor acc_o = partition_fragment_C(tiled_mma, TileQ{});
  auto smem_copy_q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_q = smem_copy_q.get_thread_slice(tidx);
  Tensor tSsQ = smem_thr_q.partition_S(sQ);
  auto smem_copy_k = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_k = smem_copy_k.get_thread_slice(tidx);
  Tensor tSsK = smem_thr_k.partition_S(sK);
  auto smem_copy_v = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma);
  auto smem_thr_v = smem_copy_v.get_thread_slice(tidx);
  Tensor tOsVt = smem_thr_v.partition_S(sVt);

  // (row, col) of every score this thread holds, in the (rows, cols) view.
  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  Tensor coord = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));

  // Prologue: Q and the last K tile (blocks walk the keys from the end).
  copy_tile(gmem_copy, gmem_thr.partition_S(gQ), tQsQ, tQcQ, qk_col_ok, seqlen_q - m0);
  if (n_block_max > n_block_min) load_k(std::true_type{}, n_block_max - 1);
  cute::cp_async_fence();
  clear(acc_o);

  constexpr int kRows = decltype(size<0>(coord))::value;
  float row_max[kRows], row_sum[kRows], rescale[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.f;
  }
  const float scale_log2 = p.scale_log2;
  Tensor o_rc = make_tensor(acc_o.data(), acc_rowcol(acc_o.layout()));

  // Tiles that cut the mask (or the sequence end) need per-score checks; the
  // others, usually all but one or two per row block, skip them. The visible
  // band makes the whole tiles one range [n_full_begin, n_full_end), found
  // once here so that no 64-bit mask state stays live in the loop (at 128 x 64
  // tiles those registers were what spilled).
  const detail::Mask block_mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
  const int m_end = min(m0 + kBlockM, seqlen_q);
  const int n_full_begin = (int(block_mask.col_begin(m_end - 1)) + kBlockN - 1) / kBlockN;
  const int n_full_end = int(block_mask.col_end(m0)) / kBlockN;  // col_end is at most seqlen_k
  // One key tile. kKind 1: the tile cuts the mask (or the sequence end) and
  // needs the per-score checks; 0: a whole tile, without them; 2: decided per
  // tile inside one body. Plain attention runs two bodies (0 and 1): with one
  // body and a branch around the checks, ptxas if-converted the checks and
  // issued all of them predicated off on every tile (hd64 128 x 64: 234 of the
  // loop's 854 instructions; the whole-tile body has 645). The variant with
  // score modifiers keeps one body (two spilled more there).
  auto key_tile = [&](int n_block, auto kind) __attribute__((always_inline)) {
    constexpr int kKind = decltype(kind)::value;
    Tensor acc_s = partition_fragment_C(tiled_mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
    clear(acc_s);
    cute::cp_async_wait<0>();
    __syncthreads();
    // kTwoK: the tile `it` (from 0, the prologue's K tile) has its K in buffer
    // it % 2 and issues the next one into the other, which the last tile read
    // before this barrier. Buffer 1 starts 2 * kKSize past sK, after V.
    const int it = n_block_max - 1 - n_block;
    const int k_here = kTwoK && (it & 1) ? 2 * kKSize : 0;
    // Only the tile holding the sequence end has rows to test, and it is never a
    // whole one. With kFlatLoads whole tiles skip the test and the others take
    // it; a branch between the two (as the other kernels keep) was if-converted
    // by ptxas into both, each instruction under a predicate moved from a
    // uniform one with a filler beside it: ~10% of the loop's issues at hd256
    // 64 x 64 (ncu; kernel notes, sm80 forward v7).
    if constexpr (kFlatV && kKind == 0) {
      load_v(std::false_type{}, n_block);
    } else if constexpr (kFlatV && kKind == 1) {
      load_v(std::true_type{}, n_block);
    } else {
      if ((n_block + 1) * kBlockN <= seqlen_k) load_v(std::false_type{}, n_block);
      else load_v(std::true_type{}, n_block);
    }
    cute::cp_async_fence();
    // kTwoK: committed after V's, so that the wait for V below leaves it in flight.
    if constexpr (kTwoK) load_next_k(n_block, (it & 1) ? 0 : 2 * kKSize);

    gemm_ss(acc_s, tSrQ, tSrK, tSsQ, stage_at(tSsK, k_here), tiled_mma, smem_copy_q, smem_copy_k, smem_thr_q,
            smem_thr_k);

    Tensor s = make_tensor(acc_s.data(), acc_rowcol(acc_s.layout()));
    const int n0 = n_block * kBlockN;
    if constexpr (kKind == 2) {
      if (n_block < n_full_begin || n_block >= n_full_end)
        apply_scores<kMods, true>(s, coord, p, seqlen_q, seqlen_k, slope, m0, n0);
      else if constexpr (kMods)
        apply_scores<kMods, false>(s, coord, p, seqlen_q, seqlen_k, slope, m0, n0);
    } else if constexpr (kKind == 1 || kMods) {
      apply_scores<kMods, kKind == 1>(s, coord, p, seqlen_q, seqlen_k, slope, m0, n0);
    }

    if constexpr (kTwoK) cute::cp_async_wait<1>();
    else cute::cp_async_wait<0>();
    __syncthreads();
    // The next K tile (never the one holding the sequence end) into the one K
    // buffer (kTwoK issued it above).
    if constexpr (!kTwoK) {
      if constexpr (kFlatLoads) {
        load_next_k(n_block, 0);
      } else if (n_block > n_block_min) {
        load_k(std::false_type{}, n_block - 1);
        cute::cp_async_fence();
      }
    }

    // Online softmax: new running max, p = exp2, O rescaled.
    detail::softmax_rows(s, row_max, row_sum, rescale, scale_log2);
    detail::rescale_rows<Traits::kSkipUnmovedRescale>(o_rc, rescale);

    if (kMods && p.dropout_p > 0.f) {
      // Element pairs (2t, 2t+1) share one Philox call (4 words per key group).
      CUTE_UNROLL
      for (int mi = 0; mi < kRows; ++mi) {
        const int i = m0 + get<0>(coord(mi, 0));
        CUTE_UNROLL
        for (int ni = 0; ni < size<1>(s); ni += 2) {
          const int j = n0 + get<1>(coord(mi, ni));
          const detail::Philox4 w = p.rng.words(b, h, i, j >> 2);
          // j is even: its pair is words 0-1 or 2-3 (selected, not indexed, to stay in registers).
          const bool high = (j & 2) != 0;
          const uint32_t w0 = high ? w.x[2] : w.x[0], w1 = high ? w.x[3] : w.x[1];
          s(mi, ni) = p.rng.keep_word(w0) ? s(mi, ni) * p.rng.keep_scale : 0.f;
          s(mi, ni + 1) = p.rng.keep_word(w1) ? s(mi, ni + 1) * p.rng.keep_scale : 0.f;
        }
      }
    }

    Tensor rP = convert_fragment<Element>(acc_s);
    Tensor tOrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
    gemm_rs(acc_o, tOrP, tOrVt, tOsVt, tiled_mma, smem_copy_v, smem_thr_v);
  };
  for (int n_block = n_block_max - 1; n_block >= n_block_min; --n_block) {
    if constexpr (kMods) {
      key_tile(n_block, std::integral_constant<int, 2>{});
    } else {
      if (n_block < n_full_begin || n_block >= n_full_end) key_tile(n_block, std::integral_constant<int, 1>{});
      else key_tile(n_block, std::integral_constant<int, 0>{});
    }
  }

  // Epilogue: normalise, LSE, and O through shared memory (reusing Q's space).
  // A zero sum is a row that saw no key (out 0, lse -inf), or one whose visible
  // scores were all -inf from an inf input (NaN, as exp(-inf - -inf) would be).
  const float ln2 = 0.6931471805599453f;
  CUTE_UNROLL
  for (int mi = 0; mi < kRows; ++mi) {
    const float sum = quad_sum(row_sum[mi]);
    const int i = m0 + get<0>(coord(mi, 0));
    float inv = 1.f / sum, lse = row_max[mi] * scale_log2 * ln2 + logf(sum);  // a NaN sum stays NaN
    if (sum == 0.f) {
      const bool sees_keys = block_mask.col_begin(i) < block_mask.col_end(i);
      inv = sees_keys ? NAN : 0.f;
      lse = sees_keys ? NAN : -INFINITY;
    }
    CUTE_UNROLL
    for (int ni = 0; ni < size<1>(o_rc); ++ni) o_rc(mi, ni) *= inv;
    if (p.lse != nullptr && get<1>(coord(mi, 0)) == 0 && i < seqlen_q) p.lse[sl.lse_index(p, b, h, i)] = lse;
  }
  Tensor rO = convert_fragment<Element>(acc_o);
  // A block whose rows see no key never waited for its Q copy: let it land
  // before O takes Q's place in shared memory.
  cute::cp_async_wait<0>();
  __syncthreads();
  Tensor sO = make_tensor(sQ.data(), typename Traits::SmemLayoutO{});
  auto smem_copy_o = make_tiled_copy_C(typename Traits::SmemCopyAtomO{}, tiled_mma);
  auto smem_thr_o = smem_copy_o.get_thread_slice(tidx);
  cute::copy(smem_copy_o, smem_thr_o.retile_S(rO), smem_thr_o.partition_D(sO));
  __syncthreads();

  typename Traits::GmemTiledCopyO gmem_copy_o;
  auto gmem_thr_o = gmem_copy_o.get_thread_slice(tidx);
  Tensor tOsO = gmem_thr_o.partition_S(sO);
  Tensor tOgO = gmem_thr_o.partition_D(gO);
  Tensor tOcO = gmem_thr_o.partition_D(make_identity_tensor(TileQ{}));
  Tensor tOrO = make_tensor<Element>(shape(tOgO));
  cute::copy(gmem_copy_o, tOsO, tOrO);
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tOgO); ++m) {
    if (get<0>(tOcO(0, m, 0)) < seqlen_q - m0) {
      CUTE_UNROLL
      for (int k = 0; k < size<2>(tOgO); ++k)
        if (get<1>(tOcO(0, m, k)) < p.head_dim_v) cute::copy(gmem_copy_o, tOrO(_, m, k), tOgO(_, m, k));
    }
  }
}

}  // namespace flashattn::sm80
