// Host side of the Hopper backward: TMA descriptors (built per call on the host,
// so a call stays capturable in a CUDA graph), then the row-dot pre-pass, the
// backward kernel and the dQ conversion on the caller's stream; with dQ apart
// (kDqApart, hd192 / hd256 plain) the dQ kernel in place of the conversion.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/sm90/bwd_dq_kernel.cuh"
#include "kernels/sm90/bwd_kernel.cuh"
#include "kernels/sm90/launch.h"

namespace flashattn::sm90 {

template <typename Traits, bool kMods>
cudaError_t launch_bwd(const BwdKernelParams& p, cudaStream_t stream) {
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  const bool packed = p.is_varlen();
  const int64_t rows_q = packed ? p.total_q : p.seqlen_q, rows_k = packed ? p.total_k : p.seqlen_k;
  auto gmem = [&](auto* ptr, int64_t rows, int64_t heads, int64_t batch_stride, int64_t row_stride,
                  int64_t head_stride) {
    return gmem_view<kHeadDim>(p, ptr, rows, heads, batch_stride, row_stride, head_stride);
  };
  auto in = [](const void* ptr) { return static_cast<const Element*>(ptr); };
  using TileQ = Shape<Int<Traits::kBlockM>, Int<kHeadDim>>;
  using TileK = Shape<Int<Traits::kBlockN>, Int<kHeadDim>>;
  const auto smem_q = take<0, 2>(typename Traits::SmemLayoutQ{});
  // The fp32 dQ accumulator: row slots in LSE order ([B, Hq, Sq] or [Hq, total_q]),
  // head_dim_qk floats each (columns permuted within 32- or 16-float groups where
  // Traits::kDqColPerm: dq_layout.h).
  const int64_t acc_head = rows_q * kHeadDim;
  // dQ apart: no accumulator, and its reduce-add descriptor is never used; any
  // valid address keeps the descriptor well-formed.
  float* const dq_accum = p.dq_accum != nullptr ? p.dq_accum : p.row_dot;
  BwdArgs<Traits> args{
      p,
      make_tma_copy(SM90_TMA_LOAD{}, gmem(in(p.q), rows_q, p.heads_q, p.q_batch_stride, p.q_row_stride, p.q_head_stride),
                    smem_q, TileQ{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{},
                    gmem(in(p.dout), rows_q, p.heads_q, p.do_batch_stride, p.do_row_stride, p.do_head_stride),
                    smem_q, TileQ{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gmem(in(p.k), rows_k, p.heads_kv, p.k_batch_stride, p.k_row_stride, p.k_head_stride),
                    typename Traits::SmemLayoutKV{}, TileK{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gmem(in(p.v), rows_k, p.heads_kv, p.v_batch_stride, p.v_row_stride, p.v_head_stride),
                    typename Traits::SmemLayoutKV{}, TileK{}, _1{}),
      make_tma_copy(SM90_TMA_REDUCE_ADD{},
                    gmem(dq_accum, rows_q, p.heads_q, p.heads_q * acc_head, kHeadDim, acc_head),
                    typename Traits::SmemLayoutdQ{}, Shape<Int<Traits::kDqRows>, Int<Traits::kDqCols>>{}, _1{})};

  const auto blocks = [](int64_t n, int64_t per) { return static_cast<unsigned>((n + per - 1) / per); };
  const unsigned hq = static_cast<unsigned>(p.heads_q), hkv = static_cast<unsigned>(p.heads_kv),
                 batch = static_cast<unsigned>(p.batch);
  // Empty sides launch nothing: with no keys dQ is the zeroed accumulator, with
  // no queries the kernel writes zero dK and dV.
  constexpr bool kApart = kDqApart<Traits, kMods>;
  // (dQ apart: the backend allocates no accumulator, so the pass zeroes none.)
  if (p.seqlen_q > 0)
    detail::row_dot_kernel<Element><<<dim3(detail::row_blocks(p.seqlen_q, p.head_dim_v), hq, batch), detail::kRowThreads, 0, stream>>>(p);
  if (p.seqlen_k > 0) {
    auto kernel = bwd_kernel<Traits, kMods>;
    constexpr int smem = Traits::kSmemBytes;
    static const cudaError_t ready = prepare_kernel<Traits>(reinterpret_cast<const void*>(kernel));
    if (ready != cudaSuccess) return ready;
    // Key tiles in order: under a causal mask the first ones see the most rows,
    // so the longest blocks start first. (Launching this one beside the row-dot
    // pass's last blocks, and the conversion beside its own, measured within
    // noise at hd64 / hd128: kernel_notes, v37.)
    kernel<<<dim3(blocks(p.seqlen_k, Traits::kBlockN), hkv, batch), Traits::kThreads, smem, stream>>>(args);
  }
  if constexpr (kApart) {
    if (p.seqlen_q > 0) {
      if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
      return launch_dq<DqTraits<kHeadDim, Element>>(p, stream, p.seqlen_k > 0);
    }
  } else if (p.seqlen_q > 0) {
    const dim3 grid(detail::row_blocks(p.seqlen_q, p.head_dim_qk), hq, batch);
    // Staged dQ permutes its columns (by keys, dq_layout.h); atomics add them in order.
    using Cols = std::conditional_t<Traits::kDqColPerm && !kAtomicDq<Traits, kMods>, DqPermCols<Traits::kDqSwizzleBits>,
                                    detail::DqPlainCols>;
    // The key-block kernel's dS leaves out the softmax scale: applied here.
    detail::dq_convert_kernel<Element, true, Cols><<<grid, detail::kRowThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

template <int kHeadDim, typename Element>
cudaError_t run_bwd(const BwdKernelParams& p, cudaStream_t stream) {
  return launch_bwd<BwdTraits<kHeadDim, Element>, false>(p, stream);
}

// With score modifiers (softcap, ALiBi, a non-positive scale): files of their own.
template <int kHeadDim, typename Element>
cudaError_t run_bwd_mods(const BwdKernelParams& p, cudaStream_t stream) {
  return launch_bwd<BwdTraits<kHeadDim, Element>, true>(p, stream);
}

}  // namespace flashattn::sm90
