// Register/shared-memory tile helpers of the sm80 kernels: the two product
// shapes (both operands from smem, or A from registers), accumulator layout
// views, predicated global->shared copies and quad reductions.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

#include "kernels/common/cp_async.cuh"
#include "kernels/common/quad_reduce.cuh"

namespace flashattn::sm80 {

using namespace cute;

// acc += A B^T with A and B streamed from shared memory one k-slice ahead.
template <typename Acc, typename RA, typename RB, typename SA, typename SB, typename TiledMma,
          typename CopyA, typename CopyB, typename ThrCopyA, typename ThrCopyB>
__device__ __forceinline__ void gemm_ss(Acc& acc, RA& tCrA, RB& tCrB, const SA& tCsA, const SB& tCsB,
                                        const TiledMma& mma, const CopyA& copy_a, const CopyB& copy_b,
                                        const ThrCopyA& thr_a, const ThrCopyB& thr_b) {
  Tensor tCrA_view = thr_a.retile_D(tCrA);
  Tensor tCrB_view = thr_b.retile_D(tCrB);
  cute::copy(copy_a, tCsA(_, _, _0{}), tCrA_view(_, _, _0{}));
  cute::copy(copy_b, tCsB(_, _, _0{}), tCrB_view(_, _, _0{}));
  CUTE_UNROLL
  for (int i = 0; i < size<2>(tCrA); ++i) {
    if (i < size<2>(tCrA) - 1) {
      cute::copy(copy_a, tCsA(_, _, i + 1), tCrA_view(_, _, i + 1));
      cute::copy(copy_b, tCsB(_, _, i + 1), tCrB_view(_, _, i + 1));
    }
    cute::gemm(mma, tCrA(_, _, i), tCrB(_, _, i), acc);
  }
}

// acc += A B^T with A already in registers (the probabilities) and B from smem.
template <typename Acc, typename RA, typename RB, typename SB, typename TiledMma, typename CopyB,
          typename ThrCopyB>
__device__ __forceinline__ void gemm_rs(Acc& acc, const RA& tCrA, RB& tCrB, const SB& tCsB,
                                        const TiledMma& mma, const CopyB& copy_b,
                                        const ThrCopyB& thr_b) {
  Tensor tCrB_view = thr_b.retile_D(tCrB);
  cute::copy(copy_b, tCsB(_, _, _0{}), tCrB_view(_, _, _0{}));
  CUTE_UNROLL
  for (int i = 0; i < size<2>(tCrA); ++i) {
    if (i < size<2>(tCrA) - 1) cute::copy(copy_b, tCsB(_, _, i + 1), tCrB_view(_, _, i + 1));
    cute::gemm(mma, tCrA(_, _, i), tCrB(_, _, i), acc);
  }
}

// Accumulator ((2, 2), MMA_M, MMA_N) viewed as (rows, cols) = ((2, MMA_M), (2, MMA_N)).
template <typename Layout>
__device__ __forceinline__ auto acc_rowcol(Layout acc) {
  auto l = logical_divide(acc, Shape<_2>{});
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<2>(l)));
}

// Accumulator of m16n8 tiles reread as the A operand of m16n8k16: two adjacent
// n-tiles form one k-slice, ((2, 2, 2), MMA_M, MMA_N / 2).
template <typename Layout>
__device__ __forceinline__ auto acc_as_a(Layout acc) {
  auto l = logical_divide(acc, Shape<X, X, _2>{});
  return make_layout(make_layout(get<0>(l), get<2, 0>(l)), get<1>(l), get<2, 1>(l));
}

// A register fragment converted element-wise (fp32 accumulators to fp16/bf16).
template <typename To, typename Fragment>
__device__ __forceinline__ auto convert_fragment(const Fragment& src) {
  using From = typename Fragment::value_type;
  constexpr int N = decltype(size(src))::value;
  cutlass::NumericArrayConverter<To, From, N> convert;
  Tensor dst = make_tensor<To>(src.layout());
  *reinterpret_cast<cutlass::Array<To, N>*>(dst.data()) =
      convert(*reinterpret_cast<const cutlass::Array<From, N>*>(src.data()));
  return dst;
}

using detail::cp_async_zfill;

// Global -> shared copy of a (rows, head dim) tile, partitioned by a tiled copy of
// 16-byte chunks: rows past `valid_rows` and columns whose predicate is false are
// zero-filled, never read. kCheckRows = false is for tiles known to be whole.
template <bool kCheckRows = true, typename TiledCopy, typename S, typename D, typename C, typename P>
__device__ __forceinline__ void copy_tile(const TiledCopy&, const S& src, D&& dst, const C& coord,
                                          const P& col_ok, int valid_rows) {
  static_assert(decltype(size<0>(src))::value * sizeof(typename S::value_type) == 16,
                "one 16-byte chunk per (row, column) step");
  CUTE_UNROLL
  for (int m = 0; m < size<1>(src); ++m) {
    const bool row_ok = !kCheckRows || get<0>(coord(0, m, 0)) < valid_rows;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(src); ++k)
      cp_async_zfill<16>(&dst(0, m, k), &src(0, m, k), row_ok && col_ok(k));
  }
}

// The same partitioned shared-memory tensor `offset` elements further on: the
// next stage of a multi-stage buffer (offsets are multiples of the swizzle period).
template <typename T>
__device__ __forceinline__ auto stage_at(const T& t, int offset) {
  return make_tensor(t.data() + offset, t.layout());
}

using detail::quad_max;
using detail::quad_sum;

}  // namespace flashattn::sm80
