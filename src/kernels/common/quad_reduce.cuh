// Reductions over the 4 threads of a quad: in both mma.sync (m16n8) and wgmma
// accumulators those four threads hold the columns of the same rows.
#pragma once

namespace flashattn::detail {

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
  return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 2);
  return x + __shfl_xor_sync(0xffffffff, x, 1);
}

}  // namespace flashattn::detail
