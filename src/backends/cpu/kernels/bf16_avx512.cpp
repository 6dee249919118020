// AVX512-BF16 kernels: the bf16 product with vdpbf16ps (each fp32 lane adds the
// products of one bf16 pair of A and B, so B comes in the VNNI panels of
// kernels.h) and the fp32 -> bf16 rounding of probability tiles.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels/x86.h"

// GCC 12 flags the undefined upper halves inside its own reduce intrinsics.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define FA_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

namespace flashattn::detail::cpu::x86 {
namespace {

// kMR rows x kNP panels (16 columns each) of C in registers: 24 accumulators.
constexpr int kMR = 6;
constexpr int kNP = 4;
constexpr int kPanel = 16;

template <int MR, int NP>
FA_BF16 void bf16_block(int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                        float* C, int64_t ldc, bool accumulate) {
  __m512 c[MR][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p)
      c[r][p] = accumulate ? _mm512_loadu_ps(C + r * ldc + p * kPanel) : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 2) {
    __m512i b[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) b[p] = _mm512_loadu_si512(B + p * ldb + k * kPanel);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      __builtin_memcpy(&pair, A + r * lda + k, sizeof(pair));
      const __m512i a = _mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p)
        c[r][p] = _mm512_dpbf16_ps(c[r][p], (__m512bh)a, (__m512bh)b[p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) _mm512_storeu_ps(C + r * ldc + p * kPanel, c[r][p]);
}

using BlockFn = void (*)(int64_t, const uint16_t*, int64_t, const uint16_t*, int64_t, float*,
                         int64_t, bool);

template <int MR>
FA_BF16 BlockFn block_for(int np) {
  switch (np) {
    case 1: return bf16_block<MR, 1>;
    case 2: return bf16_block<MR, 2>;
    case 3: return bf16_block<MR, 3>;
    default: return bf16_block<MR, 4>;
  }
}

FA_BF16 BlockFn block_for(int mr, int np) {
  switch (mr) {
    case 1: return block_for<1>(np);
    case 2: return block_for<2>(np);
    case 3: return block_for<3>(np);
    case 4: return block_for<4>(np);
    case 5: return block_for<5>(np);
    default: return block_for<6>(np);
  }
}

}  // namespace

FA_BF16 void gemm_bf16_avx512(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                              const uint16_t* B, int64_t ldb, float* C, int64_t ldc,
                              bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += kNP * kPanel) {
    const int64_t panels = (N - n0) / kPanel;
    const int np = panels >= kNP ? kNP : static_cast<int>(panels);
    const uint16_t* b = B + (n0 / kPanel) * ldb;
    const BlockFn full = block_for(kMR, np);
    int64_t m0 = 0;
    for (; m0 + kMR <= M; m0 += kMR) full(K, A + m0 * lda, lda, b, ldb, C + m0 * ldc + n0, ldc, accumulate);
    if (m0 < M)
      block_for(static_cast<int>(M - m0), np)(K, A + m0 * lda, lda, b, ldb, C + m0 * ldc + n0, ldc,
                                              accumulate);
  }
}

FA_BF16 void to_bf16_avx512(const float* x, uint16_t* y, int64_t n, int64_t n_pad) {
  for (int64_t j = 0; j < n_pad; j += 16) {
    const int64_t left = n - j;
    const __mmask16 t = left >= 16 ? static_cast<__mmask16>(0xFFFF)
                        : left <= 0 ? static_cast<__mmask16>(0)
                                    : static_cast<__mmask16>((1u << left) - 1u);
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(t, x + j));  // zeros past n
    const int64_t w = n_pad - j;
    const __mmask16 wm = w >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << w) - 1u);
    _mm256_mask_storeu_epi16(y + j, wm, (__m256i)h);
  }
}

FA_BF16 void to_bf16_vnni_avx512(const float* x, int64_t ldx, int64_t rows, int64_t rows_p,
                                 int64_t cols_p, uint16_t* y) {
  const __m512i idx = _mm512_load_si512(kVnniInterleave);
  for (int64_t r = 0; r < rows_p; r += 2) {
    for (int64_t c = 0; c < cols_p; c += kPanel) {
      const __m512 lo = r < rows ? _mm512_loadu_ps(x + r * ldx + c) : _mm512_setzero_ps();
      const __m512 hi = r + 1 < rows ? _mm512_loadu_ps(x + (r + 1) * ldx + c) : _mm512_setzero_ps();
      const __m512i pair = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // row r in lanes 0-15, r+1 in 16-31
      _mm512_storeu_si512(y + (c / kPanel) * rows_p * kPanel + r * kPanel,
                          _mm512_permutexvar_epi16(idx, pair));
    }
  }
}

