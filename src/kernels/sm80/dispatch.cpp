// (head dim, dtype) -> the instantiated sm80 kernel. Head dims are rounded up to
// the next compiled one; predicated loads zero the padding. A build may drop
// head dims or dtypes (FLASHATTN_CUDA_HEAD_DIMS / FLASHATTN_CUDA_DTYPES; what it
// compiled: built.h).
#include <algorithm>
#include <type_traits>

#include <cutlass/numeric_types.h>

#include "kernels/sm80/launch.h"
#include "kernels/sm80/built.h"
#include "kernels/sm80/bwd_tiles.h"
#include "kernels/sm80/fwd_kv.h"
#include "kernels/sm80/fwd_rules.h"
#include "kernels/sm80/tiles.h"

namespace flashattn::sm80 {
namespace {

using bf16 = cutlass::bfloat16_t;
using fp16 = cutlass::half_t;

template <int D, typename T>
constexpr bool kCompiled = kBuilt<D, std::is_same_v<T, bf16>>;

template <typename T>
int bucket_for(int d) {
  constexpr bool compiled[] = {kCompiled<64, T>, kCompiled<96, T>, kCompiled<128, T>,
                               kCompiled<192, T>, kCompiled<256, T>};
  for (int i = 0; i < 5; ++i)
    if (compiled[i] && d <= kHeadDims[i]) return kHeadDims[i];
  return 0;
}

// Runs Launch<D, T> for the compiled D equal to `bucket`.
template <typename T, int I = 0, typename Launch>
cudaError_t run_bucket(int bucket, const Launch& launch) {
  if constexpr (I == 5) {
    return cudaErrorNotSupported;
  } else {
    constexpr int D = kHeadDims[I];
    if constexpr (kCompiled<D, T>)
      if (bucket == D) return launch(std::integral_constant<int, D>{}, T{});
    return run_bucket<T, I + 1>(bucket, launch);
  }
}

template <typename Launch>
cudaError_t run_dtype(const FwdParams& p, int bucket, const Launch& launch) {
  return p.dtype == DType::bf16 ? run_bucket<bf16>(bucket, launch) : run_bucket<fp16>(bucket, launch);
}

int padded_dim(const FwdParams& p) { return static_cast<int>(std::max(p.head_dim_qk, p.head_dim_v)); }

}  // namespace

int forward_head_dim(const FwdParams& p) {
  return p.dtype == DType::bf16 ? bucket_for<bf16>(padded_dim(p)) : bucket_for<fp16>(padded_dim(p));
}

// Runs launch(tier constant) with the device's tier where head dim D has kernels
// of that tier (kOwn: fwd_tier_differs, tiles.h; bwd_tiles_differ, bwd_tiles.h),
// with the standard tier otherwise.
template <int D, bool (*kOwn)(int, SmemTier), typename Launch>
cudaError_t with_tier(SmemTier tier, const Launch& launch) {
  using Compact = std::integral_constant<SmemTier, SmemTier::compact>;
  using Large = std::integral_constant<SmemTier, SmemTier::large>;
  if constexpr (kOwn(D, SmemTier::compact))
    if (tier == SmemTier::compact) return launch(Compact{});
  if constexpr (kOwn(D, SmemTier::large))
    if (tier == SmemTier::large) return launch(Large{});
  return launch(std::integral_constant<SmemTier, SmemTier::standard>{});
}

// hd256's forward on H100 / H200 (large tier) for problems whose rows see at
// most 8192 keys: the compact tier's tiles (64 x 64, 4 warps, 96 KiB), two blocks
// per SM, so one block's prologue and epilogue run beside the other's products,
// and a 64-row tile wastes less of a causal diagonal; FlashAttention-2's shape on
// these GPUs. At 16384 keys the 128 x 64, 8-warp tiles win (a 64-row block reads
// each K / V tile for half the work, and a head's K / V no longer stay in L2).
// Measured with branch-free loads (forced sm80, bf16, Sq = Sk, 64 x 64 over
// 128 x 64, bench/results/2026-12-04_h200_s28_sm80.txt): non-causal +2.5% /
// +4.7% / +3.0% / +2.2% / +0.8% / -7.8% at N = 512 ... 16384; causal +6.6% /
// +5.5% / 0% at 4096 / 8192 / 16384 (and +4-8% below 4096, session 27).
// Sliding windows take the same rule by their visible keys, not measured. The
// variant with score modifiers keeps its tiles (not measured at 64 x 64, where
// it spills more).
bool hd256_compact_tiles(const FwdParams& p, int head_dim, SmemTier tier) {
  constexpr int64_t kMaxVisibleKeys = 8192;
  if (head_dim != 256 || tier != SmemTier::large || detail::needs_score_mods(p)) return false;
  // A row's visible keys; each side clamped before the sum (window sizes may be
  // anything up to INT64_MAX), a negative side unbounded.
  const int64_t left = p.window_left < 0 ? p.seqlen_k : std::min(p.window_left, p.seqlen_k);
  const int64_t right = p.window_right < 0 ? p.seqlen_k : std::min(p.window_right, p.seqlen_k);
  return std::min(p.seqlen_k, left + right + 1) <= kMaxVisibleKeys;
}

// The forward kernel for p's head dim, dtype and tier: launch(dim, element, tier constants).
template <typename Launch>
cudaError_t forward_with(const FwdParams& p, const Launch& launch) {
  const int bucket = forward_head_dim(p);
  SmemTier tier = device_smem_tier(p.device.index);
  if (hd256_compact_tiles(p, bucket, tier)) tier = SmemTier::compact;
  return run_dtype(p, bucket, [&](auto dim, auto elem) {
    return with_tier<decltype(dim)::value, fwd_tier_differs>(tier, [&](auto t) { return launch(dim, elem, t); });
  });
}

cudaError_t forward(const FwdKernelParams& p, cudaStream_t stream) {
  return forward_with(p, [&](auto dim, auto elem, auto t) {
    return run_fwd<decltype(dim)::value, decltype(elem), decltype(t)::value>(p, stream);
  });
}

cudaError_t forward_kv(const FwdKvArgs& p, cudaStream_t stream) {
  return forward_with(p, [&](auto dim, auto elem, auto t) {
    return run_fwd_kv<decltype(dim)::value, decltype(elem), decltype(t)::value>(p, stream);
  });
}

cudaError_t backward(const BwdKernelParams& p, cudaStream_t stream) {
  const SmemTier tier = device_smem_tier(p.device.index);
  return run_dtype(p, forward_head_dim(p), [&](auto dim, auto elem) {
    return with_tier<decltype(dim)::value, bwd_tiles_differ>(tier, [&](auto t) {
      return run_bwd<decltype(dim)::value, decltype(elem), decltype(t)::value>(p, stream);
    });
  });
}

}  // namespace flashattn::sm80
