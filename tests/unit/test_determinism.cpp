// deterministic = true: bitwise-identical gradients from run to run and for any
// thread count (Options::num_threads 1, 2 and the OpenMP default). The CPU
// forward's outputs do not depend on the thread count either, though it picks
// its query tile size from it (forward.cpp).
#include "cases.h"

namespace fatest {
namespace {

std::vector<Case> determinism_cases() {
  return {
      Case("det_gqa_causal").batch(2).seq(150, 150).heads(4, 2).dims(32, 32).causal_mask(),
      Case("det_mqa_long_keys").seq(130, 200).heads(4, 1).type(DType::bf16),
      Case("det_dropout_alibi_packed").packed({70, 0, 129, 5}, {66, 3, 140, 0}).heads(4, 2).dims(16, 24)
          .slopes(Alibi::per_batch_head).drop(0.3f).type(DType::bf16),
      Case("det_window_softcap").batch(2).seq(100, 180).heads(2, 2).win(30, 10).cap(5.f).type(DType::f16),
      // 48 items on the CPU (backward.cpp): 4 key groups and 2 single key tiles
      // (the tail split) per kv head, in 2 dQ^T chains.
      Case("det_chunks_groups").batch(2).seq(300, 1100).heads(8, 4).dims(32, 32).win(700, 40),
      // Items of 2 key groups each, then 9 single key tiles, in 2 chains.
      Case("det_group_runs").batch(2).seq(64, 4400).heads(8, 4).dims(32, 32).win(2000, 100),
      Case("det_chunks_groups_bf16").batch(1).seq(1100, 1100).heads(8, 8).dims(64, 64).causal_mask()
          .type(DType::bf16),
      // The decoding path (decode.cpp): key splits per kv head merged in order;
      // 256-key splits for these short calls (under 64 items at 1024), 1024 keys
      // in the last (96 items).
      Case("det_decode_splits").batch(2).seq(2, 2500).heads(8, 2).dims(64, 64).causal_mask(),
      Case("det_decode_splits_bf16").seq(1, 3000).heads(4, 1).dims(128, 128).type(DType::bf16),
      Case("det_decode_splits_f16").seq(4, 1800).heads(8, 2).dims(64, 64).type(DType::f16),
      Case("det_decode_long_splits").batch(4).seq(1, 2100).heads(16, 8).dims(32, 32),
  };
}

class Determinism : public ::testing::TestWithParam<CaseParam> {};

TEST_P(Determinism, BackwardBitwiseAcrossRunsAndThreads) {
  const Case& c = std::get<0>(GetParam());
  const Target& t = std::get<1>(GetParam());
  SCOPED_TRACE(c.describe());
  const Problem p = make_problem(c);
  RunOpts o;
  o.deterministic = true;
  o.num_threads = 1;
  const FwdResult f = run_forward(p, t, o);
  const BwdResult first = run_backward(p, t, f, o);
  for (int threads : {1, 2, 0, 2, 3, 8}) {
    o.num_threads = threads;
    const BwdResult again = run_backward(p, t, f, o);
    EXPECT_TRUE(bitwise_equal(first.dq, again.dq)) << "dq, num_threads " << threads;
    EXPECT_TRUE(bitwise_equal(first.dk, again.dk)) << "dk, num_threads " << threads;
    EXPECT_TRUE(bitwise_equal(first.dv, again.dv)) << "dv, num_threads " << threads;
  }
}

// 128-row query tiles at 1-3 threads, 64-row ones at 8 and 16 on these shapes.
TEST_P(Determinism, ForwardBitwiseAcrossThreads) {
  const Case& c = std::get<0>(GetParam());
  const Target& t = std::get<1>(GetParam());
  SCOPED_TRACE(c.describe());
  const Problem p = make_problem(c);
  RunOpts o;
  o.num_threads = 1;
  const FwdResult first = run_forward(p, t, o);
  for (int threads : {2, 3, 8, 16}) {
    o.num_threads = threads;
    const FwdResult again = run_forward(p, t, o);
    EXPECT_TRUE(bitwise_equal(first.out, again.out)) << "out, num_threads " << threads;
    EXPECT_TRUE(bitwise_equal(first.lse, again.lse)) << "lse, num_threads " << threads;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Determinism, ::testing::ValuesIn(on_cpu(determinism_cases())), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Automatic, Determinism, ::testing::ValuesIn(on_auto({determinism_cases()[0]})), CaseParamName());

}  // namespace
}  // namespace fatest