// exp(t) as 2^(t log2 e): n = round(y), 2^(y - n) by a degree-5 polynomial on
// [-1/2, 1/2] (2.3e-7 relative in fp32), scaled by 2^n. Fewer steps than the
// fp32 pipeline's exp (no clamps, no two-part ln 2): finite y needs none, since
// scalef saturates to 0 or inf; -inf scores are masked by the caller.
FA_BF16 static inline __attribute__((always_inline)) __m512 exp2_poly(__m512 y) {
  const __m512 n = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(y, n);
  __m512 p = _mm512_set1_ps(1.327647129073739e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.675541892647743e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550713092088699e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022120237350464e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931469440460205e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0000001192092896f));
  return _mm512_scalef_ps(p, n);
}

// The fp16 split's halves: x rounded to bf16 and back (hi), whether hi is finite,
// and the rest x - hi (0 where hi is not: inf - inf would be NaN, a finite x
// rounded up to inf -inf).
FA_BF16 static inline __attribute__((always_inline)) __m512 bf16_hi(__m512 x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)), 16));
}
FA_BF16 static inline __attribute__((always_inline)) __mmask16 bf16_finite(__m512 x) {
  const __m512 hv = bf16_hi(x);
  return _mm512_cmp_ps_mask(_mm512_sub_ps(hv, hv), _mm512_setzero_ps(), _CMP_EQ_OQ);
}
FA_BF16 static inline __attribute__((always_inline)) __m512 bf16_rest(__m512 x) {
  const __m512 hv = bf16_hi(x);
  const __mmask16 fin = _mm512_cmp_ps_mask(_mm512_sub_ps(hv, hv), _mm512_setzero_ps(), _CMP_EQ_OQ);
  return _mm512_maskz_sub_ps(fin, x, hv);
}

// exp_sum_bf16 and exp_sum_split: e = exp(scale x - m) rounded to bf16 in y and,
// with kLo, the rest e - y rounded to bf16 in lo (0 where e is not finite).
template <bool kLo>
FA_BF16 static inline __attribute__((always_inline)) void store_rounded(__m512 e, __mmask16 wm, uint16_t* y,
                                                                       uint16_t* lo) {
  _mm256_mask_storeu_epi16(y, wm, (__m256i)_mm512_cvtneps_pbh(e));
  if constexpr (kLo) _mm256_mask_storeu_epi16(lo, wm, (__m256i)_mm512_cvtneps_pbh(bf16_rest(e)));
}

// keep: e also replaces x (fp32), the same bits the rounding saw.
template <bool kLo>
FA_BF16 static inline __attribute__((always_inline)) float exp_sum_rounded(float* x, int64_t n, float scale,
                                                                           float m, uint16_t* y, uint16_t* lo,
                                                                           int64_t n_pad, bool keep) {
  const __m512 sc = _mm512_set1_ps(scale), mv = _mm512_set1_ps(m);
  const __m512 l2e = _mm512_set1_ps(1.44269504088896341f), ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 sum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    const __mmask16 live = _mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_UQ);
    const __m512 e = _mm512_maskz_mov_ps(live, exp2_poly(_mm512_mul_ps(_mm512_fmsub_ps(v, sc, mv), l2e)));
    sum = _mm512_add_ps(sum, e);
    store_rounded<kLo>(e, static_cast<__mmask16>(0xFFFF), y + j, kLo ? lo + j : nullptr);
    if (keep) _mm512_storeu_ps(x + j, e);
  }
  for (; j < n_pad; j += 16) {  // the tail and the zero padding
    const int64_t left = n - j, w = n_pad - j;
    const __mmask16 t = left >= 16 ? static_cast<__mmask16>(0xFFFF)
                        : left <= 0 ? static_cast<__mmask16>(0)
                                    : static_cast<__mmask16>((1u << left) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(t, x + j);
    const __mmask16 live = t & _mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_UQ);
    const __m512 e = _mm512_maskz_mov_ps(live, exp2_poly(_mm512_mul_ps(_mm512_fmsub_ps(v, sc, mv), l2e)));
    sum = _mm512_add_ps(sum, e);
    const __mmask16 wm = w >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << w) - 1u);
    store_rounded<kLo>(e, wm, y + j, kLo ? lo + j : nullptr);
    if (keep) _mm512_mask_storeu_ps(x + j, t, e);
  }
  return _mm512_reduce_add_ps(sum);
}

FA_BF16 float exp_sum_bf16_avx512(float* x, int64_t n, float scale, float m, uint16_t* y, int64_t n_pad,
                                  bool keep) {
  return exp_sum_rounded<false>(x, n, scale, m, y, nullptr, n_pad, keep);
}

FA_BF16 float exp_sum_split_avx512(float* x, int64_t n, float scale, float m, uint16_t* hi, uint16_t* lo,
                                   int64_t n_pad, bool keep) {
  return exp_sum_rounded<true>(x, n, scale, m, hi, lo, n_pad, keep);
}

