// Backward (dq, dk, dv) against the float64 reference with the contract's rule
// for gradients, for the same cases as the forward: fp32 at 1e-4 relative,
// fp16/bf16 at twice the error of a naive low-precision backward. The runner
// also checks zero gradients for fully masked rows and for keys no query sees.
#include "cases.h"

namespace fatest {
namespace {

class Backward : public ::testing::TestWithParam<CaseParam> {};

TEST_P(Backward, MatchesReference) { check_backward(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Features, Backward, ::testing::ValuesIn(on_cpu(feature_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Lengths, Backward, ::testing::ValuesIn(on_cpu(length_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Special, Backward, ::testing::ValuesIn(on_cpu(special_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Automatic, Backward, ::testing::ValuesIn(on_auto(smoke_cases())), CaseParamName());

// dk/dv of a kv head sum over its query-head group: GQA with every query head a
// copy of one head equals 'group' times the MHA gradient of that head.
TEST(BackwardGqa, GroupSumMatchesRepeatedHeads) {
  Case mha = Case("gqa_sum_mha").seq(21, 30).heads(1, 1);
  Case gqa = Case("gqa_sum_gqa").seq(21, 30).heads(3, 1);
  const Problem pm = make_problem(mha);
  Problem pg = make_problem(gqa);
  // Copy q and dout of the single head into the three query heads.
  for (int64_t i = 0; i < 21; ++i)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t x = 0; x < 16; ++x) {
        pg.q.set((i * 3 + h) * 16 + x, pm.q.get(i * 16 + x));
        pg.dout.set((i * 3 + h) * 16 + x, pm.dout.get(i * 16 + x));
      }
  pg.k = pm.k;
  pg.v = pm.v;
  for (const Target& t : {cpu_target(), reference_target()}) {
    const FwdResult fm = run_forward(pm, t), fg = run_forward(pg, t);
    const BwdResult gm = run_backward(pm, t, fm), gg = run_backward(pg, t, fg);
    std::vector<double> dk3 = gm.dk.values(), dv3 = gm.dv.values();
    for (double& x : dk3) x *= 3.0;
    for (double& x : dv3) x *= 3.0;
    EXPECT_TRUE(close(t.name + " dk", gg.dk.values(), dk3, 1e-5 * std::max(1.0, max_abs(dk3))));
    EXPECT_TRUE(close(t.name + " dv", gg.dv.values(), dv3, 1e-5 * std::max(1.0, max_abs(dv3))));
  }
}

}  // namespace
}  // namespace fatest
