// The CPU flash backend's instruction-set levels (backends/cpu/kernels/): each
// kernel of each level the CPU has against a plain double computation, then the
// whole backend forced onto each level and checked against the float64
// reference with the contract's rule (odd sizes, head dims 64/96/128/256,
// Dv != Dqk, masks, GQA, packed batches, dropout, softcap, ALiBi). Levels the CPU
// lacks are skipped.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/kernels/isa.h"
#include "backends/cpu/kernels/kernels.h"
#include "cases.h"
#include "flashattn/numeric.h"

namespace fatest {
namespace {

namespace cpu = flashattn::detail::cpu;
using cpu::Isa;

const std::vector<Isa> kLevels = {Isa::portable, Isa::avx512, Isa::avx512_bf16, Isa::amx};

bool have(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(cpu::supported_isa()); }

std::string level_name(const ::testing::TestParamInfo<Isa>& info) { return cpu::isa_name(info.param); }

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(gen);
  return x;
}

class CpuKernels : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!have(GetParam())) GTEST_SKIP() << cpu::isa_name(GetParam()) << " not on this CPU";
  }
  const cpu::Kernels& k() const { return cpu::kernels(GetParam()); }
};

TEST_P(CpuKernels, TableMatchesLevel) { EXPECT_EQ(k().isa, GetParam()); }

// fp32 products: odd shapes exercise every row and column tail of the blocking.
TEST_P(CpuKernels, GemmF32) {
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {7, 17, 5}, {64, 64, 128}, {13, 100, 33}, {6, 64, 64}}) {
    const int64_t lda = K + 3, ldb = N + 5, ldc = N + 2;
    const auto A = random_floats(M * lda, 1), B = random_floats(K * ldb, 2), C0 = random_floats(M * ldc, 3);
    for (bool acc : {false, true}) {
      std::vector<float> C = C0;
      k().gemm_f32(M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, acc);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < ldc; ++n) {
          if (n >= N) {  // outside the product: untouched
            ASSERT_EQ(C[m * ldc + n], C0[m * ldc + n]);
            continue;
          }
          double want = acc ? C0[m * ldc + n] : 0.0;
          for (int64_t q = 0; q < K; ++q) want += double(A[m * lda + q]) * B[q * ldb + n];
          ASSERT_NEAR(C[m * ldc + n], want, 1e-5 * (1 + std::sqrt(double(K)))) << M << "x" << N << "x" << K;
        }
    }
  }
}

// bf16 products with B in VNNI panels (kernels.h), against the same bf16 values
// multiplied in double.
TEST_P(CpuKernels, GemmBf16) {
  if (k().gemm_bf16 == nullptr) GTEST_SKIP() << "no bf16 products at this level";
  if (k().thread_begin) k().thread_begin();
  for (auto [M, N, K] : {std::tuple{32, 32, 32}, {64, 96, 128}, {96, 64, 64}, {32, 256, 256}}) {
    const int64_t lda = K + 32, ldc = N + 16;
    std::vector<uint16_t> A(M * lda), B(N * K);  // B: N/16 panels of [K/2][16][2]
    std::vector<float> a(M * K), b(K * N);
    const auto ra = random_floats(M * K, 4), rb = random_floats(K * N, 5);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t q = 0; q < K; ++q) {
        A[m * lda + q] = flashattn::float_to_bf16(ra[m * K + q]);
        a[m * K + q] = flashattn::bf16_to_float(A[m * lda + q]);
      }
    for (int64_t q = 0; q < K; ++q)
      for (int64_t n = 0; n < N; ++n) {
        const uint16_t x = flashattn::float_to_bf16(rb[q * N + n]);
        B[(n / 16) * K * 16 + (q / 2) * 32 + (n % 16) * 2 + q % 2] = x;
        b[q * N + n] = flashattn::bf16_to_float(x);
      }
    const auto C0 = random_floats(M * ldc, 6);
    for (bool acc : {false, true}) {
      std::vector<float> C = C0;
      k().gemm_bf16(M, N, K, A.data(), lda, B.data(), K * 16, C.data(), ldc, acc);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double want = acc ? C0[m * ldc + n] : 0.0;
          for (int64_t q = 0; q < K; ++q) want += double(a[m * K + q]) * b[q * N + n];
          ASSERT_NEAR(C[m * ldc + n], want, 1e-5 * (1 + std::sqrt(double(K)) * 4)) << M << "x" << N << "x" << K;
        }
    }
  }
  if (k().thread_end) k().thread_end();
}

