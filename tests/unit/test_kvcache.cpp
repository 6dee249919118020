// seqused_k: attention over the filled part of a KV cache. Each case runs the CPU
// flash backend against the reference, and the reference against the harness's own
// float64 computation, which takes the used keys as the sequence's key length. The
// cache rows past the used keys hold NaN (make_problem), so a backend that reads
// them fails. Shapes cover the decoding path (at most 64 query rows per kv head)
// and the tiled forward, batched and packed, every mask option.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kvcache_util.h"

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

namespace fatest {
namespace {

// A paged KV cache (block_table): the same keys and values as a batched cache, stored in
// blocks of a pool in shuffled order (page_out), give what the batched cache gives.
HostTensor forward_out(const Problem& p, const fa::Backend backend, const Paged* paged, int threads) {
  return kv_forward(p, host_target("t", backend), paged, threads);
}

TEST(KvCachePaged, SameAsTheBatchedCache) {
  const std::vector<Case> cases = {
      Case("paged_decode").batch(3).seq(1, 512).heads(8, 2).dims(64, 64).used({1, 200, 512}),
      Case("paged_decode_window").batch(2).seq(4, 384).heads(4, 4).dims(32, 32).causal_mask().win(70, 0)
          .used({300, 129}),
      Case("paged_prefill_causal_alibi").batch(2).seq(100, 256).heads(2, 1).dims(32, 16).causal_mask()
          .slopes(Alibi::per_head).used({256, 130}),
      Case("paged_every_key").batch(2).seq(2, 256).heads(4, 2).dims(32, 32).cap(5.f),  // no seqused_k
  };
  for (const Case& base : cases)
    for (DType dt : {DType::f32, DType::f16, DType::bf16})
      for (int64_t page : {64, 128}) {
        const Problem p = make_problem(Case(base).type(dt));
        const Paged pg = page_out(p, page);
        SCOPED_TRACE(::testing::Message() << base.name << " " << short_name(dt) << " page " << page);
        // The reference reads key by key: the same bits either way.
        EXPECT_TRUE(bitwise_equal(forward_out(p, fa::Backend::reference, &pg, 1),
                                  forward_out(p, fa::Backend::reference, nullptr, 1)));
        for (int threads : {1, 2}) {
          const std::vector<double> got = forward_out(p, fa::Backend::cpu, &pg, threads).values();
          const std::vector<double> want = forward_out(p, fa::Backend::cpu, nullptr, threads).values();
          // Paged decoding tiles end at multiples of 64: under a window the tiles may
          // split differently from the batched run's, so allow a few roundings.
          const double tol = (dt == DType::f32 ? 1e-6 : 4.0 * unit_roundoff(dt)) * std::max(1.0, max_abs(want));
          EXPECT_TRUE(close("out", got, want, tol)) << threads << " threads";
        }
      }
}

TEST(KvCachePaged, Refusals) {
  const Problem p = make_problem(Case("paged_refusals").batch(2).seq(1, 128).heads(2, 1).dims(16, 16).used({100, 128}));
  Paged pg = page_out(p, 64);
  HostTensor out = make_tensor(DType::f32, p.out_shape());
  auto expect_v = [&](fa::Options opt, const fa::TensorView& k, const fa::TensorView& v, const char* arg) {
    opt.seqused_k = p.used_k->view();
    const std::vector<double> before = out.values();
    try {
      fa::forward(p.q.view(), k, v, out.view(), nullptr, opt);
      ADD_FAILURE() << "no error for " << arg;
    } catch (const fa::Error& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
    }
    EXPECT_TRUE(close("out untouched", out.values(), before, 0.0));
  };
  auto expect = [&](const fa::Options& opt, const fa::TensorView& k, const char* arg) {
    expect_v(opt, k, pg.v.view(), arg);
  };
  fa::Options opt;
  opt.block_table = pg.table.view();
  pg.table.set(1, 9999);  // block 1 of sequence 0 holds used keys 64..99
  expect(opt, pg.k.view(), "block_table");
  pg.table.set(1, -1);
  expect(opt, pg.k.view(), "block_table");
  pg.table.set(1, 0);
  fa::TensorView odd = pg.k.view();
  odd.shape[1] = 48;  // pages of 48 keys (v alike)
  fa::TensorView odd_v = pg.v.view();
  odd_v.shape[1] = 48;
  expect_v(opt, odd, odd_v, "k");
  fa::TensorView t = pg.table.view();
  t.dtype = DType::f32;
  opt.block_table = t;
  expect(opt, pg.k.view(), "block_table");
}

}  // namespace
}  // namespace fatest

