// The Hopper forward's online softmax, with lazy rescaling: a row's reference max
// (the value its exponents are taken from) moves only when some row of the warp
// meets a score more than kLazyLog2 above its reference, so most key tiles leave
// O's accumulator alone (hd128: 64 multiplies a thread and tile, hd256: 128).
// Exact, not a clamp: every exponent and sum of a row shares the same reference,
// which the final LSE adds back, so the only change is that P's entries may reach
// 2^kLazyLog2 instead of 1 (no overflow in fp16 / bf16 or the fp32 sums, and no
// precision lost: 16-bit rounding is relative). The first finite score of a row
// always moves it (its reference was -inf). FwdTraits::kLazyRescale chooses it per
// head dim (on at hd128, hd192 and hd256, where O is several times the score tile).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/quad_reduce.cuh"

namespace flashattn::sm90 {

constexpr float kLazyLog2 = 8.f;

// Scores s (a (rows, cols) view of this thread's part of the tile; scale_log2 > 0
// turns them into log2 units) become exp2(s * scale_log2 - ref * scale_log2);
// factor[row] is what earlier sums (and O) must be multiplied by. Returns whether
// any reference of the warp moved (warp-uniform): only then does O need factor.
// Without kLazy the reference is the running max itself (detail::softmax_rows)
// and the answer is always yes.
template <bool kLazy, int kRows, typename RowCol>
__device__ __forceinline__ bool softmax_rows_lazy(RowCol& s, float (&row_max)[kRows], float (&row_sum)[kRows],
                                                  float (&factor)[kRows], float scale_log2) {
  if constexpr (!kLazy) {
    detail::softmax_rows(s, row_max, row_sum, factor, scale_log2);
    return true;
  }
  float mx[kRows];
  bool far = false;
#pragma unroll
  for (int mi = 0; mi < kRows; ++mi) {
    mx[mi] = row_max[mi];
#pragma unroll
    for (int ni = 0; ni < int(cute::size<1>(s)); ++ni) mx[mi] = fmaxf(mx[mi], s(mi, ni));
    mx[mi] = detail::quad_max(mx[mi]);
    // -inf to finite: +inf > threshold; -inf to -inf: NaN, false (nothing to move).
    far |= (mx[mi] - row_max[mi]) * scale_log2 > kLazyLog2;
  }
  const bool move = __any_sync(0xffffffffu, far);
#pragma unroll
  for (int mi = 0; mi < kRows; ++mi) {
    const float ref = move ? mx[mi] : row_max[mi];
    // A row that has seen nothing keeps -inf; use 0 so -inf - -inf never happens.
    const float base = ref == -INFINITY ? 0.f : ref * scale_log2;
    factor[mi] = exp2f(row_max[mi] * scale_log2 - base);  // exactly 1 where ref stayed finite
    row_max[mi] = ref;
    float sum = 0.f;
#pragma unroll
    for (int ni = 0; ni < int(cute::size<1>(s)); ++ni) {
      s(mi, ni) = exp2f(fmaf(s(mi, ni), scale_log2, -base));
      sum += s(mi, ni);
    }
    row_sum[mi] = row_sum[mi] * factor[mi] + sum;
  }
  return move;
}

// acc(row, :) *= factor[row] for the rows this thread holds, where the warp's
// softmax moved a reference (moved is warp-uniform, so the branch never diverges).
template <int kRows, typename RowCol>
__device__ __forceinline__ void rescale_rows_if(RowCol& acc, const float (&factor)[kRows], bool moved) {
  if (moved) detail::rescale_rows<false>(acc, factor);
}

}  // namespace flashattn::sm90