TEST_P(CpuKernels, RowOps) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {1, 15, 16, 17, 64, 100, 128}) {
    auto x = random_floats(n, uint32_t(n));
    // max; a NaN anywhere makes it NaN
    float want = -inf;
    for (float v : x) want = std::max(want, v);
    EXPECT_EQ(k().row_max(x.data(), n), want);
    auto y = x;
    y[n / 2] = nan;
    EXPECT_TRUE(std::isnan(k().row_max(y.data(), n)));
    // exp(scale x - m): about an ulp; -inf gives exactly 0, even with a NaN m
    y = x;
    y[0] = -inf;
    const float m = want * 0.7f;
    double sum = 0.0;
    const float got_sum = k().exp_sum(y.data(), n, 0.7f, m);
    EXPECT_EQ(y[0], 0.f);
    for (int64_t j = 1; j < n; ++j) {
      const double e = std::exp(double(x[j]) * 0.7 - m);
      sum += e;
      ASSERT_NEAR(y[j], e, 3e-7 * e) << j;
    }
    EXPECT_NEAR(got_sum, sum, 1e-6 * sum + 1e-30);
    y = x;
    y[0] = -inf;
    k().exp_sum(y.data(), n, 1.f, nan);
    EXPECT_EQ(y[0], 0.f);
    // per-element exp and the softmax gradient
    auto mv = random_floats(n, 77);
    y = x;
    y[n - 1] = -inf;
    k().exp_sub_vec(y.data(), mv.data(), n);
    for (int64_t j = 0; j + 1 < n; ++j) ASSERT_NEAR(y[j], std::exp(double(x[j]) - mv[j]), 3e-7 * std::exp(double(x[j]) - mv[j]));
    EXPECT_EQ(y[n - 1], 0.f);
    auto p = x;
    p[0] = 0.f;
    auto dp = random_floats(n, 9);
    dp[0] = nan;  // a zero p keeps its gradient exactly 0
    const auto dp0 = dp;
    k().softmax_grad_vec(p.data(), dp.data(), std::vector<float>(n, 0.25f).data(), n, 2.f);
    EXPECT_EQ(dp[0], 0.f);
    for (int64_t j = 1; j < n; ++j)
      ASSERT_NEAR(dp[j], double(p[j]) * (dp0[j] - 0.25) * 2.0, 1e-6 * (1 + std::fabs(dp[j]))) << j;
    // dot and scale
    double d = 0.0;
    for (int64_t j = 0; j < n; ++j) d += double(x[j]) * mv[j];
    EXPECT_NEAR(k().dot(x.data(), mv.data(), n), d, 1e-5 * n);
    y = x;
    k().scale_row(y.data(), n, 3.f);
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(y[j], x[j] * 3.f);
  }
}

