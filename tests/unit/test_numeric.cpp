// flashattn/numeric.h (fp16/bf16 conversions) against an independent rounding
// written with frexp/ldexp/nearbyint, plus the small vocabulary functions of the
// API (dtype sizes, names, backend parsing and resolution, TensorView).
#include <cfenv>
#include <cstring>
#include <random>

#include "harness.h"

namespace fatest {
namespace {

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even of a finite float to a format with `mant` explicit
// mantissa bits, minimum normal exponent `emin` and largest finite `maxval`.
double round_format(double x, int mant, int emin, double maxval) {
  if (x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // |x| = m * 2^e, m in [0.5, 1)
  const int exp = std::max(e - 1, emin);
  const double ulp = std::ldexp(1.0, exp - mant);
  const double r = std::nearbyint(x / ulp) * ulp;  // default rounding mode: ties to even
  if (std::fabs(r) > maxval) return std::copysign(kInf, x);
  return r;
}

double fp16_expected(float f) { return round_format(f, 10, -14, 65504.0); }
double bf16_expected(float f) {
  return round_format(f, 7, -126, std::ldexp(255.0, 120));  // (2 - 2^-7) * 2^127
}

TEST(Numeric, Fp16KnownValues) {
  EXPECT_EQ(fa::float_to_fp16(1.f), 0x3C00);
  EXPECT_EQ(fa::float_to_fp16(-2.f), 0xC000);
  EXPECT_EQ(fa::float_to_fp16(0.f), 0x0000);
  EXPECT_EQ(fa::float_to_fp16(-0.f), 0x8000);
  EXPECT_EQ(fa::float_to_fp16(65504.f), 0x7BFF);
  EXPECT_EQ(fa::float_to_fp16(65519.f), 0x7BFF);  // below the rounding midpoint
  EXPECT_EQ(fa::float_to_fp16(65520.f), 0x7C00);  // midpoint rounds to even: inf
  EXPECT_EQ(fa::float_to_fp16(1e6f), 0x7C00);
  EXPECT_EQ(fa::float_to_fp16(-1e6f), 0xFC00);
  EXPECT_EQ(fa::float_to_fp16(std::ldexp(1.f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fa::float_to_fp16(std::ldexp(1.f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fa::float_to_fp16(std::ldexp(1.f, -25)), 0x0000);  // tie: to even (0)
  EXPECT_EQ(fa::float_to_fp16(std::ldexp(3.f, -26)), 0x0001);  // 0.75 ulp: up
  EXPECT_EQ(fa::float_to_fp16(std::ldexp(3.f, -25)), 0x0002);  // 1.5 ulp tie: to even (2)
  EXPECT_EQ(fa::float_to_fp16(1.f + std::ldexp(1.f, -11)), 0x3C00);      // tie: even
  EXPECT_EQ(fa::float_to_fp16(1.f + std::ldexp(3.f, -11)), 0x3C02);      // tie: even
  EXPECT_EQ(fa::float_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(fa::fp16_to_float(0x3C00), 1.f);
  EXPECT_EQ(fa::fp16_to_float(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(fa::fp16_to_float(0x03FF), std::ldexp(1023.f, -24));
  EXPECT_EQ(fa::fp16_to_float(0x7BFF), 65504.f);
  EXPECT_TRUE(std::isinf(fa::fp16_to_float(0x7C00)));
  EXPECT_TRUE(std::isnan(fa::fp16_to_float(0x7E00)));
  EXPECT_TRUE(std::signbit(fa::fp16_to_float(0x8000)));
}

TEST(Numeric, Fp16NanStaysNan) {
  for (uint32_t u : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7F802000u}) {
    const uint16_t h = fa::float_to_fp16(bits_to_float(u));
    EXPECT_EQ(h & 0x7C00, 0x7C00) << std::hex << u;
    EXPECT_NE(h & 0x03FF, 0) << std::hex << u;  // NaN, not infinity
  }
}

TEST(Numeric, Fp16AllBitPatternsRoundTrip) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = fa::fp16_to_float(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(f)) << h;
      continue;
    }
    ASSERT_EQ(fa::float_to_fp16(f), h) << std::hex << h;
    if ((h & 0x7C00) != 0x7C00) {
      ASSERT_EQ(static_cast<double>(f), fp16_expected(f)) << h;
    }
  }
}

TEST(Numeric, Fp16MatchesIndependentRounding) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int n = 0; n < 400000; ++n) {
    uint32_t u = bits(rng);
    // Concentrate on the exponents fp16 can represent (and a little beyond).
    const uint32_t exp = 127 - 28 + (u % 46);
    u = (u & 0x807FFFFFu) | (exp << 23);
    const float f = bits_to_float(u);
    const double want = fp16_expected(f);
    const float got = fa::fp16_to_float(fa::float_to_fp16(f));
    ASSERT_EQ(static_cast<double>(got), want) << std::hexfloat << f;
    ++checked;
  }
  // Every rounding midpoint in the normal and subnormal ranges.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const double lo = fa::fp16_to_float(static_cast<uint16_t>(h));
    const double hi = fa::fp16_to_float(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact in float
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(fa::float_to_fp16(mid), even) << h;
    ASSERT_EQ(fa::float_to_fp16(-mid), even | 0x8000) << h;
  }
  EXPECT_GT(checked, 0);
}

TEST(Numeric, Bf16KnownValues) {
  EXPECT_EQ(fa::float_to_bf16(1.f), 0x3F80);
  EXPECT_EQ(fa::float_to_bf16(-2.f), 0xC000);
  EXPECT_EQ(fa::float_to_bf16(-0.f), 0x8000);
  EXPECT_EQ(fa::float_to_bf16(1.f + std::ldexp(1.f, -8)), 0x3F80);  // tie: even
  EXPECT_EQ(fa::float_to_bf16(1.f + std::ldexp(3.f, -8)), 0x3F82);  // tie: even
  EXPECT_EQ(fa::float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(fa::float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(fa::bf16_to_float(0x3F80), 1.f);
  EXPECT_EQ(fa::bf16_to_float(0x0001), std::ldexp(1.f, -133));
}

TEST(Numeric, Bf16NanStaysNan) {
  // Includes NaNs whose payload lives only in the low 16 bits: they must not
  // truncate to infinity.
  for (uint32_t u : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7F80FFFFu}) {
    const uint16_t h = fa::float_to_bf16(bits_to_float(u));
    EXPECT_TRUE(std::isnan(fa::bf16_to_float(h))) << std::hex << u;
  }
}

TEST(Numeric, Bf16AllBitPatternsRoundTrip) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = fa::bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fa::float_to_bf16(f), h) << std::hex << h;
  }
}

TEST(Numeric, Bf16MatchesIndependentRounding) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int n = 0; n < 400000; ++n) {
    const float f = bits_to_float(bits(rng));
    if (!std::isfinite(f)) continue;
    const double want = bf16_expected(f);
    const float got = fa::bf16_to_float(fa::float_to_bf16(f));
    ASSERT_EQ(static_cast<double>(got), want) << std::hexfloat << f;
  }
}