namespace fatest {
namespace {

// k_new / v_new: one decoding step written into the cache by the call itself. The
// cache's last S_new used rows of each sequence start as NaN and the step's rows
// arrive in k_new / v_new: the call must write them there (the cache then equals the
// filled one, bit for bit, guards and gaps included) and attend as over the filled
// cache (the same bits). Batched and paged, every host backend.
HostTensor step_out(const Problem& p, fa::Backend backend, const Step& s, HostTensor& kc, HostTensor& vc,
                    const HostTensor* table, int threads) {
  return kv_step(p, host_target("t", backend), s, kc, vc, table, threads);
}

TEST(KvCacheAppend, WritesTheStepAndAttendsToIt) {
  const std::vector<Case> cases = {
      Case("append_decode").batch(3).seq(1, 256).heads(8, 2).dims(64, 64).used({1, 100, 256}),
      Case("append_causal_alibi").batch(2).seq(3, 128).heads(4, 1).dims(32, 16).causal_mask()
          .slopes(Alibi::per_head).used({70, 128}),
      Case("append_prefill").batch(2).seq(80, 192).heads(2, 2).dims(32, 32).causal_mask().used({80, 150}),
  };
  for (const Case& base : cases)
    for (DType dt : {DType::f32, DType::bf16})
      for (int64_t s_new : {1, 3}) {
        if (s_new > *std::min_element(base.used_k.begin(), base.used_k.end())) continue;
        const Problem p = make_problem(Case(base).type(dt));
        SCOPED_TRACE(::testing::Message() << base.name << " " << short_name(dt) << " S_new " << s_new);
        for (fa::Backend backend : {fa::Backend::reference, fa::Backend::cpu}) {
          const HostTensor want = forward_out(p, backend, nullptr, 2);
          Step s = take_last_rows(p, s_new);
          const HostTensor got = step_out(p, backend, s, s.k_cache, s.v_cache, nullptr, 2);
          EXPECT_TRUE(bitwise_equal(s.k_cache, p.k) && bitwise_equal(s.v_cache, p.v)) << "batched cache";
          EXPECT_TRUE(bitwise_equal(got, want)) << "batched out";
          // Paged: the same step into blocks of a pool.
          const Paged full = page_out(p, 64);
          Step again = take_last_rows(p, s_new);
          Paged pg = page_out(p, again, 64);
          const HostTensor got_paged = step_out(p, backend, again, pg.k, pg.v, &pg.table, 2);
          EXPECT_TRUE(bitwise_equal(pg.k, full.k) && bitwise_equal(pg.v, full.v)) << "pool";
          EXPECT_TRUE(bitwise_equal(got_paged, forward_out(p, backend, &full, 2))) << "paged out";
        }
      }
}

// A step's rows that are already the cache's own rows (a view of where they go) move onto
// themselves: nothing changes.
TEST(KvCacheAppend, RowsThatAreTheirOwnDestination) {
  const Problem p = make_problem(Case("append_self").batch(2).seq(1, 64).heads(2, 1).dims(16, 16));
  HostTensor kc = p.k, vc = p.v, out = make_tensor(DType::f32, p.out_shape());
  HostTensor ten = make_tensor(DType::i32, {2});  // both sequences end at row 9
  ten.set(0, 10);
  ten.set(1, 10);
  fa::Options opt;
  opt.seqused_k = ten.view();
  fa::TensorView kn = kc.view(), vn = vc.view();  // [B, 1, Hkv, D] over rows 9, with the cache's strides
  kn.shape[1] = vn.shape[1] = 1;
  kn.data = static_cast<float*>(kn.data) + 9 * kn.stride[1];
  vn.data = static_cast<float*>(vn.data) + 9 * vn.stride[1];
  opt.k_new = kn;
  opt.v_new = vn;
  ASSERT_NO_THROW(fa::forward(p.q.view(), kc.view(), vc.view(), out.view(), nullptr, opt));
  EXPECT_TRUE(bitwise_equal(kc, p.k) && bitwise_equal(vc, p.v));
}

// New rows that are the cache's rows just before where they go (a cache shifted by one):
// each destination gets what its source held before the call, also where a source is
// itself overwritten by this step.
TEST(KvCacheAppend, RowsOverlappingTheirDestination) {
  const int64_t S = 8;
  HostTensor kc = make_tensor(DType::f32, {1, S, 1, 1}), vc = make_tensor(DType::f32, {1, S, 1, 1});
  for (int64_t r = 0; r < S; ++r) {
    kc.set(r, double(r));
    vc.set(r, double(10 * r));
  }
  HostTensor q = make_tensor(DType::f32, {1, 1, 1, 1}), out = make_tensor(DType::f32, {1, 1, 1, 1});
  q.set(0, 0.0);
  HostTensor used = make_tensor(DType::i32, {1});
  used.set(0, 3);  // rows 1, 2 <- rows 0, 1
  fa::Options opt;
  opt.seqused_k = used.view();
  for (const fa::Backend backend : {fa::Backend::reference, fa::Backend::cpu}) {
    opt.backend = backend;
    HostTensor k = kc, v = vc;
    fa::TensorView kn = k.view(), vn = v.view();
    kn.shape[1] = vn.shape[1] = 2;
    opt.k_new = kn;
    opt.v_new = vn;
    ASSERT_NO_THROW(fa::forward(q.view(), k.view(), v.view(), out.view(), nullptr, opt));
    EXPECT_EQ(k.values(), (std::vector<double>{0, 0, 1, 3, 4, 5, 6, 7}));
    EXPECT_EQ(v.values(), (std::vector<double>{0, 0, 10, 30, 40, 50, 60, 70}));
    EXPECT_NEAR(out.get(0), (0 + 0 + 10) / 3.0, 1e-6);  // q = 0: the mean of the used values
  }
}

TEST(KvCacheAppend, Refusals) {
  const Problem p = make_problem(Case("append_refusals").batch(2).seq(1, 128).heads(2, 1).dims(16, 16).used({100, 128}));
  Step s = take_last_rows(p, 2);
  HostTensor out = make_tensor(DType::f32, p.out_shape());
  const HostTensor k0 = s.k_cache, v0 = s.v_cache, out0 = out;
  auto expect = [&](fa::Options opt, const char* arg, fa::ErrorKind kind, const fa::TensorView* k = nullptr) {
    try {
      fa::forward(p.q.view(), k ? *k : s.k_cache.view(), s.v_cache.view(), out.view(), nullptr, opt);
      ADD_FAILURE() << "no error for " << arg;
    } catch (const fa::Error& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
      EXPECT_EQ(e.kind(), kind) << e.what();
    }
    EXPECT_TRUE(bitwise_equal(s.k_cache, k0) && bitwise_equal(s.v_cache, v0) && bitwise_equal(out, out0))
        << "written despite the refusal naming " << arg;
  };
  fa::Options opt;
  opt.seqused_k = p.used_k->view();
  opt.k_new = s.k_new.view();
  expect(opt, "v_new", fa::ErrorKind::value);  // k_new alone
  opt.v_new = s.v_new.view();
  fa::Options no_used = opt;
  no_used.seqused_k.reset();
  expect(no_used, "k_new", fa::ErrorKind::value);
  fa::Options bad = opt;
  fa::TensorView kn = s.k_new.view();
  kn.shape[2] = 2;  // Hkv
  bad.k_new = kn;
  expect(bad, "k_new", fa::ErrorKind::value);
  bad = opt;
  fa::TensorView vn = s.v_new.view();
  vn.shape[1] = 1;  // S_new unlike k_new's
  bad.v_new = vn;
  expect(bad, "v_new", fa::ErrorKind::value);
  bad = opt;
  vn = s.v_new.view();
  vn.dtype = DType::f16;
  bad.v_new = vn;
  expect(bad, "v_new", fa::ErrorKind::type);
  bad = opt;
  vn = s.v_new.view();
  vn.device = {fa::DeviceType::cuda, 0};
  bad.v_new = vn;
  expect(bad, "v_new", fa::ErrorKind::value);
  HostTensor one = make_tensor(DType::i32, {2});  // sequence 0 holds 1 key, fewer than S_new = 2
  one.set(0, 1);
  one.set(1, 128);
  bad = opt;
  bad.seqused_k = one.view();
  expect(bad, "seqused_k", fa::ErrorKind::value);
  fa::TensorView shared = s.k_cache.view();  // every sequence one cache: written twice
  shared.stride[0] = 0;
  expect(opt, "k", fa::ErrorKind::value, &shared);
  // The backward takes no new rows.
  HostTensor lse = make_tensor(DType::f32, p.lse_shape()), dq = p.q, dk = p.k, dv = p.v;
  fa::Options bwd;
  bwd.k_new = s.k_new.view();
  bwd.v_new = s.v_new.view();
  try {
    fa::backward(out.view(), p.q.view(), p.k.view(), p.v.view(), out.view(), lse.view(), dq.view(), dk.view(),
                 dv.view(), bwd);
    ADD_FAILURE() << "backward took k_new";
  } catch (const fa::Error& e) {
    EXPECT_EQ(e.argument(), "k_new") << e.what();
    EXPECT_EQ(e.kind(), fa::ErrorKind::unsupported);
  }
}

}  // namespace
}  // namespace fatest