// The bf16 pipeline's fused exp: each value within an ulp of bf16 of the exact
// exp, the sum within fp32 accuracy, -inf exactly 0, zeros up to n_pad.
TEST_P(CpuKernels, ExpSumBf16) {
  if (k().exp_sum_bf16 == nullptr) GTEST_SKIP() << "no fused bf16 exp at this level";
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 15, 16, 17, 64, 100, 128}) {
    auto x = random_floats(n, uint32_t(n + 40));
    for (float& v : x) v *= 8.f;
    x[0] = -inf;
    float mx = -inf;
    for (float v : x) mx = std::max(mx, v);
    const float scale = 0.37f, m = mx * scale;
    const int64_t n_pad = (n + 31) / 32 * 32;
    std::vector<uint16_t> y(n_pad + 8, 0xFFFF);
    const auto x0 = x;
    const float got = k().exp_sum_bf16(x.data(), n, scale, m, y.data(), n_pad, false);
    EXPECT_EQ(x, x0);
    EXPECT_EQ(y[0], 0);
    double sum = 0.0;
    for (int64_t j = 1; j < n; ++j) {
      const double e = std::exp(double(x[j]) * scale - m);
      sum += e;
      ASSERT_NEAR(flashattn::bf16_to_float(y[j]), e, 8e-3 * e) << j;
    }
    EXPECT_NEAR(got, sum, 1e-6 * sum);
    for (int64_t j = n; j < n_pad; ++j) ASSERT_EQ(y[j], 0) << j;
    for (int64_t j = n_pad; j < n_pad + 8; ++j) ASSERT_EQ(y[j], 0xFFFF) << j;
    // The split pair: hi as above, hi + lo within 2^-15 of the exact exp.
    if (k().exp_sum_split == nullptr) continue;
    std::vector<uint16_t> hi(n_pad + 8, 0xFFFF), lo(n_pad + 8, 0xFFFF);
    EXPECT_EQ(k().exp_sum_split(x.data(), n, scale, m, hi.data(), lo.data(), n_pad, false), got);
    EXPECT_EQ(x, x0);
    // keep: the fp32 values rounded, stored over x (nothing past n).
    auto xk = x0;
    xk.resize(n_pad + 8, 7.f);
    std::vector<uint16_t> hk(n_pad + 8), lk(n_pad + 8);
    EXPECT_EQ(k().exp_sum_split(xk.data(), n, scale, m, hk.data(), lk.data(), n_pad, true), got);
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(flashattn::float_to_bf16(xk[j]), hi[j]) << j;
      ASSERT_EQ(hk[j], hi[j]) << j;
      ASSERT_EQ(lk[j], lo[j]) << j;
    }
    for (int64_t j = n; j < n_pad + 8; ++j) ASSERT_EQ(xk[j], 7.f) << j;
    for (int64_t j = 0; j < n_pad + 8; ++j) ASSERT_EQ(hi[j], y[j]) << j;
    EXPECT_EQ(lo[0], 0);
    for (int64_t j = 1; j < n; ++j) {
      const double e = std::exp(double(x[j]) * scale - m);
      ASSERT_NEAR(double(flashattn::bf16_to_float(hi[j])) + flashattn::bf16_to_float(lo[j]), e, 3.1e-5 * e) << j;
    }
    for (int64_t j = n; j < n_pad; ++j) ASSERT_EQ(lo[j], 0) << j;
    for (int64_t j = n_pad; j < n_pad + 8; ++j) ASSERT_EQ(lo[j], 0xFFFF) << j;
  }
}

// fp32 -> bf16 rounding (nearest even, as float_to_bf16 does) and the VNNI form.
TEST_P(CpuKernels, Bf16Rounding) {
  auto x = random_floats(100, 11);
  x[3] = std::numeric_limits<float>::infinity();
  x[4] = 1.00390625f;  // a tie: rounds to even
  std::vector<uint16_t> y(128, 0xFFFF);
  k().to_bf16(x.data(), y.data(), 100, 128);
  for (int j = 0; j < 100; ++j) ASSERT_EQ(y[j], flashattn::float_to_bf16(x[j])) << j;
  for (int j = 100; j < 128; ++j) ASSERT_EQ(y[j], 0) << j;
  // 5 valid rows of 32 columns, padded to 8 rows
  const auto t = random_floats(5 * 40, 12);
  std::vector<uint16_t> v(8 * 32, 0xFFFF);
  k().to_bf16_vnni(t.data(), 40, 5, 8, 32, v.data());
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 32; ++c)
      ASSERT_EQ(v[(c / 16) * 8 * 16 + (r / 2) * 32 + (c % 16) * 2 + r % 2],
                r < 5 ? flashattn::float_to_bf16(t[r * 40 + c]) : uint16_t{0})
          << r << "," << c;
}

