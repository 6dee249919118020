// seqused_k: attention over the filled part of a KV cache. Each case runs the CPU
// flash backend against the reference, and the reference against the harness's own
// float64 computation, which takes the used keys as the sequence's key length. The
// cache rows past the used keys hold NaN (make_problem), so a backend that reads
// them fails. Shapes cover the decoding path (at most 64 query rows per kv head)
// and the tiled forward, batched and packed, every mask option.
#include "cases.h"

namespace fatest {
namespace {

std::vector<Case> kvcache_cases() {
  return in_dtypes({
      // Decoding shapes: one or a few new tokens against a cache.
      Case("kv_decode").batch(4).seq(1, 300).heads(8, 2).dims(64, 64).used({0, 1, 113, 300}),
      Case("kv_decode_causal").batch(3).seq(4, 256).heads(4, 4).dims(32, 32).causal_mask()
          .used({5, 239, 256}),
      Case("kv_decode_window_alibi_softcap").batch(2).seq(3, 200).heads(6, 2).dims(16, 24)
          .win(17, 0).cap(9.f).slopes(Alibi::per_batch_head).used({150, 18}),
      // Prefill into a cache: the tiled forward (more than 64 rows per kv head).
      Case("kv_prefill_causal").batch(3).seq(130, 520).heads(2, 1).dims(32, 32).causal_mask()
          .used({130, 520, 1}),
      Case("kv_prefill_dv").batch(2).seq(70, 260).heads(2, 2).dims(40, 8).used({0, 259}),
      // Packed query rows, each sequence with its own cache rows.
      Case("kv_packed").packed({1, 3, 0, 80}, {40, 100, 7, 200}).heads(4, 2).dims(16, 16)
          .causal_mask().used({40, 17, 0, 150}),
  });
}

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
