// Host side of the sm80 forward: picks the kernel variant and launches it on the
// caller's stream. No allocation and no synchronisation, so it can be captured
// in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include "kernels/sm80/fwd_kernel.cuh"
#include "kernels/sm80/launch.h"

namespace flashattn::sm80 {

// Q, K and V tiles, and a second K buffer where the kernel keeps one.
template <typename Traits, bool kMods>
constexpr int fwd_smem_bytes() {
  return Traits::kSmemBytes + (fwd_k_buffers<Traits, kMods>() - 1) * Traits::kBlockN * Traits::kHeadDim *
                                  int(sizeof(typename Traits::Element));
}

template <typename Traits, bool kMods, bool kKv, typename Args>
cudaError_t launch_fwd(const Args& p, cudaStream_t stream) {
  auto kernel = fwd_kernel<Traits, kMods, kKv>;
  constexpr int smem = fwd_smem_bytes<Traits, kMods>();
  if constexpr (smem >= 48 * 1024) {
    // Opt in to more than 48 KB of dynamic shared memory (once per kernel).
    static const cudaError_t attr =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (attr != cudaSuccess) return attr;
  }
  const dim3 grid(static_cast<unsigned>((p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM),
                  static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
  kernel<<<grid, Traits::kNThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

// Score modifiers (softcap, ALiBi, dropout, a non-positive scale) take the
// general variant; plain attention folds the scale into exp2. kKv: over a KV cache.
template <int kHeadDim, typename Element, SmemTier kTier, bool kKv, typename Args>
cudaError_t run_fwd_variant(const Args& p, cudaStream_t stream) {
  static_assert(kTier == SmemTier::standard || fwd_tier_differs(kHeadDim, kTier),
                "a tier without tiles of its own runs the standard kernel (no instantiation of its own)");
  constexpr TileConfig c = tile_config(kHeadDim, false, kTier), m = tile_config(kHeadDim, true, kTier);
  using Traits = FwdTraits<kHeadDim, Element, c.block_m, c.block_n, c.warps, c.skip_rescale>;
  using TraitsMods = FwdTraits<kHeadDim, Element, m.block_m, m.block_n, m.warps, m.skip_rescale>;
  static_assert(fwd_smem_bytes<Traits, false>() <= smem_budget(kTier) &&
                    fwd_smem_bytes<TraitsMods, true>() <= smem_budget(kTier),
                "tiles over the tier's shared memory");
  // A paged cache's key tile must lie in one block (pages are multiples of 64 keys).
  static_assert(64 % Traits::kBlockN == 0 && 64 % TraitsMods::kBlockN == 0, "key tiles over 64 rows");
  return detail::needs_score_mods(p) ? launch_fwd<TraitsMods, true, kKv>(p, stream)
                                     : launch_fwd<Traits, false, kKv>(p, stream);
}

// Every key of every sequence.
template <int kHeadDim, typename Element, SmemTier kTier>
cudaError_t run_fwd(const FwdKernelParams& p, cudaStream_t stream) {
  return run_fwd_variant<kHeadDim, Element, kTier, false>(p, stream);
}

// A KV cache: used lengths, paged blocks.
template <int kHeadDim, typename Element, SmemTier kTier>
cudaError_t run_fwd_kv(const FwdKvArgs& p, cudaStream_t stream) {
  return run_fwd_variant<kHeadDim, Element, kTier, true>(p, stream);
}

}  // namespace flashattn::sm80
