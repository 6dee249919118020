#include "backends/cpu/kernels/kernels.h"

#include "backends/cpu/kernels/x86.h"

namespace flashattn::detail::cpu {

#if defined(__x86_64__)
// fp32 products and the row operations are the same AVX-512 code on the three
// x86 levels; the levels differ in how bf16 tiles are multiplied.
namespace {
Kernels avx512_table(Isa isa) {
  using namespace x86;
  return Kernels{isa,
                 gemm_f32_avx512,
                 nullptr,
                 nullptr,
                 nullptr,
                 row_max_avx512,
                 exp_sum_avx512,
                 exp_sub_vec_avx512,
                 scale_row_avx512,
                 softmax_grad_vec_avx512,
                 dot_avx512,
                 portable_kernels().to_bf16,
                 portable_kernels().to_bf16_vnni,
                 nullptr,
                 finite_f32_avx512,
                 bf16_vnni_avx512,
                 f16_to_f32_avx512,
                 bf16_to_f32_avx512,
                 nullptr,
                 nullptr,
                 nullptr};
}
}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels k = avx512_table(Isa::avx512);
  return k;
}

const Kernels& avx512_bf16_kernels() {
  static const Kernels k = [] {
    Kernels t = avx512_table(Isa::avx512_bf16);
    t.gemm_bf16 = x86::gemm_bf16_avx512;
    t.to_bf16 = x86::to_bf16_avx512;
    t.to_bf16_vnni = x86::to_bf16_vnni_avx512;
    t.exp_sum_bf16 = x86::exp_sum_bf16_avx512;
    t.bwd_tile_bf16 = x86::bwd_tile_bf16_avx512;
    t.to_bf16_split = x86::to_bf16_split_avx512;
    t.exp_sum_split = x86::exp_sum_split_avx512;
    return t;
  }();
  return k;
}

const Kernels& amx_kernels() {
  static const Kernels k = [] {
    Kernels t = avx512_bf16_kernels();
    t.isa = Isa::amx;
    t.gemm_bf16 = x86::gemm_bf16_amx;
    t.thread_begin = x86::amx_thread_begin;
    t.thread_end = x86::amx_thread_end;
    return t;
  }();
  return k;
}
#endif

const Kernels& kernels(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(supported_isa())) isa = supported_isa();
#if defined(__x86_64__)
  switch (isa) {
    case Isa::amx: return amx_kernels();
    case Isa::avx512_bf16: return avx512_bf16_kernels();
    case Isa::avx512: return avx512_kernels();
    default: break;
  }
#endif
  return portable_kernels();
}

}  // namespace flashattn::detail::cpu
