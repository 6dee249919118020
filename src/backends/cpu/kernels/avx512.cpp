// AVX-512 (F/BW/VL/DQ) kernels: the fp32 register-blocked product and the
// vectorised row operations of the online softmax. Every function carries the
// target attribute, and nothing from a header is instantiated here, so none of
// these instructions leak into code that runs before the CPU check.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels/x86.h"

// GCC 12 flags the undefined upper halves inside its own reduce intrinsics.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define FA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define FA_INLINE inline __attribute__((always_inline))

namespace flashattn::detail::cpu::x86 {
namespace {

// Register block of the fp32 product: kMR rows x kNV vectors of 16 columns of C
// (24 of the 32 zmm registers) stay in registers while K streams; per k, kNV
// loads of B and kMR broadcasts of A feed kMR * kNV FMAs.
constexpr int kMR = 6;
constexpr int kNV = 4;
constexpr int kW = 16;  // floats per vector

FA_AVX512 FA_INLINE __mmask16 tail_mask(int64_t n) {
  return n >= kW ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

template <int MR, int NV>
FA_AVX512 void f32_block(int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                         float* C, int64_t ldc, bool accumulate, __mmask16 last) {
  __m512 c[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      c[r][v] = accumulate ? _mm512_maskz_loadu_ps(v == NV - 1 ? last : 0xFFFF, C + r * ldc + v * kW)
                           : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      b[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, B + k * ldb + v * kW)
                         : _mm512_loadu_ps(B + k * ldb + v * kW);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (v == NV - 1) _mm512_mask_storeu_ps(C + r * ldc + v * kW, last, c[r][v]);
      else _mm512_storeu_ps(C + r * ldc + v * kW, c[r][v]);
    }
}

using BlockFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                         bool, __mmask16);

template <int MR>
FA_AVX512 BlockFn block_for(int nv) {
  switch (nv) {
    case 1: return f32_block<MR, 1>;
    case 2: return f32_block<MR, 2>;
    case 3: return f32_block<MR, 3>;
    default: return f32_block<MR, 4>;
  }
}

FA_AVX512 BlockFn block_for(int mr, int nv) {
  switch (mr) {
    case 1: return block_for<1>(nv);
    case 2: return block_for<2>(nv);
    case 3: return block_for<3>(nv);
    case 4: return block_for<4>(nv);
    case 5: return block_for<5>(nv);
    default: return block_for<6>(nv);
  }
}

// exp(x) to about 1 ulp: x = n ln2 + r with |r| <= ln2/2, a degree-7 polynomial
// for exp(r) (the portable path's coefficients), 2^n applied with scalef, which
// also underflows gracefully to 0. -inf gives 0 (exp(-104) is below the smallest
// denormal); NaN stays NaN.
FA_AVX512 FA_INLINE __m512 exp512(__m512 x) {
  // Clamped to [-104, 88] (NaN passes through both: the second operand wins).
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.f), _mm512_max_ps(_mm512_set1_ps(-104.f), x));
  const __m512 fn = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(y, fn);
}

FA_AVX512 FA_INLINE float max_or_nan(__m512 mx, __mmask16 nan) {
  return nan ? __builtin_nanf("") : _mm512_reduce_max_ps(mx);
}

}  // namespace

FA_AVX512 void gemm_f32_avx512(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                               const float* B, int64_t ldb, float* C, int64_t ldc,
                               bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += kNV * kW) {
    const int64_t nrem = N - n0;
    const int nv = nrem >= kNV * kW ? kNV : static_cast<int>((nrem + kW - 1) / kW);
    const __mmask16 last = tail_mask(nrem - (nv - 1) * kW);
    const BlockFn full = block_for(kMR, nv);
    int64_t m0 = 0;
    for (; m0 + kMR <= M; m0 += kMR)
      full(K, A + m0 * lda, lda, B + n0, ldb, C + m0 * ldc + n0, ldc, accumulate, last);
    if (m0 < M)
      block_for(static_cast<int>(M - m0), nv)(K, A + m0 * lda, lda, B + n0, ldb, C + m0 * ldc + n0,
                                              ldc, accumulate, last);
  }
}

FA_AVX512 float row_max_avx512(const float* x, int64_t n) {
  // Two accumulators, unmasked loads but for the tail.
  __m512 m0 = _mm512_set1_ps(-__builtin_inff()), m1 = m0;
  __mmask16 nan = 0;
  int64_t j = 0;
  for (; j + 2 * kW <= n; j += 2 * kW) {
    const __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + kW);
    m0 = _mm512_max_ps(m0, a);
    m1 = _mm512_max_ps(m1, b);
    nan |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
  }
  for (; j < n; j += kW) {
    const __mmask16 m = tail_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    m0 = _mm512_mask_max_ps(m0, m, m0, v);
    nan |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
  }
  return max_or_nan(_mm512_max_ps(m0, m1), nan);
}

