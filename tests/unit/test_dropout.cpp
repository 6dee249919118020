// Dropout: the keep decision is a pure function of (seed, offset, b, h, i, j)
// shared by every backend. Read the pattern through an identity V (out[i, j] is
// p_ij / (1 - p) when kept, 0 when dropped) and compare it with dropout_keep();
// check the kept fraction and that the seed and offset change the pattern.
#include "cases.h"

namespace fatest {
namespace {

TEST(DropoutKeep, FractionCloseToOneMinusP) {
  for (float p : {0.05f, 0.1f, 0.25f, 0.5f, 0.9f}) {
    int64_t kept = 0, n = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t i = 0; i < 50; ++i)
          for (int64_t j = 0; j < 203; ++j, ++n) kept += fa::dropout_keep(17, 5, b, h, i, j, p);
    const double frac = static_cast<double>(kept) / n;
    const double sigma = std::sqrt(p * (1.0 - p) / n);
    EXPECT_NEAR(frac, 1.0 - p, 5 * sigma) << "p = " << p;
  }
}

TEST(DropoutKeep, ZeroProbabilityKeepsEverything) {
  for (int64_t i = 0; i < 100; ++i)
    for (int64_t j = 0; j < 100; ++j) ASSERT_TRUE(fa::dropout_keep(3, 4, 1, 2, i, j, 0.f));
}

TEST(DropoutKeep, PureFunctionOfItsArguments) {
  for (int64_t j = 0; j < 1000; ++j)
    ASSERT_EQ(fa::dropout_keep(11, 22, 1, 3, 7, j, 0.3f), fa::dropout_keep(11, 22, 1, 3, 7, j, 0.3f));
}

// Changing any of seed, offset, b, h, i or j gives an independent decision:
// two patterns agree on about p^2 + (1-p)^2 of the entries, not all of them.
TEST(DropoutKeep, EveryArgumentChangesThePattern) {
  const float p = 0.5f;
  const int n = 20000;
  auto agree = [&](auto make_a, auto make_b) {
    int same = 0;
    for (int x = 0; x < n; ++x) same += make_a(x) == make_b(x);
    return static_cast<double>(same) / n;
  };
  const double expect = p * p + (1 - p) * (1 - p), tol = 5 * std::sqrt(expect * (1 - expect) / n);
  auto base = [&](int x) { return fa::dropout_keep(1, 0, 0, 0, x / 200, x % 200, p); };
  EXPECT_NEAR(agree(base, [&](int x) { return fa::dropout_keep(2, 0, 0, 0, x / 200, x % 200, p); }), expect, tol) << "seed";
  EXPECT_NEAR(agree(base, [&](int x) { return fa::dropout_keep(1, 1, 0, 0, x / 200, x % 200, p); }), expect, tol) << "offset";
  EXPECT_NEAR(agree(base, [&](int x) { return fa::dropout_keep(1 + (1ull << 32), 0, 0, 0, x / 200, x % 200, p); }), expect, tol) << "seed high bits";
  EXPECT_NEAR(agree(base, [&](int x) { return fa::dropout_keep(1, 1ull << 32, 0, 0, x / 200, x % 200, p); }), expect, tol) << "offset high bits";
  EXPECT_NEAR(agree(base, [&](int x) { return fa::dropout_keep(1, 0, 1, 0, x / 200, x % 200, p); }), expect, tol) << "b";
  EXPECT_NEAR(agree(base, [&](int x) { return fa::dropout_keep(1, 0, 0, 1, x / 200, x % 200, p); }), expect, tol) << "h";
  EXPECT_NEAR(agree(base, [&](int x) { return fa::dropout_keep(1, 0, 0, 0, x / 200 + 100, x % 200, p); }), expect, tol) << "i";
  EXPECT_NEAR(agree(base, [&](int x) { return fa::dropout_keep(1, 0, 0, 0, x / 200, x % 200 + 1, p); }), expect, tol) << "j";
}

// The pattern of both backends is dropout_keep(seed, offset, b, h, i, j) with
// b the sequence, h the query head, i and j positions within the sequence; kept
// entries are p_ij / (1 - p_drop).
void expect_pattern(const Case& c) {
  const Problem p = identity_v_problem(c);
  Case nodrop_case = c;
  nodrop_case.dropout = 0.f;
  Problem nodrop = identity_v_problem(nodrop_case);
  nodrop.q = p.q;
  nodrop.k = p.k;
  for (const Target& t : {cpu_target(), reference_target(), auto_target()}) {
    SCOPED_TRACE(c.describe() + " | " + t.name);
    const FwdResult f = run_forward(p, t);
    const FwdResult f0 = run_forward(nodrop, t);
    int64_t wrong = 0, kept = 0, total = 0;
    double worst = 0.0;
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < p.len_q[b]; ++i)
          for (int64_t j = 0; j < p.len_k[b]; ++j) {
            const double got = prob_at(p, f.out, b, h, i, j), p0 = prob_at(nodrop, f0.out, b, h, i, j);
            if (!visible(c, p.len_q[b], p.len_k[b], i, j)) {
              wrong += got != 0.0;
              continue;
            }
            const bool keep = fa::dropout_keep(c.dropout_seed, c.dropout_offset, b, h, i, j, c.dropout);
            ++total;
            kept += keep;
            wrong += keep != (got != 0.0);
            if (keep) worst = std::max(worst, std::fabs(got - p0 / (1.0 - c.dropout)));
          }
    EXPECT_EQ(wrong, 0) << "entries whose keep decision differs from dropout_keep()";
    EXPECT_LT(worst, 1e-6);
    EXPECT_GT(kept, 0);
    EXPECT_LT(kept, total);
    // lse is the softmax's, before dropout.
    EXPECT_EQ(f.lse.values(), f0.lse.values());
  }
}