// One row's 16 queries of a backward tile pair: p and ds (0 outside `live`).
FA_BF16 static inline __attribute__((always_inline)) void bwd_row16(const BwdTileBf16& t, int64_t j, int64_t c,
                                                                     __mmask16 cm, __m512 m, __m512 d,
                                                                     __m512& p, __m512& ds) {
  const __m512 sc = _mm512_set1_ps(t.scale), sds = _mm512_set1_ps(t.scale_ds);
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  const __m512 v = _mm512_maskz_loadu_ps(cm, t.s + j * t.ld + c);
  const __m512 y = _mm512_fmsub_ps(v, sc, m);
  // A masked score (-inf once scaled) gives exactly 0 whatever m is (NaN too),
  // as does m = +inf (a query that saw no key); NaN otherwise stays live and
  // propagates. The test is on the scaled score: with a scale <= 0 an inf input
  // must reach P as inf or NaN, as in fp32.
  const __mmask16 live = cm & _mm512_cmp_ps_mask(_mm512_mul_ps(v, sc), ninf, _CMP_NEQ_UQ) &
                         _mm512_cmp_ps_mask(y, ninf, _CMP_NEQ_UQ);
  p = _mm512_maskz_mov_ps(live, exp2_poly(_mm512_mul_ps(y, _mm512_set1_ps(1.44269504088896341f))));
  const __m512 g = _mm512_maskz_loadu_ps(cm, t.dp + j * t.ld + c);
  const __mmask16 nz = _mm512_cmp_ps_mask(p, _mm512_setzero_ps(), _CMP_NEQ_UQ);
  ds = _mm512_maskz_mul_ps(nz, _mm512_mul_ps(p, _mm512_sub_ps(g, d)), sds);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.pa + j * t.ld + c), (__m256i)_mm512_cvtneps_pbh(p));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.da + j * t.ld + c), (__m256i)_mm512_cvtneps_pbh(ds));
  if (t.pa_lo != nullptr) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.pa_lo + j * t.ld + c), (__m256i)_mm512_cvtneps_pbh(bf16_rest(p)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.da_lo + j * t.ld + c), (__m256i)_mm512_cvtneps_pbh(bf16_rest(ds)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.da_f + j * t.ld + c),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_mov_ps(bf16_finite(ds), ds)));
  }
  if (t.keep) {
    _mm512_mask_storeu_ps(t.s + j * t.ld + c, cm, p);
    _mm512_mask_storeu_ps(t.dp + j * t.ld + c, cm, ds);
  }
}

// Query chunks outer, so each chunk's m and d stay in registers and its VNNI
// panel is written in order; the row pair inner feeds one vpermw per pair.
FA_BF16 void bwd_tile_bf16_avx512(const BwdTileBf16& t) {
  const __m512i idx = _mm512_load_si512(kVnniInterleave);
  for (int64_t c = 0; c < t.n_pad; c += kPanel) {
    const int64_t left = t.n - c;
    const __mmask16 cm = left >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : left <= 0 ? static_cast<__mmask16>(0)
                                     : static_cast<__mmask16>((1u << left) - 1u);
    const __m512 m = _mm512_maskz_loadu_ps(cm, t.m + c), d = _mm512_maskz_loadu_ps(cm, t.d + c);
    const bool split = t.pa_lo != nullptr;
    const int64_t seg = t.rows_p * kPanel;  // one segment of a panel
    uint16_t* panel = t.db + (c / kPanel) * (split ? 3 : 1) * seg;
    for (int64_t j = 0; j < t.rows_p; j += 2) {
      __m512 p, ds0 = _mm512_setzero_ps(), ds1 = _mm512_setzero_ps();
      if (j < t.rows) bwd_row16(t, j, c, cm, m, d, p, ds0);
      if (j + 1 < t.rows) bwd_row16(t, j + 1, c, cm, m, d, p, ds1);
      const __m512i pair = _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(ds1, ds0));
      _mm512_storeu_si512(panel + j * kPanel, pair);
      if (split) {  // segments [dS hi; dS lo; dS hi, 0 where not finite]
        const __m512i rest = (__m512i)_mm512_cvtne2ps_pbh(bf16_rest(ds1), bf16_rest(ds0));
        _mm512_storeu_si512(panel + seg + j * kPanel, _mm512_permutexvar_epi16(idx, rest));
        const __m512i fin = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_mov_ps(bf16_finite(ds1), ds1),
                                                         _mm512_maskz_mov_ps(bf16_finite(ds0), ds0));
        _mm512_storeu_si512(panel + 2 * seg + j * kPanel, _mm512_permutexvar_epi16(idx, fin));
      }
    }
  }
}

FA_BF16 void to_bf16_split_avx512(const float* x, uint16_t* hi, uint16_t* lo, int64_t n, int64_t n_pad) {
  for (int64_t j = 0; j < n_pad; j += 16) {
    const int64_t left = n - j, w = n_pad - j;
    const __mmask16 t = left >= 16 ? static_cast<__mmask16>(0xFFFF)
                        : left <= 0 ? static_cast<__mmask16>(0)
                                    : static_cast<__mmask16>((1u << left) - 1u);
    const __mmask16 wm = w >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << w) - 1u);
    store_rounded<true>(_mm512_maskz_loadu_ps(t, x + j), wm, hi + j, lo + j);  // zeros past n
  }
}

}  // namespace flashattn::detail::cpu::x86
