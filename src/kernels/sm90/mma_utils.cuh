// Register-level helpers of the Hopper kernels: views of wgmma accumulators,
// fp32 -> 16-bit conversion, and issuing one wgmma batch.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/numeric_conversion.h>

namespace flashattn::sm90 {

using namespace cute;

// wgmma accumulator ((2, 2, N/8), MMA_M, MMA_N) viewed as (rows, cols):
// rows = (row half, MMA_M), cols = (column pair, N/8, MMA_N).
template <typename Layout>
__device__ __forceinline__ auto acc_rowcol(Layout acc) {
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                     make_layout(get<0, 0>(acc), get<0, 2>(acc), get<2>(acc)));
}

// The S accumulator reread as the A operand of P V (16-bit): two n8 column
// groups form one k16 slice, ((2, 2, 2), MMA_M, N/16).
template <typename Layout>
__device__ __forceinline__ auto acc_as_a(Layout acc) {
  auto l = logical_divide(get<0>(acc), Shape<Underscore, Underscore, _2>{});
  return make_layout(make_layout(get<0>(l), get<1>(l), get<2, 0>(l)), get<1>(acc),
                     coalesce(make_layout(get<2, 1>(l), get<2>(acc))));
}

// fp32 accumulator -> 16-bit registers of the same layout.
template <typename Acc, typename Out>
__device__ __forceinline__ void convert_into(const Acc& src, Out& dst) {
  using To = typename Out::value_type;
  constexpr int N = decltype(size(src))::value;
  cutlass::NumericArrayConverter<To, float, N> convert;
  *reinterpret_cast<cutlass::Array<To, N>*>(dst.data()) =
      convert(*reinterpret_cast<const cutlass::Array<float, N>*>(src.data()));
}

// acc (+)= A B over every k slice, issued as one wgmma batch; the caller waits
// with warpgroup_wait<N> (N batches may stay in flight) and then fences acc.
// kRegA: A is a register fragment (P), fenced like the accumulator.
template <bool kZeroInit, bool kRegA, typename TiledMma, typename A, typename B, typename C>
__device__ __forceinline__ void wgmma_issue(TiledMma& mma, A&& a, const B& b, C& acc) {
  warpgroup_fence_operand(acc);
  if constexpr (kRegA) warpgroup_fence_operand(a);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}

// A shared-memory operand's descriptor tensor (as partition_fragment_A/B make
// it), re-derived where it is used. Its per-k-slice descriptors are the base
// descriptor plus constants; for a loop-invariant operand (Q in the forward's
// key loop) the compiler computes them all once before the loop and holds them
// there, two registers each. The empty asm gives the base a new value here, so
// only the base is held and the slices are added at the use (the asm is empty:
// it only hides the value from that hoisting). kOn = false returns the tensor
// as it is.
template <bool kOn, typename DescTensor>
__device__ __forceinline__ decltype(auto) desc_here(const DescTensor& t) {
  if constexpr (kOn) {
    auto it = t.data();  // GMMA::DescriptorIterator
    asm volatile("" : "+r"(it.desc_.reg32_[0]));
    return make_tensor(it, t.layout());
  } else {
    return (t);
  }
}

}  // namespace flashattn::sm90