// The decoding path's V tiles: the finite test on the bits, and bf16 rows moved
// into VNNI panels (zero past rows and columns) with the same test in one pass.
TEST_P(CpuKernels, FiniteTestAndBf16Vnni) {
  auto x = random_floats(7 * 40, 13);
  EXPECT_TRUE(k().finite_f32(x.data(), 40, 7, 37));
  x[5 * 40 + 36] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(k().finite_f32(x.data(), 40, 7, 37));
  EXPECT_TRUE(k().finite_f32(x.data(), 40, 5, 37));  // the NaN's row is past `rows`
  EXPECT_TRUE(k().finite_f32(x.data(), 40, 7, 36));  // ... and past `cols`
  x[2 * 40 + 3] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(k().finite_f32(x.data(), 40, 5, 37));
  // 7 rows of 37 columns (leading dimension 40) into 8 rows x 48 columns.
  std::vector<uint16_t> b(7 * 40);
  const auto f = random_floats(7 * 40, 14);
  for (size_t i = 0; i < b.size(); ++i) b[i] = flashattn::float_to_bf16(f[i]);
  b[6 * 40 + 38] = 0x7FC0;  // NaN outside the columns read
  std::vector<uint16_t> v(8 * 48, 0xFFFF);
  EXPECT_TRUE(k().bf16_vnni(b.data(), 40, 7, 8, 37, 48, v.data()));
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 48; ++c)
      ASSERT_EQ(v[(c / 16) * 8 * 16 + (r / 2) * 32 + (c % 16) * 2 + r % 2],
                r < 7 && c < 37 ? b[r * 40 + c] : uint16_t{0})
          << r << "," << c;
  b[3 * 40 + 20] = 0xFF80;  // -inf
  EXPECT_FALSE(k().bf16_vnni(b.data(), 40, 7, 8, 37, 48, v.data()));
}

