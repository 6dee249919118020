// Forward against the float64 reference, with the contract's accuracy rule, for
// every feature and combination, odd lengths and special inputs, in fp32, fp16
// and bf16. The structural promises (fully masked rows, no NaN, nothing written
// outside the views, inputs untouched) are checked in the same runner.
#include "cases.h"

namespace fatest {
namespace {

class Forward : public ::testing::TestWithParam<CaseParam> {};

TEST_P(Forward, MatchesReference) { check_forward(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Features, Forward, ::testing::ValuesIn(on_cpu(feature_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Lengths, Forward, ::testing::ValuesIn(on_cpu(length_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Special, Forward, ::testing::ValuesIn(on_cpu(special_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Automatic, Forward, ::testing::ValuesIn(on_auto(smoke_cases())), CaseParamName());

// The LSE output is optional; without it out is unchanged, bit for bit.
TEST(ForwardLse, OptionalAndDoesNotChangeOut) {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const Problem p = make_problem(Case("lse_optional").batch(2).seq(37, 50).heads(2, 1).causal_mask().type(t));
    RunOpts no_lse;
    no_lse.with_lse = false;
    const FwdResult with = run_forward(p, cpu_target());
    const FwdResult without = run_forward(p, cpu_target(), no_lse);
    EXPECT_TRUE(bitwise_equal(with.out, without.out)) << short_name(t);
    // The untouched lse buffer is still all fill.
    const std::vector<double> l = without.lse.values();
    EXPECT_TRUE(std::all_of(l.begin(), l.end(), [](double x) { return std::isnan(x); }));
  }
}

// lse is the natural-log log-sum-exp of the final logits: check it by hand on a
// tiny case (one query, two keys) where it has a closed form.
TEST(ForwardLse, ClosedForm) {
  Case c = Case("lse_closed_form").seq(1, 2).dims(1, 1).scale(1.f);
  Problem p = make_problem(c);
  p.q.set(0, 2.0);
  p.k.set(0, 0.5);
  p.k.set(1, -1.0);
  p.v.set(0, 3.0);
  p.v.set(1, -5.0);
  for (const Target& t : {cpu_target(), reference_target()}) {
    const FwdResult f = run_forward(p, t);
    const double s0 = 1.0, s1 = -2.0;
    const double lse = std::log(std::exp(s0) + std::exp(s1));
    const double p0 = std::exp(s0 - lse), p1 = std::exp(s1 - lse);
    EXPECT_NEAR(f.lse.get(0), lse, 1e-6) << t.name;
    EXPECT_NEAR(f.out.get(0), 3.0 * p0 - 5.0 * p1, 1e-6) << t.name;
  }
}

// A single visible key: out is exactly that key's value row, lse exactly its score.
TEST(ForwardExact, SingleKeyCopiesValue) {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const Problem p = make_problem(Case("single_key").batch(2).seq(9, 9).heads(2, 1).win(0, 0).type(t));
    for (const Target& tg : {cpu_target(), reference_target()}) {
      const FwdResult f = run_forward(p, tg);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < 9; ++i)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t x = 0; x < 16; ++x)
              ASSERT_EQ(f.out.get(((b * 9 + i) * 2 + h) * 16 + x), p.v.get(((b * 9 + i) * 1 + 0) * 16 + x))
                  << tg.name << " " << short_name(t);
    }
  }
}

}  // namespace
}  // namespace fatest
