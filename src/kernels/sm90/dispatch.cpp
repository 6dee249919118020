// (head dim, dtype) -> the instantiated Hopper kernel, and what it supports.
// CMake defines FLASHATTN_SM90_<dim>_<DTYPE> for each file it compiles.
#include <type_traits>

#include <cutlass/numeric_types.h>

#include "kernels/sm90/launch.h"

namespace flashattn::sm90 {
namespace {

using bf16 = cutlass::bfloat16_t;
using fp16 = cutlass::half_t;

template <int D, typename T>
constexpr bool kCompiled = false;
#define FA_COMPILED(D, T) template <> constexpr bool kCompiled<D, T> = true;
#ifdef FLASHATTN_SM90_64_BF16
FA_COMPILED(64, bf16)
#endif
#ifdef FLASHATTN_SM90_128_BF16
FA_COMPILED(128, bf16)
#endif
#ifdef FLASHATTN_SM90_256_BF16
FA_COMPILED(256, bf16)
#endif
#ifdef FLASHATTN_SM90_64_FP16
FA_COMPILED(64, fp16)
#endif
#ifdef FLASHATTN_SM90_128_FP16
FA_COMPILED(128, fp16)
#endif
#ifdef FLASHATTN_SM90_256_FP16
FA_COMPILED(256, fp16)
#endif
#undef FA_COMPILED

constexpr int kHeadDims[] = {64, 128, 256};

// Calls f(integral_constant<D>) for the compiled head dim D == d; false if none.
template <typename T, int I = 0, typename F>
bool with_dim(int d, const F& f) {
  if constexpr (I == 3) {
    return false;
  } else {
    constexpr int D = kHeadDims[I];
    if constexpr (kCompiled<D, T>)
      if (d == D) {
        f(std::integral_constant<int, D>{});
        return true;
      }
    return with_dim<T, I + 1>(d, f);
  }
}

template <typename T>
bool compiled(int d) {
  return with_dim<T>(d, [](auto) {});
}

}  // namespace

bool supports_forward(const FwdParams& p) {
  const int d = static_cast<int>(p.head_dim_qk);
  const bool have = p.dtype == DType::bf16 ? compiled<bf16>(d) : p.dtype == DType::f16 && compiled<fp16>(d);
  // TMA (loads of Q, K, V and the store of O) needs a non-empty tensor, row counts
  // below 2^31 (32-bit coordinates) and positive strides below 2^40 bytes
  // (broadcast inputs, stride 0, stay on sm80: a descriptor the driver refuses
  // must never reach a launch).
  const int64_t rows_q = p.is_varlen() ? p.total_q : p.seqlen_q;
  const int64_t rows_k = p.is_varlen() ? p.total_k : p.seqlen_k;
  // (Packed batches get a batch stride of their own in fwd_launch.cuh.)
  const int64_t limit = (int64_t(1) << 40) / 2;  // elements of 2 bytes
  bool strides_ok = true;
  for (int64_t s : {p.q_row_stride, p.q_head_stride, p.k_row_stride, p.k_head_stride, p.v_row_stride,
                    p.v_head_stride, p.o_row_stride, p.o_head_stride})
    strides_ok = strides_ok && s > 0 && s < limit;
  if (!p.is_varlen())
    for (int64_t s : {p.q_batch_stride, p.k_batch_stride, p.v_batch_stride, p.o_batch_stride})
      strides_ok = strides_ok && s > 0 && s < limit;
  // The persistent scheduler numbers (query tile, head, batch) tiles with 32-bit
  // ints (128-row tiles at the least).
  const int64_t tiles = (p.seqlen_q + 127) / 128 * p.heads_q * p.batch;
  return have && strides_ok && p.head_dim_v == p.head_dim_qk && !detail::needs_score_mods(p) &&
         rows_q > 0 && rows_k > 0 && rows_q < (int64_t(1) << 31) && rows_k < (int64_t(1) << 31) &&
         tiles < (int64_t(1) << 30);
}

cudaError_t forward(const FwdKernelParams& p, cudaStream_t stream) {
  cudaError_t err = cudaErrorNotSupported;
  const int d = static_cast<int>(p.head_dim_qk);
  auto run = [&](auto elem) {
    using T = decltype(elem);
    with_dim<T>(d, [&](auto dim) { err = run_fwd<decltype(dim)::value, T>(p, stream); });
  };
  if (p.dtype == DType::bf16) run(bf16{});
  else run(fp16{});
  return err;
}

}  // namespace flashattn::sm90
