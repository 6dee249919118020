// The CUDA backend's KV caches (seqused_k, paged pools, new rows; on the sm80 kernels and
// the decoding path) and its decoding path (kernels/decode): cases against the reference,
// paged and appended caches bit for bit against the batched ones, unchecked device
// values, every split count, and the path's plan from a device's figures.
// Skipped when the build has no CUDA backend or no GPU is visible (the plan's test needs
// no GPU).
#include "flashattn/flashattn.h"

#if defined(FLASHATTN_WITH_CUDA)

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cases.h"
#include "cuda_util.h"
#include "kvcache_util.h"
#include "kernels/decode/decode.h"

namespace fatest {
namespace {

// seqused_k (a KV cache filled to a length per sequence), NaN in the unused rows.
class CudaKvCache : public ::testing::TestWithParam<CaseParam> {};

TEST_P(CudaKvCache, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const Case& c = std::get<0>(GetParam());
  if (!cuda_builds(c.dtype, c.Dqk, c.Dv)) GTEST_SKIP() << "no kernel for this head dim and dtype in this build";
  check_forward(c, std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(SequsedK, CudaKvCache, ::testing::ValuesIn(on_cuda(low_precision(kvcache_cases()))), CaseParamName());

// Prefill into a batched cache (more than 64 rows a kv head: not the decoding path) at
// the Hopper forward's head dims, so that on H100 / H200 it runs there: used lengths that
// end inside a key tile (the first tile then ends at the last used key), below one tile
// (it starts before key 0), on a tile's end, and 0; long caches for the wide key tiles;
// every mask and score modifier. The unused rows hold NaN.
std::vector<Case> kv_hopper_cases() {
  return in_dtypes({
      Case("kvh_hd128_long").batch(2).seq(300, 8300).heads(8, 2).dims(128, 128).used({8299, 2500}),
      Case("kvh_hd128_causal_short").batch(4).seq(130, 512).heads(4, 4).dims(128, 128).causal_mask()
          .used({150, 512, 70, 0}),
      Case("kvh_hd128_causal_long").batch(2).seq(200, 16500).heads(2, 1).dims(128, 128).causal_mask()
          .used({16499, 16384}),
      Case("kvh_hd64_window_alibi").batch(2).seq(200, 1000).heads(6, 2).dims(64, 64).win(100, 0)
          .slopes(Alibi::per_head).used({999, 333}),
      Case("kvh_hd64_causal").batch(3).seq(400, 700).heads(2, 2).dims(64, 64).causal_mask().used({700, 401, 65}),
      Case("kvh_hd256_causal").batch(2).seq(100, 2100).heads(2, 1).dims(256, 256).causal_mask().used({2099, 1000}),
      Case("kvh_hd128_softcap").batch(1).seq(257, 3000).heads(4, 1).dims(128, 128).cap(30.f).used({2950}),
      // hd64's 192-row blocks (causal past 1024 query rows), whose first groups idle
      // through the diagonal key tiles; a left window without modifiers; hd96 and hd192.
      Case("kvh_hd64_causal_long").batch(2).seq(1100, 3000).heads(2, 1).dims(64, 64).causal_mask()
          .used({2999, 1500}),
      Case("kvh_hd128_window_left").batch(2).seq(300, 2500).heads(4, 2).dims(128, 128).win(400, -1)
          .used({2400, 700}),
      Case("kvh_hd96").batch(2).seq(200, 900).heads(4, 2).dims(96, 96).used({899, 300}),
      Case("kvh_hd192_causal").batch(2).seq(150, 2000).heads(2, 1).dims(192, 192).causal_mask()
          .used({1999, 777}),
  }, {DType::bf16, DType::f16});
}
INSTANTIATE_TEST_SUITE_P(Hopper, CudaKvCache, ::testing::ValuesIn(on_cuda(kv_hopper_cases())), CaseParamName());

// A paged cache on cuda gives the batched cache's bits (CudaKvCache checks those against
// the reference): the same kernel and tiles (sm80, or the decoding path), only the rows'
// addresses differ. The pool's unused blocks and rows hold NaN, the table's unused
// entries -1.
TEST(CudaKvCachePaged, SameAsTheBatchedCache) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<Case> cases = {
      Case("paged_decode_gqa").batch(3).seq(1, 512).heads(16, 2).dims(128, 128).used({1, 200, 512}),
      Case("paged_decode_window_softcap").batch(2).seq(4, 384).heads(4, 4).dims(128, 128).causal_mask()
          .win(70, 0).cap(20.f).used({300, 129}),
      Case("paged_prefill_causal_alibi").batch(2).seq(100, 256).heads(2, 1).dims(64, 64).causal_mask()
          .slopes(Alibi::per_head).used({256, 130}),
      Case("paged_prefill_dv").batch(2).seq(70, 256).heads(2, 2).dims(128, 64).used({0, 255}),
      Case("paged_every_key").batch(2).seq(2, 256).heads(4, 2).dims(128, 128).used({256, 256}),
  };
  int ran = 0;
  for (const Case& base : cases)
    for (DType dt : {DType::bf16, DType::f16}) {
      if (!cuda_builds(dt, base.Dqk, base.Dv)) continue;
      const Problem p = make_problem(Case(base).type(dt));
      HostTensor want;
      {
        // Batched caches may run on the Hopper forward, paged ones on the sm80 kernels:
        // the batched call on those too (the decoding path takes both alike).
        ScopedEnv sm80("FLASHATTN_FORCE_SM80", "1");
        want = kv_forward(p, cuda_target(), nullptr, 0);
      }
      for (int64_t page : {64, 128, 256}) {
        if (base.Sk % page != 0) continue;
        SCOPED_TRACE(::testing::Message() << base.name << " " << short_name(dt) << " page " << page);
        const Paged pg = page_out(p, page);
        // Every key used: the paged call without seqused_k (the block table alone).
        const bool every = base.name == "paged_every_key";
        EXPECT_TRUE(bitwise_equal(kv_forward(p, cuda_target(), &pg, 0, !every), want));
        ++ran;
      }
    }
  if (ran == 0) GTEST_SKIP() << "no case's head dim and dtype in this build";
}

// k_new / v_new on cuda: the step's rows written into the cache (batched, or a pool) on
// the call's stream, then attended to: the caches equal the filled ones bit for bit
// (guards included) and out equals the forward over them.
TEST(CudaKvCacheAppend, WritesTheStepAndAttendsToIt) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<Case> cases = {
      Case("append_decode").batch(3).seq(1, 256).heads(16, 2).dims(128, 128).used({3, 100, 256}),
      Case("append_causal_alibi").batch(2).seq(3, 128).heads(4, 1).dims(64, 64).causal_mask()
          .slopes(Alibi::per_head).used({70, 128}),
      Case("append_prefill_dv").batch(2).seq(80, 192).heads(2, 2).dims(128, 64).causal_mask().used({80, 150}),
  };
  int ran = 0;
  for (const Case& base : cases)
    for (DType dt : {DType::bf16, DType::f16}) {
      if (!cuda_builds(dt, base.Dqk, base.Dv)) continue;
      for (int64_t s_new : {1, 3}) {
        const Problem p = make_problem(Case(base).type(dt));
        SCOPED_TRACE(::testing::Message() << base.name << " " << short_name(dt) << " S_new " << s_new);
        Step s = take_last_rows(p, s_new);
        const HostTensor got = kv_step(p, cuda_target(), s, s.k_cache, s.v_cache, nullptr, 0);
        EXPECT_TRUE(bitwise_equal(s.k_cache, p.k) && bitwise_equal(s.v_cache, p.v)) << "batched cache";
        EXPECT_TRUE(bitwise_equal(got, kv_forward(p, cuda_target(), nullptr, 0))) << "batched out";
        const Paged full = page_out(p, 64);
        Step again = take_last_rows(p, s_new);
        Paged pg = page_out(p, again, 64);
        const HostTensor got_paged = kv_step(p, cuda_target(), again, pg.k, pg.v, &pg.table, 0);
        EXPECT_TRUE(bitwise_equal(pg.k, full.k) && bitwise_equal(pg.v, full.v)) << "pool";
        EXPECT_TRUE(bitwise_equal(got_paged, kv_forward(p, cuda_target(), &full, 0))) << "paged out";
        ++ran;
      }
    }
  if (ran == 0) GTEST_SKIP() << "no case's head dim and dtype in this build";
}

// Values in device memory that the host does not read (it would have to synchronise): a
// table entry outside the pool is clamped into it, and new rows with no place (seqused_k
// below S_new) are skipped. Wrong answers, but no fault and no error (memcheck runs this).
TEST(CudaKvCache, UncheckedDeviceValuesStayInBounds) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  if (!cuda_builds(DType::bf16, 128, 128)) GTEST_SKIP() << "no bf16 head dim 128 kernel in this build";
  Problem p = make_problem(Case("unchecked").batch(2).seq(1, 128).heads(2, 1).dims(128, 128).used({2, 128})
                               .type(DType::bf16));
  Paged pg = page_out(p, 64);
  pg.table.set(0, 9999);  // sequence 0's block 0
  pg.table.set(3, -7);    // sequence 1's block 1
  EXPECT_NO_THROW(kv_forward(p, cuda_target(), &pg, 0));
  Step s = take_last_rows(p, 2);
  p.used_k->set(0, 1);  // sequence 0: the first new row has no place
  HostTensor kc = s.k_cache, vc = s.v_cache;
  EXPECT_NO_THROW(kv_step(p, cuda_target(), s, kc, vc, nullptr, 0));
  EXPECT_NO_THROW(kv_step(p, cuda_target(), s, pg.k, pg.v, &pg.table, 0));
  cuda_ok(cudaDeviceSynchronize(), "after the calls");
}
// The decoding path (kernels/decode): up to 64 query rows per kv head (query heads of a
// group x tokens) in 16-row blocks, the keys split over blocks and merged by LSE. Long
// caches give many splits; 32 and 48 rows per kv head take two and three row blocks;
// packed batches give each sequence its own rows (the second: 3 x 4 = 12 of them).
std::vector<Case> decode_cases() {
  return in_dtypes({
      Case("decode_splits").batch(1).seq(1, 4096).heads(32, 8).dims(128, 128).used({4000}),
      Case("decode_gqa_causal_window").batch(2).seq(4, 3000).heads(16, 4).dims(128, 128).causal_mask()
          .win(900, 0).used({2999, 1500}),
      Case("decode_mods").batch(3).seq(2, 1024).heads(8, 2).dims(64, 64).causal_mask().cap(15.f)
          .slopes(Alibi::per_batch_head).used({1024, 1, 700}),
      Case("decode_two_row_blocks").batch(2).seq(1, 2048).heads(64, 2).dims(128, 128).used({2048, 77}),
      Case("decode_three_row_blocks").batch(1).seq(3, 1000).heads(16, 1).dims(256, 256).causal_mask(),
      Case("decode_dv_padded").batch(2).seq(1, 700).heads(8, 8).dims(72, 40).used({650, 0}),
      Case("decode_sq_past_sk").batch(2).seq(8, 5).heads(4, 2).dims(128, 128).causal_mask(),
      Case("decode_no_cache").batch(2).seq(5, 3333).heads(12, 3).dims(96, 96).win(-1, 2),
      Case("decode_dv_wider").batch(2).seq(2, 900).heads(8, 2).dims(64, 128).used({900, 450}),
      Case("decode_hd192_window").batch(1).seq(1, 5000).heads(8, 1).dims(192, 192).win(1200, -1),
      // Packed batches (a serving step: a token or a few per sequence, cu_seqlens).
      Case("decode_packed").packed({1, 3, 0, 2}, {700, 1500, 5, 64}).heads(16, 4).dims(128, 128).causal_mask(),
      Case("decode_packed_used").packed({1, 1, 2}, {300, 900, 64}).heads(32, 2).dims(64, 64).used({17, 900, 0}),
  }, {DType::bf16, DType::f16});
}

class CudaDecode : public ::testing::TestWithParam<CaseParam> {};

TEST_P(CudaDecode, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const Case& c = std::get<0>(GetParam());
  if (!cuda_builds(c.dtype, c.Dqk, c.Dv)) GTEST_SKIP() << "no kernel for this head dim and dtype in this build";
  check_forward(c, std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Decode, CudaDecode, ::testing::ValuesIn(on_cuda(decode_cases())), CaseParamName());


// The same calls with one split (the block writes O itself), with more splits than key
// tiles (empty splits merge as LSE -inf), and through the tiled kernels: every form
// against the reference.
TEST(CudaDecodeSplits, EveryCountAndThePathOff) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  int ran = 0;
  for (const Case& c : decode_cases()) {
    if (!cuda_target().supports(c) || !cuda_builds(c.dtype, c.Dqk, c.Dv)) continue;
    for (const char* splits : {"1", "3", "128"}) {
      SCOPED_TRACE(::testing::Message() << c.name << " splits " << splits);
      ScopedEnv env("FLASHATTN_CUDA_DECODE_SPLITS", splits);
      check_forward(c, cuda_target());
    }
    SCOPED_TRACE(::testing::Message() << c.name << " decoding path off");
    ScopedEnv off("FLASHATTN_CUDA_DECODE", "0");
    check_forward(c, cuda_target());
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no case's head dim and dtype in this build";
}

// A split whose every score is -inf (an infinite key, the first half of the cache) merges
// as one without keys: the row is the attention over the other keys, as with one split,
// not NaN (which the contract keeps for rows whose every visible score is -inf).
TEST(CudaDecodeSplits, AllScoresInfiniteInOneSplit) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  if (!cuda_builds(DType::bf16, 128, 128)) GTEST_SKIP() << "no bf16 head dim 128 kernel in this build";
  Problem p = make_problem(Case("inf_split").batch(1).seq(1, 4096).heads(4, 1).dims(128, 128).type(DType::bf16));
  for (int64_t i = 0; i < p.q.numel(); ++i) p.q.set(i, 1.0);  // q . k = -inf for k = -inf, no 0 * inf
  for (int64_t i = 0; i < 2048 * 128; ++i) p.k.set(i, -INFINITY);  // keys 0..2047 of the one kv head
  HostTensor one, two;
  {
    ScopedEnv env("FLASHATTN_CUDA_DECODE_SPLITS", "1");
    one = kv_forward(p, cuda_target(), nullptr, 0, false);
  }
  {
    ScopedEnv env("FLASHATTN_CUDA_DECODE_SPLITS", "2");
    two = kv_forward(p, cuda_target(), nullptr, 0, false);
  }
  for (int64_t i = 0; i < one.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(one.get(i)) && std::isfinite(two.get(i))) << "element " << i;
    EXPECT_NEAR(one.get(i), two.get(i), 2e-2) << "element " << i;
  }
}