FA_AVX512 float exp_sum_avx512(float* x, int64_t n, float scale, float mval) {
  const __m512 m = _mm512_set1_ps(mval), sc = _mm512_set1_ps(scale);
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += kW) {
    const __mmask16 t = tail_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(t, x + j);
    const __mmask16 live = _mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_UQ);  // -inf gives exactly 0
    const __m512 e = _mm512_maskz_mov_ps(live, exp512(_mm512_fmsub_ps(v, sc, m)));
    _mm512_mask_storeu_ps(x + j, t, e);
    sum = _mm512_mask_add_ps(sum, t, sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

FA_AVX512 void exp_sub_vec_avx512(float* x, const float* mv, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  for (int64_t j = 0; j < n; j += kW) {
    const __mmask16 t = tail_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(t, x + j);
    const __m512 m = _mm512_maskz_loadu_ps(t, mv + j);
    const __mmask16 live = _mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_UQ);
    _mm512_mask_storeu_ps(x + j, t, _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(v, m))));
  }
}

FA_AVX512 void scale_row_avx512(float* x, int64_t n, float a) {
  const __m512 s = _mm512_set1_ps(a);
  for (int64_t j = 0; j < n; j += kW) {
    const __mmask16 t = tail_mask(n - j);
    _mm512_mask_storeu_ps(x + j, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, x + j), s));
  }
}

FA_AVX512 void softmax_grad_vec_avx512(const float* p, float* dp, const float* d, int64_t n,
                                       float scale) {
  const __m512 s = _mm512_set1_ps(scale), zero = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += kW) {
    const __mmask16 t = tail_mask(n - j);
    const __m512 pv = _mm512_maskz_loadu_ps(t, p + j);
    const __m512 g = _mm512_maskz_loadu_ps(t, dp + j);
    const __m512 dv = _mm512_maskz_loadu_ps(t, d + j);
    const __mmask16 nz = _mm512_cmp_ps_mask(pv, zero, _CMP_NEQ_UQ);
    const __m512 r = _mm512_mul_ps(_mm512_mul_ps(pv, _mm512_sub_ps(g, dv)), s);
    _mm512_mask_storeu_ps(dp + j, t, _mm512_maskz_mov_ps(nz, r));
  }
}

FA_AVX512 float dot_avx512(const float* x, const float* y, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += kW) {
    const __mmask16 t = tail_mask(n - j);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(t, x + j), _mm512_maskz_loadu_ps(t, y + j), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// Non-finite: every exponent bit set (NaN and inf alike), tested on the bits.
FA_AVX512 bool finite_f32_avx512(const float* x, int64_t ldx, int64_t rows, int64_t cols) {
  const __m512i exp_bits = _mm512_set1_epi32(0x7F800000);
  __mmask16 bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += kW) {
      const __m512i v = _mm512_maskz_loadu_epi32(tail_mask(cols - c), x + r * ldx + c);
      bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(v, exp_bits), exp_bits);
    }
  return bad == 0;
}

FA_AVX512 bool bf16_vnni_avx512(const uint16_t* x, int64_t ldx, int64_t rows, int64_t rows_p, int64_t cols,
                                int64_t cols_p, uint16_t* y) {
  const __m512i idx = _mm512_load_si512(kVnniInterleave);
  const __m512i exp_bits = _mm512_set1_epi16(0x7F80);
  __mmask32 bad = 0;
  for (int64_t r = 0; r < rows_p; r += 2)
    for (int64_t c = 0; c < cols_p; c += kW) {
      const __mmask16 live = c < cols ? tail_mask(cols - c) : 0;
      const __m256i lo = _mm256_maskz_loadu_epi16(r < rows ? live : 0, x + r * ldx + c);
      const __m256i hi = _mm256_maskz_loadu_epi16(r + 1 < rows ? live : 0, x + (r + 1) * ldx + c);
      const __m512i pair = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      bad |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(pair, exp_bits), exp_bits);
      _mm512_storeu_si512(y + (c / kW) * rows_p * kW + r * kW, _mm512_permutexvar_epi16(idx, pair));
    }
  return bad == 0;
}

// 16-bit rows widened to fp32 exactly, with the finite test on the exponent bits:
// fp16 by vcvtph2ps (subnormals, inf and NaN included), bf16 (fp32's upper half)
// by a shift.
template <bool kBf16>
FA_AVX512 static inline bool widen_avx512(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y,
                                          int64_t ldy) {
  const __m256i exp_bits = _mm256_set1_epi16(kBf16 ? 0x7F80 : 0x7C00);
  __mmask16 bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += kW) {
      const __mmask16 t = tail_mask(cols - c);
      const __m256i h = _mm256_maskz_loadu_epi16(t, x + r * ldx + c);
      bad |= _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, exp_bits), exp_bits);
      __m512 f;
      if constexpr (kBf16) f = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      else f = _mm512_cvtph_ps(h);
      _mm512_mask_storeu_ps(y + r * ldy + c, t, f);
    }
  return bad == 0;
}

FA_AVX512 bool f16_to_f32_avx512(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y,
                                 int64_t ldy) {
  return widen_avx512<false>(x, ldx, rows, cols, y, ldy);
}

FA_AVX512 bool bf16_to_f32_avx512(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y,
                                  int64_t ldy) {
  return widen_avx512<true>(x, ldx, rows, cols, y, ldy);
}

}  // namespace flashattn::detail::cpu::x86
