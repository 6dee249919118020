// seqused_k: attention over the filled part of a KV cache. Each case runs the CPU
// flash backend against the reference, and the reference against the harness's own
// float64 computation, which takes the used keys as the sequence's key length. The
// cache rows past the used keys hold NaN (make_problem), so a backend that reads
// them fails. Shapes cover the decoding path (at most 64 query rows per kv head)
// and the tiled forward, batched and packed, every mask option.
#include <cmath>
#include <cstring>

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

namespace fatest {
namespace {

// seqused_k inside the memory of out: the call uses the values it was given. (The CPU
// forward read them again while it wrote out, planned with one length and ran with
// another, and crashed.) Same for cu_seqlens_k inside out, packed.
TEST(KvCacheAliasing, LengthsInsideOutAreReadOnce) {
  const int64_t B = 2, Sq = 100, Sk = 2000, H = 1, D = 8;
  HostTensor q = make_tensor(DType::f32, {B, Sq, H, D}), k = make_tensor(DType::f32, {B, Sk, H, D});
  for (int64_t e = 0; e < q.numel(); ++e) q.set(e, std::sin(0.1 * e));
  for (int64_t e = 0; e < k.numel(); ++e) k.set(e, std::cos(0.07 * e));
  for (int threads : {1, 2}) {
    fa::Options opt;
    opt.num_threads = threads;
    // Reference: lengths {1, 1} in their own array.
    HostTensor used = make_tensor(DType::i32, {B});
    used.set(0, 1);
    used.set(1, 1);
    HostTensor want = make_tensor(DType::f32, {B, Sq, H, D});
    opt.seqused_k = used.view();
    fa::forward(q.view(), k.view(), k.view(), want.view(), nullptr, opt);
    // The same lengths stored in the last row of out, which the call overwrites.
    HostTensor out = make_tensor(DType::f32, {B, Sq, H, D});
    auto* last = static_cast<float*>(out.data()) + (B * Sq * H - 1) * D;
    const int32_t one[2] = {1, 1};
    std::memcpy(last, one, sizeof one);
    fa::TensorView u = used.view();
    u.data = last;
    opt.seqused_k = u;
    ASSERT_NO_THROW(fa::forward(q.view(), k.view(), k.view(), out.view(), nullptr, opt));
    EXPECT_TRUE(bitwise_equal(out, want)) << threads << " threads";
  }
}

}  // namespace
}  // namespace fatest