// The bf16 backward's one-pass tile kernel against a double computation: P and
// dS within an ulp of bf16, exact zeros for masked scores, for a query with
// m = +inf and past n / rows; NaN propagates; fp32 write-back only with keep.
TEST_P(CpuKernels, BwdTileBf16) {
  if (k().bwd_tile_bf16 == nullptr) GTEST_SKIP() << "no one-pass backward tile at this level";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t ld = 72, rows = 37, rows_p = 64, n = 45, n_pad = 64;
  for (bool keep : {false, true}) {
    auto s = random_floats(rows_p * ld, 21), dp = random_floats(rows_p * ld, 22);
    auto m = random_floats(n_pad, 23), d = random_floats(n_pad, 24);
    for (float& v : m) v = std::abs(v) + 2.f;
    s[3 * ld + 7] = -inf;  // a masked score
    m[9] = inf;            // a query that saw no key
    m[11] = nan;           // a poisoned query: its masked scores still give 0
    s[5 * ld + 11] = -inf;
    s[6 * ld + 13] = nan;  // a poisoned score
    const auto s0 = s, dp0 = dp;
    const float scale = 0.6f, scale_ds = 0.125f;
    std::vector<uint16_t> pa(rows_p * ld, 0xFFFF), da(rows_p * ld, 0xFFFF), db(rows_p * n_pad, 0xFFFF);
    k().bwd_tile_bf16({s.data(), dp.data(), ld, rows, rows_p, n, n_pad, m.data(), d.data(), scale, scale_ds,
                       pa.data(), da.data(), db.data(), keep});
    for (int64_t j = 0; j < rows_p; ++j)
      for (int64_t i = 0; i < n_pad; ++i) {
        const uint16_t vnni = db[(i / 16) * rows_p * 16 + (j / 2) * 32 + (i % 16) * 2 + j % 2];
        if (j >= rows || i >= n) {
          ASSERT_EQ(vnni, 0) << j << "," << i;
          if (j < rows) ASSERT_EQ(pa[j * ld + i], 0) << j << "," << i;
          if (j < rows) ASSERT_EQ(da[j * ld + i], 0) << j << "," << i;
          continue;
        }
        const double x = s0[j * ld + i];
        const double pe = x == -inf ? 0.0 : std::exp(x * scale - double(m[i]));
        const double dse = pe == 0.0 ? 0.0 : pe * (double(dp0[j * ld + i]) - d[i]) * scale_ds;
        const float pg = flashattn::bf16_to_float(pa[j * ld + i]), dg = flashattn::bf16_to_float(da[j * ld + i]);
        if (std::isnan(pe)) {
          ASSERT_TRUE(std::isnan(pg) && std::isnan(dg)) << j << "," << i;
        } else {
          ASSERT_NEAR(pg, pe, 8e-3 * pe) << j << "," << i;
          ASSERT_NEAR(dg, dse, 8e-3 * std::abs(dse) + 1e-30) << j << "," << i;
          if (pe == 0.0) ASSERT_EQ(pa[j * ld + i] | da[j * ld + i], 0) << j << "," << i;
        }
        ASSERT_EQ(vnni, da[j * ld + i]) << j << "," << i;
        if (keep) {
          ASSERT_EQ(flashattn::float_to_bf16(s[j * ld + i]), pa[j * ld + i]) << j << "," << i;
          ASSERT_EQ(flashattn::float_to_bf16(dp[j * ld + i]), da[j * ld + i]) << j << "," << i;
        }
      }
    if (!keep) {
      EXPECT_EQ(std::memcmp(s.data(), s0.data(), s.size() * 4), 0);
      EXPECT_EQ(std::memcmp(dp.data(), dp0.data(), dp.size() * 4), 0);
    }
  }
  // A negative scale turns a -inf score (an inf input) into +inf: P is inf, as
  // in fp32, not the 0 of a masked score.
  std::vector<float> s(32 * 32, 0.5f), dp(32 * 32, 0.25f), m(32, 1.f), d(32, 0.f);
  s[0] = -inf;
  std::vector<uint16_t> pa(32 * 32), da(32 * 32), db(32 * 32);
  k().bwd_tile_bf16({s.data(), dp.data(), 32, 32, 32, 32, 32, m.data(), d.data(), -1.f, 0.125f, pa.data(), da.data(),
                     db.data(), false});
  EXPECT_EQ(pa[0], 0x7F80);  // +inf
  EXPECT_TRUE(std::isinf(flashattn::bf16_to_float(da[0])));
}

// The split of fp32 probabilities into bf16 hi + lo: hi the nearest bf16, lo
// the nearest bf16 of the rest, lo = 0 for inf and NaN, zeros up to n_pad.
TEST_P(CpuKernels, Bf16Split) {
  if (k().to_bf16_split == nullptr) GTEST_SKIP() << "no bf16 split at this level";
  auto x = random_floats(100, 31);
  x[3] = std::numeric_limits<float>::infinity();
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[7] = 1.00390625f;  // a tie: hi rounds to even, lo keeps the rest exactly
  x[9] = 0.f;
  x[11] = 3.4e38f;  // finite, but hi rounds up to inf: lo must be 0, not -inf
  std::vector<uint16_t> hi(136, 0xFFFF), lo(136, 0xFFFF);
  k().to_bf16_split(x.data(), hi.data(), lo.data(), 100, 128);
  for (int j = 0; j < 100; ++j) {
    ASSERT_EQ(hi[j], flashattn::float_to_bf16(x[j])) << j;
    const float h = flashattn::bf16_to_float(hi[j]);
    const uint16_t want = std::isfinite(h) ? flashattn::float_to_bf16(x[j] - h) : uint16_t{0};
    ASSERT_EQ(lo[j], want) << j;
    if (std::isfinite(h)) ASSERT_LE(std::abs(double(h) + flashattn::bf16_to_float(lo[j]) - x[j]), 1e-5 * std::abs(x[j]));
  }
  EXPECT_EQ(flashattn::bf16_to_float(lo[7]), 1.00390625f - 1.f);
  for (int j = 100; j < 128; ++j) ASSERT_EQ(hi[j] | lo[j], 0) << j;
  for (int j = 128; j < 136; ++j) ASSERT_EQ(hi[j] & lo[j], 0xFFFF) << j;
}

