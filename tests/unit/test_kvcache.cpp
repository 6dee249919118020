// seqused_k: attention over the filled part of a KV cache. Each case runs the CPU
// flash backend against the reference, and the reference against the harness's own
// float64 computation, which takes the used keys as the sequence's key length. The
// cache rows past the used keys hold NaN (make_problem), so a backend that reads
// them fails. Shapes cover the decoding path (at most 64 query rows per kv head)
// and the tiled forward, batched and packed, every mask option.
#include "cases.h"

namespace fatest {
namespace {

class KvCacheForward : public ::testing::TestWithParam<CaseParam> {};
TEST_P(KvCacheForward, MatchesReference) { check_forward(std::get<0>(GetParam()), std::get<1>(GetParam())); }
INSTANTIATE_TEST_SUITE_P(SequsedK, KvCacheForward, ::testing::ValuesIn(on_cpu(kvcache_cases())), CaseParamName());

// Used keys equal to the key rows change nothing: the same bits as no seqused_k.
TEST(KvCacheConsistency, FullCacheEqualsNoSeqused) {
  for (DType dt : {DType::f32, DType::bf16}) {
    for (int64_t sq : {1, 96}) {
      const Case c = Case("kv_full").batch(2).seq(sq, 150).heads(4, 2).dims(32, 32).causal_mask().type(dt);
      const Problem plain = make_problem(c);
      const Problem used = make_problem(Case(c).used({150, 150}));
      for (const Target& t : {cpu_target(), reference_target()}) {
        const FwdResult a = run_forward(plain, t), b = run_forward(used, t);
        EXPECT_TRUE(bitwise_equal(a.out, b.out)) << short_name(dt) << " Sq " << sq << " " << t.name;
        EXPECT_TRUE(bitwise_equal(a.lse, b.lse)) << short_name(dt) << " Sq " << sq << " " << t.name;
      }
    }
  }
}

}  // namespace
}  // namespace fatest
