// Non-contiguous tensors: a [B, H, N, D] buffer viewed as [B, N, H, D], padded
// row/head/batch strides (gaps hold NaN, so reading one shows), inputs
// broadcast with stride 0, and outputs whose gaps must stay untouched.
#include "cases.h"

namespace fatest {
namespace {

class StridedForward : public ::testing::TestWithParam<CaseParam> {};
class StridedBackward : public ::testing::TestWithParam<CaseParam> {};
TEST_P(StridedForward, MatchesReference) { check_forward(std::get<0>(GetParam()), std::get<1>(GetParam())); }
TEST_P(StridedBackward, MatchesReference) { check_backward(std::get<0>(GetParam()), std::get<1>(GetParam())); }
INSTANTIATE_TEST_SUITE_P(Layouts, StridedForward, ::testing::ValuesIn(on_cpu(layout_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Layouts, StridedBackward, ::testing::ValuesIn(on_cpu(layout_cases())), CaseParamName());

Problem relayout(const Problem& p, Layout l) {
  Problem r = p;
  r.c.layout = l;
  r.c.out_layout = l;
  for (auto [dst, src] : {std::pair{&r.q, &p.q}, {&r.k, &p.k}, {&r.v, &p.v}, {&r.dout, &p.dout}}) {
    *dst = make_tensor(src->dtype, src->shape, l);
    dst->set_values(src->values());
  }
  return r;
}

// The CPU backend gives the same bits whatever the layout of the same values.
TEST(StridedConsistency, LayoutDoesNotChangeResults) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const Case& c : {Case("layout_batched").batch(2).seq(45, 70).heads(4, 2).dims(16, 8).causal_mask().type(dt),
                          Case("layout_packed").packed({30, 0, 41}, {12, 9, 70}).heads(2, 1).win(10, 2).type(dt)}) {
      const Problem base = make_problem(c);
      const FwdResult f0 = run_forward(base, cpu_target());
      const BwdResult g0 = run_backward(base, cpu_target(), f0);
      for (Layout l : {Layout::transposed, Layout::padded}) {
        const Problem p = relayout(base, l);
        const FwdResult f = run_forward(p, cpu_target());
        const BwdResult g = run_backward(p, cpu_target(), f);
        SCOPED_TRACE(c.id() + " " + layout_name(l));
        EXPECT_EQ(f.out.values(), f0.out.values());
        EXPECT_EQ(f.lse.values(), f0.lse.values());
        EXPECT_EQ(g.dq.values(), g0.dq.values());
        EXPECT_EQ(g.dk.values(), g0.dk.values());
        EXPECT_EQ(g.dv.values(), g0.dv.values());
      }
    }
  }
}

// Inputs may alias: k and v shared by the whole batch through a batch stride of
// 0, q shared by every head through a head stride of 0.
TEST(StridedInputs, BroadcastWithStrideZero) {
  const int64_t B = 3, S = 20, H = 2, D = 8;
  const Problem p = make_problem(Case("broadcast").batch(B).seq(S, S).heads(H, H).dims(D, D).causal_mask());
  // Materialised inputs: batch b of k/v is batch 0; every head of q is head 0.
  Problem m = p;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t x = 0; x < D; ++x) {
          const int64_t e = ((b * S + i) * H + h) * D + x, e0 = ((0 * S + i) * H + h) * D + x;
          m.k.set(e, p.k.get(e0));
          m.v.set(e, p.v.get(e0));
          m.q.set(e, p.q.get(((b * S + i) * H + 0) * D + x));
        }
  const FwdResult want = run_forward(m, cpu_target());
  HostTensor q = p.q, k = p.k, v = p.v;
  fa::TensorView Q = q.view(), K = k.view(), V = v.view();
  K.stride[0] = 0;
  V.stride[0] = 0;
  Q.stride[2] = 0;
  for (const Target& t : {cpu_target(), reference_target()}) {
    HostTensor out = make_tensor(DType::f32, {B, S, H, D});
    fa::Options o;
    o.causal = true;
    o.backend = t.backend;
    fa::forward(Q, K, V, out.view(), nullptr, o);
    EXPECT_TRUE(close(t.name + " out", out.values(), want.out.values(), 1e-6)) << t.name;
  }
}

// Outputs with gaps: nothing is written between rows, heads or batches, nor
// before or after the view (checked for every layout case by the runner; here
// for an lse with padded strides and a transposed out together).
TEST(StridedOutputs, MixedOutputLayouts) {
  const Problem p = make_problem(Case("mixed_outputs").batch(2).seq(33, 20).heads(2, 1).causal_mask());
  HostTensor out = make_tensor(DType::f32, p.out_shape(), Layout::transposed);
  HostTensor lse = make_tensor(DType::f32, p.lse_shape(), Layout::padded);
  fa::Options o;
  o.causal = true;
  const fa::TensorView lv = lse.view();
  fa::forward(p.q.view(), p.k.view(), p.v.view(), out.view(), &lv, o);
  const FwdResult want = run_forward(p, cpu_target());
  EXPECT_EQ(out.values(), want.out.values());
  EXPECT_EQ(lse.values(), want.lse.values());
  EXPECT_TRUE(out.gaps_intact());
  EXPECT_TRUE(lse.gaps_intact());
}

}  // namespace
}  // namespace fatest
