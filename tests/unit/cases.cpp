#include "cases.h"

namespace fatest {

namespace {
constexpr DType f32 = DType::f32, f16 = DType::f16, bf16 = DType::bf16;
}  // namespace

std::vector<Case> in_dtypes(const std::vector<Case>& base, const std::vector<DType>& dtypes) {
  std::vector<Case> r;
  for (const Case& c : base)
    for (DType t : dtypes) r.push_back(Case(c).type(t));
  return r;
}

std::vector<Case> feature_cases() {
  return in_dtypes({
      Case("basic").batch(2).seq(64, 64).heads(2, 2).dims(32, 32),
      Case("causal").batch(2).seq(65, 65).heads(2, 2).dims(32, 32).causal_mask(),
      Case("gqa").batch(2).seq(37, 45).heads(6, 2),
      Case("mqa_causal").seq(40, 33).heads(4, 1).causal_mask(),
      Case("dv_lt_dqk").seq(33, 47).heads(2, 1).dims(24, 8),
      Case("dv_gt_dqk_causal").seq(47, 33).heads(2, 2).dims(8, 40).causal_mask(),
      Case("odd_head_dims").seq(19, 23).heads(3, 1).dims(5, 3),
      Case("softcap").seq(50, 50).heads(2, 2).cap(5.f).magnitude(3.f),
      Case("softcap_causal_alibi").batch(2).seq(41, 57).heads(4, 2).causal_mask().cap(8.f)
          .slopes(Alibi::per_head),
      Case("alibi_head").batch(2).seq(48, 48).heads(3, 3).slopes(Alibi::per_head),
      Case("alibi_batch_head").batch(3).seq(30, 44).heads(2, 1).slopes(Alibi::per_batch_head),
      Case("alibi_batch_head_window").batch(2).seq(44, 30).heads(2, 2).win(6, 2)
          .slopes(Alibi::per_batch_head),
      Case("dropout").batch(2).seq(40, 40).heads(2, 2).drop(0.2f),
      Case("dropout_causal_gqa").batch(2).seq(70, 70).heads(4, 2).causal_mask().drop(0.5f, 7, 3),
      Case("dropout_window_softcap_alibi").batch(2).seq(45, 61).heads(4, 2).dims(16, 8).win(20, 5)
          .cap(6.f).slopes(Alibi::per_batch_head).drop(0.3f, 99, 1ull << 40),
      Case("softmax_scale").seq(32, 32).heads(2, 2).scale(0.5f),
      Case("everything_packed").packed({23, 0, 40, 1}, {31, 5, 0, 1}).heads(4, 2).dims(16, 24)
          .causal_mask().cap(10.f).slopes(Alibi::per_batch_head).drop(0.25f),
  });
}

std::vector<Case> length_cases() {
  std::vector<Case> r = in_dtypes({
      Case("len1").seq(1, 1),
      Case("len1_17_causal").seq(1, 17).causal_mask(),
      Case("len17").seq(17, 17).heads(2, 2),
      Case("len17_1_causal").seq(17, 1).causal_mask(),  // 16 rows see no key
      Case("len113_causal").seq(113, 113).heads(2, 1).causal_mask(),
      Case("len113_239").seq(113, 239),
      Case("len239_113").seq(239, 113),
      Case("len239_113_causal").seq(239, 113).causal_mask(),  // 126 rows see no key
      Case("tile64").seq(64, 64).causal_mask(),
      Case("tile65_63").seq(65, 63).causal_mask(),
      Case("tile128_129").seq(128, 129).heads(2, 1).causal_mask(),
      Case("tile63_130").seq(63, 130),
      Case("no_keys").batch(2).seq(5, 0).heads(2, 1),     // every row sees nothing
      Case("no_queries").batch(2).seq(0, 9).heads(2, 1),  // every key is dead
      Case("empty_batch").batch(0).seq(4, 4),
  });
  // The long ones: few cases.
  for (const Case& c : in_dtypes({Case("len1023_causal").seq(1023, 1023).dims(8, 8).causal_mask()},
                                 {f32, bf16}))
    r.push_back(c);
  r.push_back(Case("len1_1023_window").seq(1, 1023).win(100, 0).type(f32));
  r.push_back(Case("len1023_17_causal").seq(1023, 17).causal_mask().type(f16));
  // Several key groups per dQ^T chain in the CPU backward (40 items in 2 chains,
  // 30 in 3), each group adding after the previous one of its chain.
  for (const Case& c : in_dtypes({Case("key_groups_chains_window").batch(2).seq(300, 1100).heads(4, 4).dims(32, 32)
                                      .win(300, 40),
                                  Case("key_groups_chains_causal").seq(600, 1100).heads(6, 6).dims(32, 32)
                                      .causal_mask(),
                                  // Runs of 2 groups per item: 1 chain (32 pairs), 2 chains (8 pairs).
                                  Case("key_group_runs_window").batch(4).seq(100, 1100).heads(8, 8).dims(32, 32)
                                      .win(500, 20),
                                  Case("key_group_runs_chains").batch(2).seq(64, 4400).heads(4, 4).dims(32, 32)},
                                 {f32, bf16}))
    r.push_back(c);
  return r;
}

std::vector<Case> special_cases() {
  return in_dtypes({
      // |scale * q.k| up to about 1000.
      Case("large_scores").seq(64, 64).heads(2, 2).dims(32, 32).magnitude(16.f),
      Case("large_scores_causal_gqa").seq(77, 77).heads(4, 2).dims(32, 32).causal_mask()
          .magnitude(16.f),
      Case("large_scores_softcap").seq(50, 60).heads(2, 1).dims(32, 32).magnitude(16.f).cap(30.f),
      Case("large_scores_alibi_window").seq(60, 50).heads(2, 2).dims(32, 32).magnitude(16.f)
          .slopes(Alibi::per_head).win(10, 10),
      Case("zero_qk_uniform").seq(33, 47).heads(2, 1).causal_mask().filled(Fill::zeros_qk),
      Case("zero_all").seq(20, 20).heads(2, 2).filled(Fill::zeros),
      Case("zero_qk_dropout").seq(24, 24).filled(Fill::zeros_qk).drop(0.4f),
      Case("tiny_scores").seq(30, 30).magnitude(1e-3f),
  });
}

std::vector<Case> mask_cases() {
  return in_dtypes({
      Case("causal_sq_gt_sk").seq(77, 30).heads(2, 1).causal_mask(),
      Case("causal_sq_lt_sk").seq(30, 77).heads(2, 1).causal_mask(),
      Case("window_sym").seq(100, 100).win(16, 16),
      Case("window_diag_only").seq(50, 50).win(0, 0),
      Case("window_left_only").seq(90, 90).win(10, -1),
      Case("window_right_only").seq(90, 90).win(-1, 5),
      Case("window_left0_right_unbounded").seq(40, 40).win(0, -1),
      Case("window_unbounded_explicit").seq(40, 40).win(-1, -1),
      Case("window_wider_than_seq").seq(30, 40).win(1000, 1000),
      Case("causal_window_left").seq(70, 70).causal_mask().win(20, -1),
      Case("causal_window_both").seq(70, 70).causal_mask().win(7, 3),
      Case("causal_window_left_huge").seq(70, 70).causal_mask().win(200, 0),
      Case("window_sq_gt_sk_masked_rows").seq(90, 40).win(5, 0),
      Case("window_right_only_sq_gt_sk").seq(80, 30).win(-1, 2),
      Case("window_left_only_sq_gt_sk").seq(80, 30).win(4, -1),
      Case("window_sq_lt_sk").seq(40, 100).win(3, 3),
      Case("window_right_past_end").seq(30, 50).win(2, 100),
      Case("window_tiles").seq(130, 130).heads(2, 1).win(64, 0),
      Case("window_batched_gqa_dropout").batch(2).seq(60, 75).heads(4, 2).win(9, 4).drop(0.1f),
  });
}

std::vector<Case> varlen_cases() {
  return in_dtypes({
      Case("packed_basic").packed({5, 17, 1}, {7, 17, 30}).heads(2, 2),
      Case("packed_empty_q").packed({0, 9, 4}, {6, 9, 4}).heads(2, 1),
      Case("packed_empty_k").packed({6, 9, 4}, {6, 0, 4}).heads(2, 1),
      Case("packed_empty_both").packed({3, 0, 5}, {3, 0, 2}),
      Case("packed_all_empty").packed({0, 0}, {0, 0}),
      Case("packed_all_empty_multi_head").packed({0, 0, 0}, {0, 0, 0}).heads(4, 2),
      Case("packed_no_keys_at_all").packed({3, 5}, {0, 0}).heads(2, 1),
      Case("packed_no_queries_at_all").packed({0, 0}, {4, 6}).heads(2, 1),
      Case("packed_causal_tiles").packed({1, 64, 65, 130}, {64, 1, 130, 65}).heads(2, 1)
          .causal_mask(),
      Case("packed_window").packed({40, 30, 70}, {50, 30, 20}).win(8, 3),
      Case("packed_gqa_dropout").packed({33, 20}, {20, 33}).heads(4, 2).drop(0.3f, 5, 11),
      Case("packed_alibi_causal").packed({12, 40, 7}, {30, 40, 3}).heads(2, 2).causal_mask()
          .slopes(Alibi::per_batch_head),
      Case("packed_softcap").packed({25, 14}, {14, 25}).cap(4.f).magnitude(3.f),
      Case("packed_transposed").packed({10, 0, 31}, {12, 5, 31}).heads(2, 1)
          .in_layout(Layout::transposed).outputs_layout(Layout::transposed),
      Case("packed_padded").packed({10, 3, 31}, {12, 0, 31}).heads(4, 2).dims(16, 8)
          .in_layout(Layout::padded).outputs_layout(Layout::padded).causal_mask(),
  });
}

std::vector<Case> layout_cases() {
  return in_dtypes({
      Case("transposed_inputs").batch(2).seq(33, 45).heads(4, 2).dims(16, 8)
          .in_layout(Layout::transposed),
      Case("transposed_outputs").batch(2).seq(33, 45).heads(4, 2).dims(16, 8)
          .outputs_layout(Layout::transposed),
      Case("transposed_all_causal").batch(2).seq(45, 33).heads(2, 2).causal_mask()
          .in_layout(Layout::transposed).outputs_layout(Layout::transposed),
      Case("padded_inputs_gqa").batch(2).seq(40, 40).heads(4, 2).causal_mask()
          .in_layout(Layout::padded),
      Case("padded_outputs").batch(2).seq(40, 30).heads(2, 1).outputs_layout(Layout::padded),
      Case("padded_everything").batch(2).seq(37, 41).heads(4, 2).dims(16, 24)
          .in_layout(Layout::padded).outputs_layout(Layout::padded)
          .slopes(Alibi::per_batch_head).drop(0.2f).win(12, 3),
      Case("transposed_mqa_window").batch(3).seq(29, 29).heads(3, 1).win(4, 4)
          .in_layout(Layout::transposed).outputs_layout(Layout::padded),
  });
}

std::vector<Case> smoke_cases() {
  return in_dtypes({
      Case("smoke_basic").batch(2).seq(33, 47).heads(4, 2).causal_mask(),
      Case("smoke_packed").packed({5, 0, 20}, {7, 3, 0}).heads(2, 1).slopes(Alibi::per_head)
          .drop(0.2f),
  });
}

std::vector<CaseParam> on_cpu(const std::vector<Case>& cases) {
  std::vector<CaseParam> r;
  for (const Case& c : cases) r.emplace_back(c, cpu_target());
  return r;
}

std::vector<CaseParam> on_auto(const std::vector<Case>& cases) {
  std::vector<CaseParam> r;
  for (const Case& c : cases) r.emplace_back(c, auto_target());
  return r;
}

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
      // The common head dim, for the GPU kernels' tiles.
      Case("kv_decode_hd128").batch(2).seq(1, 1000).heads(16, 2).dims(128, 128).used({1000, 333}),
      Case("kv_prefill_hd128_causal").batch(2).seq(200, 700).heads(4, 1).dims(128, 128).causal_mask()
          .used({700, 450}),
      // Packed query rows, each sequence with its own cache rows.
      Case("kv_packed").packed({1, 3, 0, 80}, {40, 100, 7, 200}).heads(4, 2).dims(16, 16)
          .causal_mask().used({40, 17, 0, 150}),
  });
}

}  // namespace fatest
