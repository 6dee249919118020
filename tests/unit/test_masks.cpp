// The mask of the contract: causal, window (left, right) with -1 unbounded,
// one-sided windows, causal and window together, bottom-right alignment when
// Sq != Sk (fully masked rows when Sq > Sk), and the ALiBi distance. The visible
// set is read exactly through an identity V: out[i, j] = p_ij.
#include "cases.h"

namespace fatest {
namespace {

class MaskForward : public ::testing::TestWithParam<CaseParam> {};
class MaskBackward : public ::testing::TestWithParam<CaseParam> {};
TEST_P(MaskForward, MatchesReference) { check_forward(std::get<0>(GetParam()), std::get<1>(GetParam())); }
TEST_P(MaskBackward, MatchesReference) { check_backward(std::get<0>(GetParam()), std::get<1>(GetParam())); }
INSTANTIATE_TEST_SUITE_P(Masks, MaskForward, ::testing::ValuesIn(on_cpu(mask_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Masks, MaskBackward, ::testing::ValuesIn(on_cpu(mask_cases())), CaseParamName());

struct MaskShape {
  int64_t sq, sk;
  bool causal;
  int64_t left, right;
};

std::vector<MaskShape> mask_shapes() {
  return {
      {20, 20, true, -1, -1},  {30, 12, true, -1, -1},  {12, 30, true, -1, -1},
      {25, 25, false, 3, 3},   {25, 25, false, 0, 0},   {25, 25, false, 4, -1},
      {25, 25, false, -1, 2},  {40, 15, false, 2, 1},   {15, 40, false, 2, 1},
      {40, 15, false, -1, 0},  {40, 15, false, 0, -1},  {15, 40, false, -1, 3},
      {33, 33, true, 5, -1},   {33, 33, true, 5, 7},    {30, 50, true, 0, 0},
      {70, 70, false, 64, 0},  {1, 40, true, -1, -1},   {40, 1, true, -1, -1},
      {9, 9, false, 100, 100},
  };
}

// p_ij > 0 exactly where the contract makes key j visible to query i, and each
// visible row sums to 1.
TEST(MaskPattern, VisibleSetIsExactlyTheContracts) {
  for (const MaskShape& m : mask_shapes()) {
    Case c = Case("mask_pattern").batch(2).seq(m.sq, m.sk).heads(2, 1).magnitude(0.3f);
    c.causal = m.causal;
    c.window = {m.left, m.right};
    const Problem p = identity_v_problem(c);
    for (const Target& t : {cpu_target(), reference_target()}) {
      SCOPED_TRACE(::testing::Message() << t.name << " Sq=" << m.sq << " Sk=" << m.sk << " causal="
                                        << m.causal << " window=(" << m.left << "," << m.right << ")");
      const FwdResult f = run_forward(p, t);
      int64_t wrong = 0;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < m.sq; ++i) {
            double sum = 0.0;
            bool any = false;
            for (int64_t j = 0; j < m.sk; ++j) {
              const double pij = prob_at(p, f.out, b, h, i, j);
              const bool vis = visible(c, m.sq, m.sk, i, j);
              wrong += vis != (pij > 0.0);
              sum += pij;
              any = any || vis;
            }
            if (any) {
              EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << i;
            } else {
              EXPECT_EQ(f.lse.get(p.lse_index(b, h, i)), -kInf) << "row " << i;
            }
          }
      EXPECT_EQ(wrong, 0) << "entries whose visibility disagrees with the contract";
    }
  }
}

// causal is exactly window (-1, 0): the same bits, whatever Sq and Sk.
TEST(MaskEquivalence, CausalIsWindowMinusOneZero) {
  for (auto [sq, sk] : {std::pair<int64_t, int64_t>{50, 50}, {70, 20}, {20, 70}, {130, 129}}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      const Case a = Case("causal_eq").seq(sq, sk).heads(2, 1).causal_mask().type(dt);
      const Case w = Case(a).causal_mask(false).win(-1, 0);
      for (const Target& t : {cpu_target(), reference_target()}) {
        const Problem pa = make_problem(a);
        Problem pw = make_problem(w);
        pw.q = pa.q; pw.k = pa.k; pw.v = pa.v; pw.dout = pa.dout;
        const FwdResult fa_ = run_forward(pa, t), fw = run_forward(pw, t);
        EXPECT_TRUE(bitwise_equal(fa_.out, fw.out)) << t.name << " " << sq << "x" << sk;
        EXPECT_TRUE(bitwise_equal(fa_.lse, fw.lse)) << t.name << " " << sq << "x" << sk;
        const BwdResult ga = run_backward(pa, t, fa_), gw = run_backward(pw, t, fw);
        EXPECT_TRUE(bitwise_equal(ga.dq, gw.dq) && bitwise_equal(ga.dk, gw.dk) && bitwise_equal(ga.dv, gw.dv))
            << t.name << " " << sq << "x" << sk;
      }
    }
  }
}

// causal together with a window: both apply (the right side is capped at 0).
TEST(MaskEquivalence, CausalAndWindowIntersect) {
  struct Pair { fa::Window with_causal, alone; };
  for (const Pair& pr : {Pair{{7, 3}, {7, 0}}, Pair{{-1, 5}, {-1, 0}}, Pair{{4, -1}, {4, 0}}, Pair{{0, 0}, {0, 0}}}) {
    const Case a = Case("causal_window").seq(60, 45).heads(2, 2).causal_mask().win(pr.with_causal.left, pr.with_causal.right);
    const Case w = Case(a).causal_mask(false).win(pr.alone.left, pr.alone.right);
    const Problem pa = make_problem(a);
    Problem pw = make_problem(w);
    pw.q = pa.q; pw.k = pa.k; pw.v = pa.v;
    for (const Target& t : {cpu_target(), reference_target()}) {
      const FwdResult fa_ = run_forward(pa, t), fw = run_forward(pw, t);
      EXPECT_TRUE(bitwise_equal(fa_.out, fw.out)) << t.name << " window (" << pr.with_causal.left << ","
                                                  << pr.with_causal.right << ")";
    }
  }
}

// ALiBi: with zero scores, p_ij is proportional to exp(-slope |i + Sk - Sq - j|),
// for slopes [Hq] and [B, Hq], in both directions of Sq != Sk.
TEST(ScoreMods, AlibiDistanceAlignedBottomRight) {
  for (auto [sq, sk] : {std::pair<int64_t, int64_t>{12, 30}, {30, 12}, {17, 17}}) {
    for (Alibi kind : {Alibi::per_head, Alibi::per_batch_head}) {
      const Case c = Case("alibi_closed_form").batch(2).seq(sq, sk).heads(2, 1).slopes(kind).filled(Fill::zeros_qk);
      const Problem p = identity_v_problem(c);
      for (const Target& t : {cpu_target(), reference_target()}) {
        const FwdResult f = run_forward(p, t);
        double worst = 0.0;
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t h = 0; h < 2; ++h) {
            const double slope = p.slope(b, h);
            for (int64_t i = 0; i < sq; ++i) {
              double z = 0.0;
              for (int64_t j = 0; j < sk; ++j) z += std::exp(-slope * std::fabs(double(i + sk - sq - j)));
              for (int64_t j = 0; j < sk; ++j) {
                const double want = std::exp(-slope * std::fabs(double(i + sk - sq - j))) / z;
                worst = std::max(worst, std::fabs(prob_at(p, f.out, b, h, i, j) - want));
              }
              EXPECT_NEAR(f.lse.get(p.lse_index(b, h, i)), std::log(z), 1e-5);
            }
          }
        EXPECT_LT(worst, 1e-6) << t.name << " " << sq << "x" << sk << " alibi kind " << static_cast<int>(kind);
      }
    }
  }
}

// Softcap: s -> cap * tanh(s / cap) before the softmax; with one query and two
// keys p0 / p1 = exp(cap tanh(s0/cap) - cap tanh(s1/cap)).
TEST(ScoreMods, SoftcapClosedForm) {
  Problem p = identity_v_problem(Case("softcap_closed_form").seq(1, 2).dims(1, 2).scale(1.f).cap(2.f));
  p.q.set(0, 3.0);
  p.k.set(0, 1.5);   // s0 = 4.5
  p.k.set(1, -0.5);  // s1 = -1.5
  for (const Target& t : {cpu_target(), reference_target()}) {
    const FwdResult f = run_forward(p, t);
    const double a = 2.0 * std::tanh(4.5 / 2.0), b = 2.0 * std::tanh(-1.5 / 2.0);
    const double z = std::exp(a) + std::exp(b);
    EXPECT_NEAR(prob_at(p, f.out, 0, 0, 0, 0), std::exp(a) / z, 1e-6) << t.name;
    EXPECT_NEAR(prob_at(p, f.out, 0, 0, 0, 1), std::exp(b) / z, 1e-6) << t.name;
    EXPECT_NEAR(f.lse.get(0), std::log(z), 1e-6) << t.name;
  }
}

}  // namespace
}  // namespace fatest
