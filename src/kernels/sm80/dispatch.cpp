// (head dim, dtype) -> the instantiated sm80 kernel. Head dims are rounded up to
// the next compiled one; predicated loads zero the padding. A build may drop
// head dims or dtypes (FLASHATTN_CUDA_HEAD_DIMS / FLASHATTN_CUDA_DTYPES); CMake
// defines FLASHATTN_SM80_FWD_<dim>_<DTYPE> for each instantiation it compiles.
#include <algorithm>
#include <type_traits>

#include <cutlass/numeric_types.h>

#include "kernels/sm80/launch.h"

namespace flashattn::sm80 {
namespace {

using bf16 = cutlass::bfloat16_t;
using fp16 = cutlass::half_t;

template <int D, typename T>
constexpr bool kCompiled = false;
#define FA_COMPILED(D, T) template <> constexpr bool kCompiled<D, T> = true;
#ifdef FLASHATTN_SM80_FWD_64_BF16
FA_COMPILED(64, bf16)
#endif
#ifdef FLASHATTN_SM80_FWD_96_BF16
FA_COMPILED(96, bf16)
#endif
#ifdef FLASHATTN_SM80_FWD_128_BF16
FA_COMPILED(128, bf16)
#endif
#ifdef FLASHATTN_SM80_FWD_192_BF16
FA_COMPILED(192, bf16)
#endif
#ifdef FLASHATTN_SM80_FWD_256_BF16
FA_COMPILED(256, bf16)
#endif
#ifdef FLASHATTN_SM80_FWD_64_FP16
FA_COMPILED(64, fp16)
#endif
#ifdef FLASHATTN_SM80_FWD_96_FP16
FA_COMPILED(96, fp16)
#endif
#ifdef FLASHATTN_SM80_FWD_128_FP16
FA_COMPILED(128, fp16)
#endif
#ifdef FLASHATTN_SM80_FWD_192_FP16
FA_COMPILED(192, fp16)
#endif
#ifdef FLASHATTN_SM80_FWD_256_FP16
FA_COMPILED(256, fp16)
#endif
#undef FA_COMPILED

template <typename T>
int bucket_for(int d) {
  constexpr bool compiled[] = {kCompiled<64, T>, kCompiled<96, T>, kCompiled<128, T>,
                               kCompiled<192, T>, kCompiled<256, T>};
  for (int i = 0; i < 5; ++i)
    if (compiled[i] && d <= kHeadDims[i]) return kHeadDims[i];
  return 0;
}

template <typename T, int I = 0>
cudaError_t run_bucket(int bucket, const FwdKernelParams& p, cudaStream_t s) {
  if constexpr (I == 5) {
    return cudaErrorNotSupported;
  } else {
    constexpr int D = kHeadDims[I];
    if constexpr (kCompiled<D, T>)
      if (bucket == D) return run_fwd<D, T>(p, s);
    return run_bucket<T, I + 1>(bucket, p, s);
  }
}

int padded_dim(const FwdParams& p) { return static_cast<int>(std::max(p.head_dim_qk, p.head_dim_v)); }

}  // namespace

int forward_head_dim(const FwdParams& p) {
  return p.dtype == DType::bf16 ? bucket_for<bf16>(padded_dim(p)) : bucket_for<fp16>(padded_dim(p));
}

cudaError_t forward(const FwdKernelParams& p, cudaStream_t stream) {
  const int bucket = forward_head_dim(p);
  return p.dtype == DType::bf16 ? run_bucket<bf16>(bucket, p, stream)
                                : run_bucket<fp16>(bucket, p, stream);
}

}  // namespace flashattn::sm80