TEST(Numeric, HarnessRoundingAgrees) {
  EXPECT_EQ(round_to(DType::f16, 1.0 + 1e-4), 1.0);
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 1e-3), 1.0);
  EXPECT_EQ(round_to(DType::f32, 1.0 + 1e-9), 1.0);
  EXPECT_EQ(unit_roundoff(DType::f16), std::ldexp(1.0, -11));
}

TEST(Vocabulary, DtypeSizesAndNames) {
  EXPECT_EQ(fa::dtype_size(DType::f32), 4);
  EXPECT_EQ(fa::dtype_size(DType::f16), 2);
  EXPECT_EQ(fa::dtype_size(DType::bf16), 2);
  EXPECT_EQ(fa::dtype_size(DType::i32), 4);
  EXPECT_STREQ(fa::to_string(DType::f32), "float32");
  EXPECT_STREQ(fa::to_string(DType::f16), "float16");
  EXPECT_STREQ(fa::to_string(DType::bf16), "bfloat16");
  EXPECT_STREQ(fa::to_string(DType::i32), "int32");
  for (fa::Backend b : {fa::Backend::automatic, fa::Backend::reference, fa::Backend::cpu, fa::Backend::cuda})
    EXPECT_EQ(fa::backend_from_string(fa::to_string(b)), b);
}

TEST(Vocabulary, ResolveBackend) {
  const fa::Device host{}, gpu{fa::DeviceType::cuda, 0};
  EXPECT_EQ(fa::resolve_backend(fa::Backend::automatic, host), fa::Backend::cpu);
  EXPECT_EQ(fa::resolve_backend(fa::Backend::automatic, gpu), fa::Backend::cuda);
  EXPECT_EQ(fa::resolve_backend(fa::Backend::reference, host), fa::Backend::reference);
  EXPECT_EQ(fa::resolve_backend(fa::Backend::cpu, gpu), fa::Backend::cpu);
}

TEST(Vocabulary, Version) {
  const std::string v = std::to_string(FLASHATTN_VERSION_MAJOR) + "." +
                        std::to_string(FLASHATTN_VERSION_MINOR) + "." +
                        std::to_string(FLASHATTN_VERSION_PATCH);
  EXPECT_EQ(v, fa::version());
}

TEST(Vocabulary, TensorViewContiguous) {
  float x[24];
  const fa::TensorView t = fa::TensorView::contiguous(x, DType::f32, {2, 3, 4});
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.stride[0], 12);
  EXPECT_EQ(t.stride[1], 4);
  EXPECT_EQ(t.stride[2], 1);
  EXPECT_TRUE(t.defined());
  EXPECT_FALSE(fa::TensorView{}.defined());
  const fa::TensorView e = fa::TensorView::contiguous(nullptr, DType::f16, {0, 5});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_TRUE(e.defined());
}

// The harness's layouts: transposed and padded views address the same logical
// elements as the contiguous one, and every gap holds the fill value.
TEST(Harness, LayoutsHoldTheSameValues) {
  for (Layout l : {Layout::contiguous, Layout::transposed, Layout::padded}) {
    HostTensor t = make_tensor(DType::f32, {2, 3, 4, 5}, l);
    std::vector<double> x(120);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
    t.set_values(x);
    EXPECT_EQ(t.values(), x) << layout_name(l);
    EXPECT_TRUE(t.gaps_intact()) << layout_name(l);
    EXPECT_EQ(t.stride[3], 1) << layout_name(l);
  }
  const HostTensor tr = make_tensor(DType::f32, {2, 3, 4, 5}, Layout::transposed);
  EXPECT_EQ(tr.stride[1], 5);       // rows of one head are adjacent: a [B, H, S, D] buffer
  EXPECT_EQ(tr.stride[2], 15);
  HostTensor pad = make_tensor(DType::f16, {3, 4}, Layout::padded);
  pad.buf[0] ^= 0xFF;  // a write into the leading guard is noticed
  EXPECT_FALSE(pad.gaps_intact());
}

}  // namespace
}  // namespace fatest
