// The merge after a forward whose last tiles were cut over keys (fwd_split.h):
// one warp per query row of a cut tile weighs the row's pieces by their LSE,
// writes O in the output type and the row's LSE.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "kernels/common/kernel_params.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/seqlen.h"
#include "kernels/sm90/fwd_scheduler.cuh"

namespace flashattn::sm90 {

struct FwdMergeArgs {
  FwdKernelParams p;
  TileScheduler sched;  // the forward's: its cut tiles and their pieces
  const float* o_part;  // as FwdArgs
  const float* lse_part;
};

constexpr int kMergeWarps = 4;

template <int kHeadDim, int kBlockM, typename Element>
__global__ void __launch_bounds__(kMergeWarps * 32) fwd_merge(const __grid_constant__ FwdMergeArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(kHeadDim % 4 == 0, "the merge reads float4s");
  detail::pdl_wait();  // launched early: the pieces are complete past here
  const TileScheduler& sched = a.sched;
  const int lane = threadIdx.x % 32;
  const int id = int(blockIdx.x) * kMergeWarps + int(threadIdx.x / 32);  // row of the cut tiles
  const int parts = sched.parts;
  if (id >= (sched.total - sched.whole) / parts * kBlockM) return;
  const int cut_tile = id / kBlockM, r = id % kBlockM;
  const TileCoord c = sched.decode_tile(sched.whole + cut_tile);
  const int i = c.m_block * kBlockM + r;
  if (i >= int(a.p.seqlen_q)) return;  // rows past the sequence were never stored
  // Lane j < parts holds piece j's LSE.
  const int64_t slot0 = int64_t(cut_tile) * parts;
  const float lse = lane < parts ? a.lse_part[(slot0 + lane) * kBlockM + r] : -INFINITY;
  float mx = lse;
#pragma unroll
  for (int d = 16; d > 0; d /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
  // A piece without weight (all its scores -inf) adds nothing; NaN reaches the sum.
  const float w = lse == -INFINITY ? 0.f : expf(lse - mx);
  float sum = w;
#pragma unroll
  for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
  // Every row of a cut call sees keys: no weight at all means every score was -inf.
  const float inv = sum == 0.f ? NAN : 1.f / sum;
  // Every lane takes every weight here: lanes past the head dim skip the loop below.
  float weights[kMaxSplitParts];
#pragma unroll
  for (int j = 0; j < kMaxSplitParts; ++j) weights[j] = __shfl_sync(0xffffffffu, w * inv, j);
  const detail::SeqLen sl(a.p, c.b);
  Element* out = static_cast<Element*>(a.p.out) +
                 sl.q_row(c.b, a.p.o_batch_stride, a.p.o_row_stride, a.p.o_head_stride, c.h, i);
  const float* part = a.o_part + (slot0 * kBlockM + r) * kHeadDim;
  for (int col = lane * 4; col < kHeadDim; col += 128) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int j = 0; j < kMaxSplitParts; ++j) {
      if (j >= parts) break;
      const float wj = weights[j];
      const float4 v = *reinterpret_cast<const float4*>(part + int64_t(j) * kBlockM * kHeadDim + col);
      acc.x += wj * v.x;
      acc.y += wj * v.y;
      acc.z += wj * v.z;
      acc.w += wj * v.w;
    }
    uint2 packed;
    Element* o = reinterpret_cast<Element*>(&packed);
    o[0] = Element(acc.x);
    o[1] = Element(acc.y);
    o[2] = Element(acc.z);
    o[3] = Element(acc.w);
    *reinterpret_cast<uint2*>(out + col) = packed;
  }
  if (lane == 0 && a.p.lse != nullptr)
    a.p.lse[sl.lse_index(a.p, c.b, c.h, i)] = sum == 0.f ? NAN : mx + logf(sum);
#endif
}

}  // namespace flashattn::sm90
