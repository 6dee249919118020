// Gradients checked two ways on tiny fp32 problems:
//  1. the reference backend's gradients against central finite differences of
//     the reference forward, L = sum(out * dout) (the reference rounds out to
//     fp32, so the step is 2^-7 and the tolerance 5e-4 relative: a wrong term,
//     a missing softcap derivative or scale, is off by far more);
//  2. the CPU backend's gradients against the reference's (the fp32 rule).
// Dropout is included: for a fixed seed the mask does not depend on the inputs.
#include "cases.h"

namespace fatest {
namespace {

std::vector<Case> gradcheck_cases() {
  return {
      Case("fd_plain").seq(3, 5).heads(2, 2).dims(4, 3),
      Case("fd_causal_sq_gt_sk").batch(2).seq(6, 4).heads(2, 1).dims(4, 4).causal_mask(),
      Case("fd_window").seq(6, 6).dims(3, 2).win(1, 2),
      Case("fd_one_sided_window").seq(5, 7).dims(3, 3).win(-1, 1),
      Case("fd_softcap").seq(4, 5).heads(2, 1).dims(4, 3).cap(1.5f).magnitude(2.f),
      Case("fd_alibi").batch(2).seq(4, 6).heads(2, 2).dims(3, 3).slopes(Alibi::per_batch_head),
      Case("fd_gqa_dv").seq(4, 5).heads(4, 2).dims(2, 5).causal_mask(),
      Case("fd_dropout").seq(5, 6).heads(2, 1).dims(3, 4).drop(0.3f, 42, 7),
      Case("fd_scale").seq(4, 4).dims(3, 3).scale(0.9f),
      Case("fd_packed").packed({3, 0, 4}, {2, 3, 5}).heads(2, 1).dims(3, 2).causal_mask().cap(2.f)
          .slopes(Alibi::per_head).drop(0.2f),
  };
}

double loss(const Problem& p) {
  RunOpts one_thread;  // hundreds of tiny calls: no thread team to wake each time
  one_thread.num_threads = 1;
  const FwdResult f = run_forward(p, reference_target(), one_thread);
  const std::vector<double> o = f.out.values(), d = p.dout.values();
  double l = 0.0;
  for (size_t e = 0; e < o.size(); ++e) l += o[e] * d[e];
  return l;
}

// Central differences of the loss w.r.t. every element of one input.
std::vector<double> finite_differences(Problem p, HostTensor Problem::*input) {
  const double h = std::ldexp(1.0, -7);
  HostTensor& t = p.*input;
  std::vector<double> g(static_cast<size_t>(t.numel()));
  for (int64_t e = 0; e < t.numel(); ++e) {
    const double x = t.get(e);
    t.set(e, x + h);
    const double xp = t.get(e);
    const double lp = loss(p);
    t.set(e, x - h);
    const double xm = t.get(e);
    const double lm = loss(p);
    t.set(e, x);
    g[e] = (lp - lm) / (xp - xm);
  }
  return g;
}

class GradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradCheck, ReferenceMatchesFiniteDifferences) {
  const Case& c = GetParam();
  SCOPED_TRACE(c.describe());
  const Problem p = make_problem(c);
  const FwdResult f = run_forward(p, reference_target());
  const BwdResult g = run_backward(p, reference_target(), f);
  struct In { const char* name; HostTensor Problem::*input; const HostTensor& grad; };
  for (const In& in : {In{"dq", &Problem::q, g.dq}, In{"dk", &Problem::k, g.dk}, In{"dv", &Problem::v, g.dv}}) {
    const std::vector<double> fd = finite_differences(p, in.input), an = in.grad.values();
    EXPECT_TRUE(close(std::string(in.name) + " vs finite differences", an, fd, 5e-4 * std::max(1.0, max_abs(fd))));
  }
}

TEST_P(GradCheck, CpuMatchesReference) {
  const Case& c = GetParam();
  SCOPED_TRACE(c.describe());
  const Problem p = make_problem(c);
  const Naive exact = naive_attention(p, std::nullopt, true);
  const FwdResult fr = run_forward(p, reference_target()), fc = run_forward(p, cpu_target());
  const BwdResult gr = run_backward(p, reference_target(), fr), gc = run_backward(p, cpu_target(), fc);
  EXPECT_TRUE(close("dq", gc.dq.values(), gr.dq.values(), fp32_bound(gr.dq.values(), exact.max_s, true)));
  EXPECT_TRUE(close("dk", gc.dk.values(), gr.dk.values(), fp32_bound(gr.dk.values(), exact.max_s, true)));
  EXPECT_TRUE(close("dv", gc.dv.values(), gr.dv.values(), fp32_bound(gr.dv.values(), exact.max_s, true)));
}

// The check itself has teeth: a gradient scaled by 1.01 fails it.
TEST(GradCheckSelfTest, DetectsAOnePercentError) {
  const Problem p = make_problem(gradcheck_cases()[0]);
  const FwdResult f = run_forward(p, reference_target());
  std::vector<double> dq = run_backward(p, reference_target(), f).dq.values();
  for (double& x : dq) x *= 1.01;
  const std::vector<double> fd = finite_differences(p, &Problem::q);
  EXPECT_FALSE(close("dq * 1.01", dq, fd, 5e-4 * std::max(1.0, max_abs(fd))));
}

INSTANTIATE_TEST_SUITE_P(Tiny, GradCheck, ::testing::ValuesIn(gradcheck_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
}  // namespace fatest
