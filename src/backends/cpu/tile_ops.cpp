#include "backends/cpu/tile_ops.h"

#include "backends/cpu/kernels/kernels.h"
#include "backends/host_rows.h"
#include "flashattn/numeric.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

// One clone per x86-64 level; the loader picks the best the CPU has.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FA_CLONES
#endif

namespace flashattn::detail::cpu {
namespace {

// Register block of the products: MB rows x NB columns of C stay in registers
// (8 zmm with AVX-512) while K streams.
constexpr int kMB = 4;
constexpr int kNB = 32;
// Independent lanes for reductions, so they vectorise without reassociation flags.
constexpr int kLanes = 16;
constexpr float kNegInfF = -std::numeric_limits<float>::infinity();

inline void gemm_impl(int64_t M, int64_t N, int64_t K, const float* __restrict A, int64_t lda,
                      const float* __restrict B, int64_t ldb, float* __restrict C, int64_t ldc,
                      bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += kNB) {
    const int64_t nb = std::min<int64_t>(kNB, N - n0);
    int64_t m0 = 0;
    if (nb == kNB) {
      for (; m0 + kMB <= M; m0 += kMB) {
        float c[kMB][kNB];
        for (int r = 0; r < kMB; ++r)
          for (int n = 0; n < kNB; ++n) c[r][n] = accumulate ? C[(m0 + r) * ldc + n0 + n] : 0.f;
        for (int64_t k = 0; k < K; ++k) {
          const float* b = B + k * ldb + n0;
          for (int r = 0; r < kMB; ++r) {
            const float a = A[(m0 + r) * lda + k];
            for (int n = 0; n < kNB; ++n) c[r][n] += a * b[n];
          }
        }
        for (int r = 0; r < kMB; ++r)
          for (int n = 0; n < kNB; ++n) C[(m0 + r) * ldc + n0 + n] = c[r][n];
      }
    }
    for (; m0 < M; ++m0) {  // leftover rows, or a narrow last column block
      float* c = C + m0 * ldc + n0;
      if (!accumulate) std::fill(c, c + nb, 0.f);
      for (int64_t k = 0; k < K; ++k) {
        const float a = A[m0 * lda + k];
        const float* b = B + k * ldb + n0;
        for (int64_t n = 0; n < nb; ++n) c[n] += a * b[n];
      }
    }
  }
}

// exp(x) to about 1 ulp for x <= 88 (every caller passes x - max <= 0),
// branch-free so loops over it vectorise (Cephes-style range reduction and
// polynomial). Inputs below -87.3 (and -inf) give 0; NaN stays NaN.
inline float exp_approx(float x) {
  float xc = x < -87.3f ? -87.3f : (x > 88.f ? 88.f : x);
  xc = xc == xc ? xc : 0.f;  // NaN: keep the integer path defined, y carries the NaN
  const float fn = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round(x / ln 2)
  const float r = (xc - fn * 0.693359375f) - fn * -2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.f;
  const int32_t bits = (static_cast<int32_t>(fn) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const float e = x == x ? y * scale : x;
  return x < -87.3f ? 0.f : e;
}

}  // namespace

FA_CLONES void gemm_nn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                       const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  gemm_impl(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

// (a > b || a != a) keeps a NaN once seen: a row with a NaN score has a NaN max.
FA_CLONES float row_max(const float* x, int64_t n) {
  float lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float v = x[j + l];
      lane[l] = (v > lane[l] || v != v) ? v : lane[l];
    }
  float m = -std::numeric_limits<float>::infinity();
  for (int l = 0; l < kLanes; ++l) m = (lane[l] > m || lane[l] != lane[l]) ? lane[l] : m;
  for (; j < n; ++j) m = (x[j] > m || x[j] != x[j]) ? x[j] : m;
  return m;
}

FA_CLONES float exp_sum(float* x, int64_t n, float scale, float m) {
  float lane[kLanes] = {};
  int64_t j = 0;
  // A masked score (-inf) gives exactly 0, even when m is NaN.
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      x[j + l] = x[j + l] == kNegInf ? 0.f : exp_approx(x[j + l] * scale - m);
      lane[l] += x[j + l];
    }
  float s = 0.f;
  for (; j < n; ++j) {
    x[j] = x[j] == kNegInf ? 0.f : exp_approx(x[j] * scale - m);
    s += x[j];
  }
  for (int l = 0; l < kLanes; ++l) s += lane[l];
  return s;
}

FA_CLONES void scale_row(float* x, int64_t n, float a) {
  for (int64_t j = 0; j < n; ++j) x[j] *= a;
}

FA_CLONES float dot(const float* x, const float* y, int64_t n) {
  float lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += x[j + l] * y[j + l];
  float s = 0.f;
  for (; j < n; ++j) s += x[j] * y[j];
  for (int l = 0; l < kLanes; ++l) s += lane[l];
  return s;
}

FA_CLONES void exp_sub_vec(float* x, const float* m, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] = x[j] == kNegInfF ? 0.f : exp_approx(x[j] - m[j]);
}

