// Host side of the sm80 backward: the row-dot pre-pass, then the dK/dV kernel
// and either the dQ conversion (atomic dQ) or the dQ kernel (deterministic), all
// on the caller's stream.
#pragma once

#include <cuda_runtime.h>

#include "kernels/sm80/bwd_kernel.cuh"
#include "kernels/sm80/launch.h"

namespace flashattn::sm80 {

template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, int bytes) {
  if (bytes < 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

template <typename Traits, bool kMods>
cudaError_t launch_bwd(const BwdKernelParams& p, cudaStream_t stream) {
  using Element = typename Traits::Element;
  const auto blocks = [](int64_t n, int64_t per) { return static_cast<unsigned>((n + per - 1) / per); };
  const unsigned hq = static_cast<unsigned>(p.heads_q), hkv = static_cast<unsigned>(p.heads_kv),
                 batch = static_cast<unsigned>(p.batch);

  if (Traits::early_p(kMods) && p.lse_log2 == nullptr) return cudaErrorInvalidValue;  // its dK/dV kernel reads it

  // Empty sides launch nothing: with no keys the dQ kernel writes zeros, with no
  // queries the dK/dV kernel does.
  if (p.seqlen_q > 0)
    row_dot_kernel<Element><<<dim3(detail::row_blocks(p.seqlen_q, p.head_dim_v), hq, batch), detail::kRowThreads, 0, stream>>>(p);

  if (p.seqlen_k > 0) {
    auto dkdv = dkdv_kernel<Traits, kMods>;
    static const cudaError_t dkdv_attr = allow_smem(dkdv, Traits::kSmemKV);
    if (dkdv_attr != cudaSuccess) return dkdv_attr;
    dkdv<<<dim3(blocks(p.seqlen_k, Traits::kBlockN), hkv, batch), Traits::kThreadsKV, Traits::kSmemKV, stream>>>(p);
  }

  if (p.seqlen_q > 0 && p.dq_accum != nullptr) {
    dq_convert_blocked_kernel<Element><<<dim3(detail::row_blocks(p.seqlen_q, p.head_dim_qk), hq, batch), detail::kRowThreads, 0, stream>>>(p);
  } else if (p.seqlen_q > 0) {
    auto dq = dq_kernel<Traits, kMods>;
    static const cudaError_t dq_attr = allow_smem(dq, Traits::kSmemQ);
    if (dq_attr != cudaSuccess) return dq_attr;
    dq<<<dim3(blocks(p.seqlen_q, Traits::kBlockMdQ), hq, batch), Traits::kThreadsQ, Traits::kSmemQ, stream>>>(p);
  }
  return cudaGetLastError();
}

template <int kHeadDim, typename Element, SmemTier kTier>
cudaError_t run_bwd(const BwdKernelParams& p, cudaStream_t stream) {
  static_assert(kTier == SmemTier::standard || bwd_tiles_differ(kHeadDim, kTier),
                "a tier without tiles of its own runs the standard kernel (no instantiation of its own)");
  using Traits = BwdTraits<kHeadDim, Element, kTier>;
  return detail::needs_score_mods(p) ? launch_bwd<Traits, true>(p, stream)
                                     : launch_bwd<Traits, false>(p, stream);
}

}  // namespace flashattn::sm80
