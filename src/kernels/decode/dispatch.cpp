// The decoding path's plan (which calls, how many splits, how deep a ring) and its
// dispatch on (head dim, dtype). Its kernels are built for the (head dim, dtype)
// pairs of the sm80 kernels (sm80/built.h), and a head dim runs on the same compiled
// one the sm80 forward would pick (sm80::forward_head_dim).
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "kernels/decode/decode.h"
#include "kernels/sm80/built.h"
#include "kernels/sm80/launch.h"
#include "kernels/sm90/launch.h"

namespace flashattn::decode {
namespace {

template <bool kBf16, int I = 0>
cudaError_t run_dim(int dim, const DecodeArgs& a, const Plan& plan, cudaStream_t stream) {
  if constexpr (I == 5) {
    return cudaErrorNotSupported;
  } else {
    constexpr int D = sm80::kHeadDims[I];
    if constexpr (sm80::kBuilt<D, kBf16>)
      if (dim == D) return run_decode<D, kBf16>(a, plan, stream);
    return run_dim<kBf16, I + 1>(dim, a, plan, stream);
  }
}

// The main kernel's shared memory (decode_kernel.cuh): Q's 16 rows, then `stages` stages
// of K and V, 16 rows a warp each; rows padded by 8 elements.
size_t smem_bytes(int dim, int stages, int warps) {
  const size_t stride = size_t(dim + 8) * 2;
  return kBlockRows * stride + size_t(stages) * 2 * kWarpKeys * warps * stride;
}

int env_int(const char* name, int fallback) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  return *end == '\0' && v >= 0 && v < (1 << 20) ? int(v) : fallback;
}

}  // namespace

Plan plan(const FwdParams& p, int device) {
  if (env_int("FLASHATTN_CUDA_DECODE", 1) == 0) return Plan{};
  DeviceLimits d;
  cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&d.smem_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  cudaDeviceGetAttribute(&d.smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
  Plan out = plan_for(p, d);
  out.device = device;
  return out;
}

Plan plan_for(const FwdParams& p, const DeviceLimits& d) {
  Plan out;
  if (p.dropout_p > 0.f) return out;
  const int64_t rows = p.seqlen_q * p.group_size();
  if (rows > kMaxRows) return out;
  if ((p.batch * p.heads_q * p.seqlen_q + 3) / 4 > std::numeric_limits<int32_t>::max()) return out;  // the merge's grid
  const int dim = sm80::forward_head_dim(p);
  if (dim == 0) return out;
  out.row_groups = int((rows + kBlockRows - 1) / kBlockRows);
  if (p.heads_kv * out.row_groups > 65535) return out;

  const int sms = d.sms, smem_block = d.smem_block, smem_sm = d.smem_sm;
  // Ring depth: the deepest of 2-4 stages a block can hold (K / V in flight is what keeps
  // the memory busy; on the H100, hd128, 4 stages at one block an SM measured 2-5% faster
  // than 3 at two at B = 1 and 8, 1% slower at 64 x 16384: kernel notes, decoding path v3);
  // a block that cannot hold two stages is not run here (hd256 on GPUs with 99 KiB a block).
  constexpr int warps = kDecodeWarps;
  int stages = 4;
  while (stages > 2 && smem_bytes(dim, stages, warps) > size_t(smem_block)) --stages;
  if (const int forced = env_int("FLASHATTN_CUDA_DECODE_STAGES", 0); forced >= 2 && forced <= 6) stages = forced;
  if (smem_bytes(dim, stages, warps) > size_t(smem_block)) return out;
  const int per_sm = std::max<int>(1, int(size_t(smem_sm) / (smem_bytes(dim, stages, warps) + 1024)));
  const int tile = kWarpKeys * warps;  // keys a stage

  // Splits: blocks in whole waves of every SM's share, at least two ring stages a split.
  // The fewest splits whose waves are 95% full or more of the best count's (the blocks of
  // one call do equal work, so a wave's empty slots are lost time; FlashAttention-2's
  // heuristic with a tighter bar). A sliding window bounds the keys any row sees.
  int64_t keys = p.seqlen_k;
  if (p.window_left >= 0) keys = std::min<int64_t>(keys, p.window_left + p.seqlen_q + tile);
  const int64_t tiles = (keys + tile - 1) / tile;
  const int64_t base = std::max<int64_t>(1, p.batch * p.heads_kv * out.row_groups);
  const int64_t target = int64_t(std::max(1, sms)) * per_sm;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>({(tiles + 1) / 2, kMaxSplits, (target + base - 1) / base}));
  auto fill = [&](int64_t s) {
    const int64_t blocks = base * s, waves = (blocks + target - 1) / target;
    return double(blocks) / double(waves * target);
  };
  double best = 0.0;
  for (int64_t s = 1; s <= most; ++s) best = std::max(best, fill(s));
  int64_t splits = 1;
  while (splits < most && fill(splits) < 0.95 * best) ++splits;
  if (const int forced = env_int("FLASHATTN_CUDA_DECODE_SPLITS", 0); forced > 0)
    splits = std::min(forced, kMaxSplits);

  out.ok = true;
  out.early_merge = d.major >= 9 && sm90::programmatic_launch_enabled();
  out.head_dim = dim;
  out.splits = int(splits);
  out.stages = stages;
  out.smem_bytes = smem_bytes(dim, stages, warps);
  if (out.splits > 1) {
    const size_t slots = size_t(out.splits) * size_t(p.batch) * size_t(p.heads_kv) * out.row_groups * kBlockRows;
    out.lse_offset = (slots * dim * sizeof(float) + 255) / 256 * 256;
    out.scratch_bytes = out.lse_offset + slots * sizeof(float);
  }
  return out;
}

cudaError_t run(const DecodeArgs& a, const Plan& plan, cudaStream_t stream) {
  return a.dtype == DType::bf16 ? run_dim<true>(plan.head_dim, a, plan, stream)
                                : run_dim<false>(plan.head_dim, a, plan, stream);
}

}  // namespace flashattn::decode
