// Packed variable-length batches: against the reference (empty sequences of q,
// of k, of both; all empty), against the same sequences run one at a time as
// batched calls, and with max_seqlen larger than needed.
#include "cases.h"

namespace fatest {
namespace {

class VarlenForward : public ::testing::TestWithParam<CaseParam> {};
class VarlenBackward : public ::testing::TestWithParam<CaseParam> {};
TEST_P(VarlenForward, MatchesReference) { check_forward(std::get<0>(GetParam()), std::get<1>(GetParam())); }
TEST_P(VarlenBackward, MatchesReference) { check_backward(std::get<0>(GetParam()), std::get<1>(GetParam())); }
INSTANTIATE_TEST_SUITE_P(Packed, VarlenForward, ::testing::ValuesIn(on_cpu(varlen_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Packed, VarlenBackward, ::testing::ValuesIn(on_cpu(varlen_cases())), CaseParamName());

// Copies rows [start, start+len) of a packed [T, H, D] tensor into a batched [1, len, H, D] one.
HostTensor slice_rows(const HostTensor& packed, int64_t start, int64_t len) {
  const int64_t h = packed.shape[1], d = packed.shape[2];
  HostTensor r = make_tensor(packed.dtype, {1, len, h, d});
  for (int64_t e = 0; e < len * h * d; ++e) r.set(e, packed.get(start * h * d + e));
  return r;
}

// Sequence b of a packed batch gives what a batched call on that sequence alone gives.
TEST(VarlenConsistency, PackedEqualsOneSequenceAtATime) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const Case pc = Case("packed_vs_batched").packed({9, 0, 70, 1, 33}, {20, 4, 65, 0, 33}).heads(4, 2)
                        .dims(16, 8).causal_mask().win(40, -1).cap(7.f).slopes(Alibi::per_batch_head).type(dt);
    const Problem pp = make_problem(pc);
    const FwdResult pf = run_forward(pp, cpu_target());
    const BwdResult pg = run_backward(pp, cpu_target(), pf);
    for (int64_t b = 0; b < pp.B; ++b) {
      SCOPED_TRACE(::testing::Message() << short_name(dt) << " sequence " << b);
      const int64_t lq = pp.len_q[b], lk = pp.len_k[b];
      Case bc = Case(pc);
      bc.lens_q.clear();
      bc.lens_k.clear();
      bc.B = 1;
      bc.Sq = lq;
      bc.Sk = lk;
      bc.alibi = Alibi::per_head;
      Problem bp = make_problem(bc);
      bp.q = slice_rows(pp.q, pp.start_q[b], lq);
      bp.k = slice_rows(pp.k, pp.start_k[b], lk);
      bp.v = slice_rows(pp.v, pp.start_k[b], lk);
      bp.dout = slice_rows(pp.dout, pp.start_q[b], lq);
      for (int64_t h = 0; h < pc.Hq; ++h) bp.alibi->set(h, pp.alibi->get(b * pc.Hq + h));
      const FwdResult bf = run_forward(bp, cpu_target());
      const BwdResult bg = run_backward(bp, cpu_target(), bf);
      auto rows = [](const HostTensor& t, int64_t start, int64_t len) {
        const int64_t w = t.shape[1] * t.shape[2];
        std::vector<double> r;
        for (int64_t e = start * w; e < (start + len) * w; ++e) r.push_back(t.get(e));
        return r;
      };
      const double tol = dt == DType::f32 ? 1e-6 : 0.0;  // the same computation; allow fp32 reordering
      auto near = [&](const std::vector<double>& a, const std::vector<double>& want, const char* what) {
        EXPECT_TRUE(close(what, a, want, tol * std::max(1.0, max_abs(want)) + (dt == DType::f32 ? 0.0 : 4.0 * unit_roundoff(dt) * std::max(1.0, max_abs(want)))));
      };
      near(rows(pf.out, pp.start_q[b], lq), bf.out.values(), "out");
      near(rows(pg.dq, pp.start_q[b], lq), bg.dq.values(), "dq");
      near(rows(pg.dk, pp.start_k[b], lk), bg.dk.values(), "dk");
      near(rows(pg.dv, pp.start_k[b], lk), bg.dv.values(), "dv");
      std::vector<double> lp, lb;
      for (int64_t h = 0; h < pc.Hq; ++h)
        for (int64_t i = 0; i < lq; ++i) {
          lp.push_back(pf.lse.get(pp.lse_index(b, h, i)));
          lb.push_back(bf.lse.get(bp.lse_index(0, h, i)));
        }
      EXPECT_TRUE(close("lse", lp, lb, 1e-5 * std::max(1.0, max_abs(lb))));
    }
  }
}

// max_seqlen_q/k are upper bounds: larger values change nothing.
TEST(VarlenConsistency, LargerMaxSeqlenChangesNothing) {
  const Case c = Case("max_seqlen_bound").packed({5, 17, 0}, {9, 3, 12}).heads(2, 1).causal_mask().drop(0.2f);
  Problem p = make_problem(c);
  for (const Target& t : {cpu_target(), reference_target()}) {
    const FwdResult f1 = run_forward(p, t);
    const BwdResult g1 = run_backward(p, t, f1);
    Problem big = p;
    big.max_q += 50;
    big.max_k += 70;
    const FwdResult f2 = run_forward(big, t);
    const BwdResult g2 = run_backward(big, t, f2);
    EXPECT_TRUE(bitwise_equal(f1.out, f2.out)) << t.name;
    EXPECT_TRUE(bitwise_equal(f1.lse, f2.lse)) << t.name;
    EXPECT_TRUE(bitwise_equal(g1.dq, g2.dq) && bitwise_equal(g1.dk, g2.dk) && bitwise_equal(g1.dv, g2.dv)) << t.name;
  }
}

// Rows of a sequence whose k is empty: out 0 and lse -inf; keys of a sequence
// whose q is empty: dk = dv = 0 (also checked by the runner, here spelled out).
TEST(VarlenEdges, EmptySidesGiveZeros) {
  const Case c = Case("empty_sides").packed({4, 0, 3}, {0, 6, 5}).heads(2, 2);
  const Problem p = make_problem(c);
  const FwdResult f = run_forward(p, cpu_target());
  const BwdResult g = run_backward(p, cpu_target(), f);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(f.lse.get(p.lse_index(0, h, i)), -kInf);
      for (int64_t x = 0; x < 16; ++x) {
        EXPECT_EQ(f.out.get((p.row_q(0, i) * 2 + h) * 16 + x), 0.0);
        EXPECT_EQ(g.dq.get((p.row_q(0, i) * 2 + h) * 16 + x), 0.0);
      }
    }
  for (int64_t j = 0; j < 6; ++j)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t x = 0; x < 16; ++x) {
        EXPECT_EQ(g.dk.get((p.row_k(1, j) * 2 + h) * 16 + x), 0.0);
        EXPECT_EQ(g.dv.get((p.row_k(1, j) * 2 + h) * 16 + x), 0.0);
      }
}

}  // namespace
}  // namespace fatest