// 16-bit tiles widened exactly (subnormals, -0, inf, NaN) with the finite test:
// a strided 5 x 19 tile (an inf past the columns read), -inf and NaN inside it,
// then every 16-bit value as 16 rows of 4096 (a NaN stays NaN; vcvtph2ps quiets
// signalling ones).
using Widen = bool (*)(const uint16_t*, int64_t, int64_t, int64_t, float*, int64_t);
void check_widening(Widen widen, float (*to_float)(uint16_t), uint16_t (*from_float)(float), uint16_t inf) {
  std::vector<uint16_t> h(5 * 24);
  const auto f = random_floats(h.size(), 15);
  for (size_t i = 0; i < h.size(); ++i) h[i] = from_float(f[i]);
  h[0] = 0x0001;  // the smallest subnormal
  h[1] = 0x8000;  // -0
  h[23] = inf;    // past the columns read
  std::vector<float> y(5 * 20, -1.f);
  EXPECT_TRUE(widen(h.data(), 24, 5, 19, y.data(), 20));
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 20; ++c) {
      const float want = c < 19 ? to_float(h[r * 24 + c]) : -1.f;
      ASSERT_EQ(std::memcmp(&y[r * 20 + c], &want, 4), 0) << r << "," << c;
    }
  h[2 * 24 + 5] = inf | 0x8000;  // -inf
  EXPECT_FALSE(widen(h.data(), 24, 5, 19, y.data(), 20));
  EXPECT_EQ(y[2 * 20 + 5], -std::numeric_limits<float>::infinity());
  h[2 * 24 + 5] = 0;
  h[4 * 24 + 18] = inf | 1;  // NaN
  EXPECT_FALSE(widen(h.data(), 24, 5, 19, y.data(), 20));
  EXPECT_TRUE(std::isnan(y[4 * 20 + 18]));
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(all.size());
  EXPECT_FALSE(widen(all.data(), 4096, 16, 4096, wide.data(), 4096));
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = to_float(all[i]);
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(wide[i])) << std::hex << i;
    else ASSERT_EQ(std::memcmp(&wide[i], &want, 4), 0) << std::hex << i;
  }
}

TEST_P(CpuKernels, F16Widening) {
  check_widening(k().f16_to_f32, flashattn::fp16_to_float, flashattn::float_to_fp16, 0x7C00);
}

TEST_P(CpuKernels, Bf16Widening) {
  check_widening(k().bf16_to_f32, flashattn::bf16_to_float, flashattn::float_to_bf16, 0x7F80);
}

INSTANTIATE_TEST_SUITE_P(Levels, CpuKernels, ::testing::ValuesIn(kLevels), level_name);