FA_CLONES void softmax_grad_vec(const float* p, float* dp, const float* d, int64_t n, float scale) {
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] == 0.f ? 0.f : p[j] * (dp[j] - d[j]) * scale;
}

void to_bf16(const float* x, uint16_t* y, int64_t n, int64_t n_pad) {
  for (int64_t j = 0; j < n; ++j) y[j] = float_to_bf16(x[j]);
  for (int64_t j = n; j < n_pad; ++j) y[j] = 0;
}

void to_bf16_vnni(const float* x, int64_t ldx, int64_t rows, int64_t rows_p, int64_t cols_p,
                  uint16_t* y) {
  for (int64_t r = 0; r < rows_p; ++r)
    for (int64_t c = 0; c < cols_p; ++c)
      y[(c / 16) * rows_p * 16 + (r / 2) * 32 + (c % 16) * 2 + r % 2] =
          r < rows ? float_to_bf16(x[r * ldx + c]) : uint16_t{0};
}

bool finite_f32(const float* x, int64_t ldx, int64_t rows, int64_t cols) {
  uint32_t bad = 0;  // an OR over the rows, so the loop vectorises
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) bad |= finite_bits<F32>(x[r * ldx + c]) ? 0u : 1u;
  return bad == 0;
}

bool bf16_vnni(const uint16_t* x, int64_t ldx, int64_t rows, int64_t rows_p, int64_t cols, int64_t cols_p,
               uint16_t* y) {
  uint32_t bad = 0;
  for (int64_t r = 0; r < rows_p; ++r)
    for (int64_t c = 0; c < cols_p; ++c) {
      const uint16_t v = r < rows && c < cols ? x[r * ldx + c] : uint16_t{0};
      bad |= finite_bits<BF16>(v) ? 0u : 1u;
      y[(c / 16) * rows_p * 16 + (r / 2) * 32 + (c % 16) * 2 + r % 2] = v;
    }
  return bad == 0;
}

namespace {
// fp16 bits to fp32 with selects only, so the loops over it vectorise (numeric.h's
// fp16_to_float normalises subnormals in a loop): exponent and mantissa shifted
// into place and the exponent rebiased; inf / NaN take the rest of the way to
// 255; a subnormal (or zero) is rebiased as if normal and its implicit one
// taken away by one exact fp32 subtraction.
inline float fp16_bits_to_float(uint16_t h) {
  constexpr uint32_t kExp = 0x7C00u << 13;  // fp16's exponent field, shifted
  const uint32_t shifted = static_cast<uint32_t>(h & 0x7FFFu) << 13;
  const uint32_t exp = shifted & kExp;
  const uint32_t normal = shifted + ((127u - 15u) << 23);
  const uint32_t special = normal + ((128u - 16u) << 23);
  const uint32_t tiny_bits = normal + (1u << 23);
  float tiny, magic;
  const uint32_t magic_bits = 113u << 23;  // 2^-14
  std::memcpy(&tiny, &tiny_bits, 4);
  std::memcpy(&magic, &magic_bits, 4);
  tiny -= magic;
  uint32_t tiny_u;
  std::memcpy(&tiny_u, &tiny, 4);
  // The selects as masks: GCC turns ternaries here into branches at AVX2.
  const uint32_t is_special = 0u - static_cast<uint32_t>(exp == kExp);
  const uint32_t is_tiny = 0u - static_cast<uint32_t>(exp == 0);
  uint32_t u = (special & is_special) | (tiny_u & is_tiny) | (normal & ~(is_special | is_tiny));
  u |= static_cast<uint32_t>(h & 0x8000u) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

// 16-bit rows widened to fp32, with the finite test; inlined into each clone
// of its callers, so it is vectorised for each level.
template <typename Elem>
inline __attribute__((always_inline)) bool widen_rows(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols,
                                                      float* y, int64_t ldy) {
  uint32_t bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint16_t h = x[r * ldx + c];
      bad |= finite_bits<Elem>(h) ? 0u : 1u;
      y[r * ldy + c] = std::is_same_v<Elem, F16> ? fp16_bits_to_float(h) : bf16_to_float(h);
    }
  return bad == 0;
}

FA_CLONES bool f16_to_f32(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y, int64_t ldy) {
  return widen_rows<F16>(x, ldx, rows, cols, y, ldy);
}

FA_CLONES bool bf16_to_f32(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y, int64_t ldy) {
  return widen_rows<BF16>(x, ldx, rows, cols, y, ldy);
}

const Kernels& portable_kernels() {
  static const Kernels k{Isa::portable, gemm_nn,   nullptr,      nullptr,    nullptr,
                         row_max,       exp_sum,   exp_sub_vec,  scale_row,  softmax_grad_vec,
                         dot,           to_bf16,   to_bf16_vnni, nullptr,    finite_f32,
                         bf16_vnni,     f16_to_f32,   bf16_to_f32, nullptr,
                         nullptr,       nullptr};
  return k;
}

}  // namespace flashattn::detail::cpu
