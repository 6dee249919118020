// (head dim, dtype) -> the instantiated Hopper kernel, and what it supports.
// CMake defines FLASHATTN_SM90_<dim>_<DTYPE> for each file it compiles.
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include <cutlass/numeric_types.h>

#include "kernels/sm90/bwd_switches.h"
#include "kernels/sm90/fwd_kv.h"
#include "kernels/sm90/launch.h"

namespace flashattn::sm90 {
namespace {

using bf16 = cutlass::bfloat16_t;
using fp16 = cutlass::half_t;

enum class Kind { fwd, bwd, bwd_mods };

template <Kind K, int D, typename T>
constexpr bool kCompiled = false;
#define FA_COMPILED(K, D, T) template <> constexpr bool kCompiled<Kind::K, D, T> = true;
#ifdef FLASHATTN_SM90_64_BF16
FA_COMPILED(fwd, 64, bf16)
#endif
#ifdef FLASHATTN_SM90_128_BF16
FA_COMPILED(fwd, 128, bf16)
#endif
#ifdef FLASHATTN_SM90_256_BF16
FA_COMPILED(fwd, 256, bf16)
#endif
#ifdef FLASHATTN_SM90_64_FP16
FA_COMPILED(fwd, 64, fp16)
#endif
#ifdef FLASHATTN_SM90_128_FP16
FA_COMPILED(fwd, 128, fp16)
#endif
#ifdef FLASHATTN_SM90_256_FP16
FA_COMPILED(fwd, 256, fp16)
#endif
#ifdef FLASHATTN_SM90_96_BF16
FA_COMPILED(fwd, 96, bf16)
#endif
#ifdef FLASHATTN_SM90_96_FP16
FA_COMPILED(fwd, 96, fp16)
#endif
#ifdef FLASHATTN_SM90_192_BF16
FA_COMPILED(fwd, 192, bf16)
#endif
#ifdef FLASHATTN_SM90_192_FP16
FA_COMPILED(fwd, 192, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_64_BF16
FA_COMPILED(bwd, 64, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_128_BF16
FA_COMPILED(bwd, 128, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_64_FP16
FA_COMPILED(bwd, 64, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_128_FP16
FA_COMPILED(bwd, 128, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_256_BF16
FA_COMPILED(bwd, 256, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_256_FP16
FA_COMPILED(bwd, 256, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_96_BF16
FA_COMPILED(bwd, 96, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_96_FP16
FA_COMPILED(bwd, 96, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_96_BF16
FA_COMPILED(bwd_mods, 96, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_96_FP16
FA_COMPILED(bwd_mods, 96, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_192_BF16
FA_COMPILED(bwd, 192, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_192_FP16
FA_COMPILED(bwd, 192, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_192_BF16
FA_COMPILED(bwd_mods, 192, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_192_FP16
FA_COMPILED(bwd_mods, 192, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_64_BF16
FA_COMPILED(bwd_mods, 64, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_64_FP16
FA_COMPILED(bwd_mods, 64, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_128_BF16
FA_COMPILED(bwd_mods, 128, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_128_FP16
FA_COMPILED(bwd_mods, 128, fp16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_256_BF16
FA_COMPILED(bwd_mods, 256, bf16)
#endif
#ifdef FLASHATTN_SM90_BWD_MODS_256_FP16
FA_COMPILED(bwd_mods, 256, fp16)
#endif
#undef FA_COMPILED

constexpr int kHeadDims[] = {64, 96, 128, 192, 256};
constexpr int kNumHeadDims = int(sizeof(kHeadDims) / sizeof(kHeadDims[0]));

// Calls f(integral_constant<D>) for the compiled head dim D == d; false if none.
template <Kind K, typename T, int I = 0, typename F>
bool with_dim(int d, const F& f) {
  if constexpr (I == kNumHeadDims) {
    return false;
  } else {
    constexpr int D = kHeadDims[I];
    if constexpr (kCompiled<K, D, T>)
      if (d == D) {
        f(std::integral_constant<int, D>{});
        return true;
      }
    return with_dim<K, T, I + 1>(d, f);
  }
}

template <Kind K>
bool compiled(DType dtype, int d) {
  const auto none = [](auto) {};
  return dtype == DType::bf16 ? with_dim<K, bf16>(d, none) : dtype == DType::f16 && with_dim<K, fp16>(d, none);
}

// What TMA can describe: a non-empty tensor, row counts below 2^31 (32-bit
// coordinates) and positive strides below 2^40 bytes (broadcast inputs, stride
// 0, stay on sm80: a descriptor the driver refuses must never reach a launch).
// Packed batches get a batch stride of their own in the launchers.
struct Strides {
  int64_t row, head, batch;
};
bool tma_ok(const FwdParams& p, std::initializer_list<Strides> tensors) {
  const int64_t rows_q = p.is_varlen() ? p.total_q : p.seqlen_q;
  const int64_t rows_k = p.is_varlen() ? p.total_k : p.seqlen_k;
  const int64_t limit = (int64_t(1) << 40) / 2;  // elements of 2 bytes
  bool ok = rows_q > 0 && rows_k > 0 && rows_q < (int64_t(1) << 31) && rows_k < (int64_t(1) << 31);
  for (const Strides& t : tensors) {
    ok = ok && t.row > 0 && t.row < limit && t.head > 0 && t.head < limit;
    if (!p.is_varlen()) ok = ok && t.batch > 0 && t.batch < limit;
  }
  return ok;
}

}  // namespace

bool supports_forward(const FwdParams& p) {
  // O leaves through a TMA store too. The persistent scheduler numbers (query
  // tile, head, batch) tiles with 32-bit ints (128-row tiles at the least).
  // Softcap and ALiBi run here; dropout stays on sm80.
  const int64_t tiles = (p.seqlen_q + 127) / 128 * p.heads_q * p.batch;
  return compiled<Kind::fwd>(p.dtype, int(p.head_dim_qk)) && p.head_dim_v == p.head_dim_qk &&
         !(p.dropout_p > 0.f) && tiles < (int64_t(1) << 30) &&
         tma_ok(p, {{p.q_row_stride, p.q_head_stride, p.q_batch_stride},
                    {p.k_row_stride, p.k_head_stride, p.k_batch_stride},
                    {p.v_row_stride, p.v_head_stride, p.v_batch_stride},
                    {p.o_row_stride, p.o_head_stride, p.o_batch_stride}});
}

// Dropout uses the sm80 backward; softcap, ALiBi and a non-positive scale run
// here in kernels of their own (bwd_kernel.cuh, ScoreMods).
// The deterministic mode runs in those kernels too (ordered dQ reduce-adds;
// under a causal-like mask in decreasing key-block order, level with the
// atomic kernel there: kernel_notes, sm90 backward v19), except where the plain
// kernels take dQ apart (hd256, bwd_switches.h): they add nothing atomically.
static bool special_backward(const BwdParams& p) {
  return detail::needs_score_mods(p) || (p.deterministic && !bwd_dq_apart(int(p.head_dim_qk)));
}

bool programmatic_launch_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("FLASHATTN_SM90_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

bool backward_needs_dq_accum(const BwdParams& p) {
  return detail::needs_score_mods(p) || !bwd_dq_apart(int(p.head_dim_qk));
}

bool supports_backward(const BwdParams& p) {
  const bool kernel = special_backward(p) ? compiled<Kind::bwd_mods>(p.dtype, int(p.head_dim_qk))
                                          : compiled<Kind::bwd>(p.dtype, int(p.head_dim_qk));
  return kernel && p.head_dim_v == p.head_dim_qk && !(p.dropout_p > 0.f) &&
         tma_ok(p, {{p.q_row_stride, p.q_head_stride, p.q_batch_stride},
                    {p.k_row_stride, p.k_head_stride, p.k_batch_stride},
                    {p.v_row_stride, p.v_head_stride, p.v_batch_stride},
                    {p.do_row_stride, p.do_head_stride, p.do_batch_stride}});
}

cudaError_t forward_used(const FwdKernelParams& p, const int32_t* seqused_k, cudaStream_t stream) {
  // Batched caches only: packed sequences' first tile, loaded ending at the used keys,
  // would meet the previous sequence's rows instead of zeros.
  if (seqused_k != nullptr && p.cu_seqlens_q != nullptr) return cudaErrorInvalidValue;
  cudaError_t err = cudaErrorNotSupported;
  const int d = static_cast<int>(p.head_dim_qk);
  auto run = [&](auto elem) {
    using T = decltype(elem);
    with_dim<Kind::fwd, T>(d, [&](auto dim) { err = run_fwd_used<decltype(dim)::value, T>(p, seqused_k, stream); });
  };
  if (p.dtype == DType::bf16) run(bf16{});
  else run(fp16{});
  return err;
}

cudaError_t forward(const FwdKernelParams& p, cudaStream_t stream) { return forward_used(p, nullptr, stream); }

cudaError_t backward(const BwdKernelParams& p, cudaStream_t stream) {
  cudaError_t err = cudaErrorNotSupported;
  const int d = static_cast<int>(p.head_dim_qk);
  auto run = [&](auto elem) {
    using T = decltype(elem);
    if (special_backward(p))
      with_dim<Kind::bwd_mods, T>(d, [&](auto dim) { err = run_bwd_mods<decltype(dim)::value, T>(p, stream); });
    else
      with_dim<Kind::bwd, T>(d, [&](auto dim) { err = run_bwd<decltype(dim)::value, T>(p, stream); });
  };
  if (p.dtype == DType::bf16) run(bf16{});
  else run(fp16{});
  return err;
}

}  // namespace flashattn::sm90
