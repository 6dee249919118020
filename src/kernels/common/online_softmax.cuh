// The online softmax of the forward kernels (sm80 and sm90 alike): per key tile,
// the new running max of each row, the factor that rescales what was summed
// before, exp2 of the scores and the running sums. Rows are spread over the
// four threads of a quad in both mma.sync and wgmma accumulators.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/quad_reduce.cuh"

namespace flashattn::detail {

// Scores s (a (rows, cols) view of this thread's part of the tile, already
// scaled-and-masked or raw; scale_log2 turns them into log2 units) become
// exp2(s * scale_log2 - max * scale_log2); factor[row] is what earlier sums
// (and O) must be multiplied by.
template <int kRows, typename RowCol>
__device__ __forceinline__ void softmax_rows(RowCol& s, float (&row_max)[kRows], float (&row_sum)[kRows],
                                             float (&factor)[kRows], float scale_log2) {
#pragma unroll
  for (int mi = 0; mi < kRows; ++mi) {
    float mx = row_max[mi];
#pragma unroll
    for (int ni = 0; ni < int(cute::size<1>(s)); ++ni) mx = fmaxf(mx, s(mi, ni));
    mx = quad_max(mx);
    // A row that has seen nothing keeps max -inf; use 0 so -inf - -inf never happens.
    const float base = mx == -INFINITY ? 0.f : mx * scale_log2;
    factor[mi] = exp2f(row_max[mi] * scale_log2 - base);
    row_max[mi] = mx;
    float sum = 0.f;
#pragma unroll
    for (int ni = 0; ni < int(cute::size<1>(s)); ++ni) {
      s(mi, ni) = exp2f(fmaf(s(mi, ni), scale_log2, -base));
      sum += s(mi, ni);
    }
    row_sum[mi] = row_sum[mi] * factor[mi] + sum;
  }
}

// acc(row, :) *= factor[row] for the rows this thread holds (acc in a (rows,
// cols) view). With kSkipUnmoved, a key tile that raised no running max of the
// warp (every factor exactly 1, the common case after a row's first tiles) skips
// the multiplies at the cost of one warp vote; the result is bit-identical. That
// pays where O has several times more registers a thread than the score tile
// (sm80 hd128 at 128 x 32: +5%) and costs 1-6% elsewhere, where the multiplies
// hide under other work and the branch only splits the schedule (measured on the
// H200 for the sm80 and sm90 forwards; docs/kernel_notes.md).
template <bool kSkipUnmoved, int kRows, typename RowCol>
__device__ __forceinline__ void rescale_rows(RowCol& acc, const float (&factor)[kRows]) {
  if constexpr (kSkipUnmoved) {
    bool moved = false;
#pragma unroll
    for (int mi = 0; mi < kRows; ++mi) moved |= factor[mi] != 1.f;
    if (!__any_sync(0xffffffffu, moved)) return;
  }
#pragma unroll
  for (int mi = 0; mi < kRows; ++mi)
#pragma unroll
    for (int ni = 0; ni < int(cute::size<1>(acc)); ++ni) acc(mi, ni) *= factor[mi];
}

}  // namespace flashattn::detail