// The whole backend on one level: every case of the table, forward and backward.
std::vector<Case> level_cases() {
  return in_dtypes({
      Case("d64_odd").batch(2).seq(130, 77).heads(2, 2).dims(64, 64),
      Case("d96_causal").seq(150, 150).heads(2, 1).dims(96, 96).causal_mask(),
      Case("d128_window").seq(200, 190).heads(2, 2).dims(128, 128).win(40, 7),
      Case("d256_gqa").seq(70, 129).heads(4, 2).dims(256, 256),
      Case("dv_ne_dqk").seq(65, 97).heads(3, 1).dims(48, 80).causal_mask(),
      Case("odd_dims").seq(33, 45).heads(2, 2).dims(17, 9),
      Case("varlen_causal").packed({70, 0, 129, 5}, {64, 3, 140, 65}).heads(4, 2).dims(64, 64).causal_mask(),
      Case("dropout").seq(100, 130).heads(2, 2).dims(64, 32).drop(0.2f, 7, 3),
      Case("softcap_alibi").seq(90, 140).heads(2, 1).dims(64, 64).cap(5.f).slopes(Alibi::per_head),
      Case("large_scores").seq(70, 70).dims(64, 64).magnitude(30.f).causal_mask(),
      // Decoding shapes (decode.cpp: at most 64 query rows per kv head; keys in
      // splits of 256-1024 merged at the end).
      Case("decode_gqa_splits").seq(1, 2500).heads(8, 2).dims(128, 128).causal_mask(),
      Case("decode_rows16").seq(16, 1100).heads(2, 2).dims(64, 64).causal_mask(),
      Case("decode_gqa_rows64").seq(16, 1300).heads(8, 2).dims(64, 64).causal_mask(),
      Case("decode_window_dv").seq(3, 2100).heads(4, 1).dims(64, 32).win(700, 0),
      Case("decode_softcap_alibi").seq(2, 300).heads(4, 2).dims(64, 64).cap(5.f).slopes(Alibi::per_head),
      Case("decode_odd_dims").seq(1, 77).heads(3, 1).dims(17, 9),
      Case("decode_varlen").packed({1, 0, 3, 2}, {1500, 5, 0, 2049}).heads(4, 2).dims(64, 64).causal_mask(),
      Case("decode_rows_without_keys").seq(5, 3).heads(2, 1).dims(32, 32).causal_mask(),
      Case("decode_dropout_splits").seq(4, 1500).heads(4, 2).dims(64, 32).drop(0.2f, 7, 3),
  });
}

class CpuLevel : public ::testing::TestWithParam<std::tuple<Isa, Case>> {
 protected:
  void SetUp() override {
    if (!have(std::get<0>(GetParam()))) GTEST_SKIP() << cpu::isa_name(std::get<0>(GetParam())) << " not on this CPU";
    cpu::force_isa(std::get<0>(GetParam()));
  }
  void TearDown() override { cpu::reset_forced_isa(); }
};

TEST_P(CpuLevel, ForwardMatchesReference) { check_forward(std::get<1>(GetParam()), cpu_target()); }
TEST_P(CpuLevel, BackwardMatchesReference) { check_backward(std::get<1>(GetParam()), cpu_target()); }

// fp16 on the bf16 products (isa.h, f16_split) at every level that has them,
// whether or not it is the level's default; and fp16 widened to fp32 there.
TEST_P(CpuLevel, F16SplitAndWidened) {
  const Case& c = std::get<1>(GetParam());
  if (c.dtype != DType::f16) GTEST_SKIP() << "fp16 cases only";
  if (!cpu::f16_split(std::get<0>(GetParam()), /*backward=*/false)) {
    cpu::force_f16_split(1);
    const bool has_split = cpu::f16_split(std::get<0>(GetParam()), /*backward=*/false);
    cpu::force_f16_split(-1);
    if (!has_split) GTEST_SKIP() << "no bf16 products at this level";
  }
  for (int mode : {1, 0}) {
    SCOPED_TRACE(mode ? "split" : "fp32");
    cpu::force_f16_split(mode);
    check_forward(c, cpu_target());
    check_backward(c, cpu_target());
  }
  cpu::force_f16_split(-1);
}

INSTANTIATE_TEST_SUITE_P(
    Levels, CpuLevel, ::testing::Combine(::testing::ValuesIn(kLevels), ::testing::ValuesIn(level_cases())),
    [](const ::testing::TestParamInfo<std::tuple<Isa, Case>>& info) {
      return std::string(cpu::isa_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param).id();
    });

}  // namespace
}  // namespace fatest