// The decoding path's plan from a device's figures (no GPU needed): which calls it takes,
// splits in whole waves of at least two ring stages each, the ring a block can hold.
TEST(CudaDecodePlan, SplitsRowsAndRings) {
  namespace dec = flashattn::decode;
  if (!cuda_builds(DType::bf16, 128, 128)) GTEST_SKIP() << "no bf16 head dim 128 kernel in this build";
  const dec::DeviceLimits h100{132, 9, 232448, 233472}, rtx4090{128, 8, 101376, 102400};
  fa::FwdParams p;
  p.dtype = DType::bf16;
  p.batch = 1;
  p.seqlen_q = 1;
  p.seqlen_k = 32768;
  p.heads_q = 32;
  p.heads_kv = 8;
  p.head_dim_qk = p.head_dim_v = 128;
  dec::Plan pl = dec::plan_for(p, h100);
  ASSERT_TRUE(pl.ok);
  EXPECT_EQ(pl.head_dim, 128);
  EXPECT_EQ(pl.stages, 4);      // 140 KiB: one block an SM
  EXPECT_EQ(pl.row_groups, 1);  // 4 query heads a kv head
  EXPECT_EQ(pl.splits, 16);     // 8 kv heads x 16 = 128 blocks of 132 SMs
  EXPECT_TRUE(pl.early_merge);
  EXPECT_GE(pl.scratch_bytes, pl.lse_offset + size_t(16) * 8 * 16 * sizeof(float));
  p.batch = 8;
  p.seqlen_k = 8192;
  EXPECT_EQ(dec::plan_for(p, h100).splits, 2);  // 64 x 2 = 128 blocks: one wave
  p.batch = 64;
  p.seqlen_k = 16384;
  pl = dec::plan_for(p, h100);
  EXPECT_EQ(pl.splits, 1);  // 512 blocks already
  EXPECT_EQ(pl.scratch_bytes, 0u);
  p.batch = 1;
  p.seqlen_k = 256;  // four stages of 64 keys: two splits at most
  EXPECT_LE(dec::plan_for(p, h100).splits, 2);
  p.seqlen_k = 32768;
  p.window_left = 500;  // about 570 keys seen: at most 5 splits of two stages
  EXPECT_LE(dec::plan_for(p, h100).splits, 5);
  p.window_left = -1;
  // Rows a kv head: 32 query heads on 1, 2 tokens = 64 rows, four row blocks; 3 tokens
  // (96 rows) and dropout go to the tiled kernels.
  p.heads_kv = 1;
  p.seqlen_q = 2;
  EXPECT_EQ(dec::plan_for(p, h100).row_groups, 4);
  p.seqlen_q = 3;
  EXPECT_FALSE(dec::plan_for(p, h100).ok);
  p.seqlen_q = 1;
  p.dropout_p = 0.1f;
  EXPECT_FALSE(dec::plan_for(p, h100).ok);
  p.dropout_p = 0.f;
  // 99 KiB a block (RTX 30 / 40): hd128 on two stages, hd256 not at all; no early merge.
  pl = dec::plan_for(p, rtx4090);
  EXPECT_TRUE(pl.ok);
  EXPECT_EQ(pl.stages, 2);
  EXPECT_FALSE(pl.early_merge);
  if (cuda_builds(DType::bf16, 256, 256)) {
    p.head_dim_qk = p.head_dim_v = 256;
    EXPECT_FALSE(dec::plan_for(p, rtx4090).ok);
    EXPECT_EQ(dec::plan_for(p, h100).stages, 3);
  }
}

}  // namespace
}  // namespace fatest

#endif  // FLASHATTN_WITH_CUDA