TEST(DropoutPattern, BatchedMatchesDropoutKeep) {
  expect_pattern(Case("pattern_batched").batch(2).seq(19, 24).heads(2, 1).magnitude(0.5f).drop(0.3f, 77, 5));
}

TEST(DropoutPattern, CausalGqaSqGreaterThanSk) {
  expect_pattern(Case("pattern_causal").batch(2).seq(40, 70).heads(4, 2).magnitude(0.5f).causal_mask().drop(0.6f, 1, 2));
  expect_pattern(Case("pattern_causal2").seq(70, 40).heads(2, 2).magnitude(0.5f).causal_mask().drop(0.1f, 3, 9));
}

TEST(DropoutPattern, PackedUsesSequenceIndexAndLocalPositions) {
  expect_pattern(Case("pattern_packed").packed({7, 0, 19, 66}, {24, 5, 24, 70}).heads(2, 1).magnitude(0.5f)
                     .drop(0.4f, 123456789012345ull, 987654321ull));
}

// Same seed and offset: the same bits; another seed or offset: another output.
TEST(DropoutSeeds, SeedAndOffsetSelectThePattern) {
  const Case c = Case("seeds").batch(2).seq(30, 30).heads(2, 2).drop(0.3f, 10, 0);
  const Problem a = make_problem(c);
  Problem same = a, seed = a, offset = a;
  seed.c.dropout_seed = 11;
  offset.c.dropout_offset = 1;
  for (const Target& t : {cpu_target(), reference_target()}) {
    const FwdResult fa_ = run_forward(a, t), fs = run_forward(same, t), fd = run_forward(seed, t),
                    fo = run_forward(offset, t);
    EXPECT_TRUE(bitwise_equal(fa_.out, fs.out)) << t.name;
    EXPECT_FALSE(bitwise_equal(fa_.out, fd.out)) << t.name;
    EXPECT_FALSE(bitwise_equal(fa_.out, fo.out)) << t.name;
    const BwdResult ga = run_backward(a, t, fa_), gs = run_backward(same, t, fs), gd = run_backward(seed, t, fd);
    EXPECT_TRUE(bitwise_equal(ga.dq, gs.dq) && bitwise_equal(ga.dk, gs.dk) && bitwise_equal(ga.dv, gs.dv)) << t.name;
    EXPECT_FALSE(bitwise_equal(ga.dv, gd.dv)) << t.name;
  }
}

// dropout_p = 0 is off, whatever the seed: the same bits as no dropout.
TEST(DropoutSeeds, ZeroProbabilityIsOff) {
  const Problem a = make_problem(Case("p0").seq(30, 30).heads(2, 1).causal_mask());
  Problem b = a;
  b.c.dropout_seed = 999;
  b.c.dropout_offset = 5;
  const FwdResult fa_ = run_forward(a, cpu_target()), fb = run_forward(b, cpu_target());
  EXPECT_TRUE(bitwise_equal(fa_.out, fb.out));
}

// Averaged over seeds, dropout is unbiased: E[out] = out without dropout.
TEST(DropoutSeeds, UnbiasedOverSeeds) {
  const Case c = Case("unbiased").seq(8, 16).magnitude(0.5f).drop(0.5f);
  Problem p = identity_v_problem(c);
  Case nd = c;
  nd.dropout = 0.f;
  Problem p0 = identity_v_problem(nd);
  p0.q = p.q;
  p0.k = p.k;
  const std::vector<double> want = run_forward(p0, cpu_target()).out.values();
  const int n = 400;
  std::vector<double> mean(want.size(), 0.0);
  RunOpts one_thread;
  one_thread.num_threads = 1;
  for (int s = 0; s < n; ++s) {
    p.c.dropout_seed = 1000 + s;
    const std::vector<double> o = run_forward(p, cpu_target(), one_thread).out.values();
    for (size_t e = 0; e < o.size(); ++e) mean[e] += o[e] / n;
  }
  // Each entry is want * Bernoulli(1/2) * 2: standard deviation want / sqrt(n).
  for (size_t e = 0; e < want.size(); ++e)
    EXPECT_NEAR(mean[e], want[e], 6.0 * want[e] / std::sqrt(double(n)) + 1e-7) << e;
}

}  // namespace
}  // namespace fatest
