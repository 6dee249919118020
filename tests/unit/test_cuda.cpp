// The suite's cases on the CUDA backend (device buffers), forward and backward,
// plus what only a GPU backend has: refusals of host or misaligned pointers,
// CUDA-graph capture of a forward + backward step.
// Skipped when the build has no CUDA backend or no GPU is visible.
#include "flashattn/flashattn.h"

#if defined(FLASHATTN_WITH_CUDA)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cases.h"
#include "cuda_util.h"
#include "flashattn/numeric.h"
#include "kernels/sm80/launch.h"
#include "kernels/sm80/bwd_tiles.h"
#include "kernels/sm80/fwd_rules.h"
#include "kernels/sm80/tiles.h"
#include "kernels/sm90/fwd_split.h"
#include "kernels/sm90/launch.h"

namespace fatest {
namespace {

class CudaForward : public ::testing::TestWithParam<CaseParam> {};

TEST_P(CudaForward, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  check_forward(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Features, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(feature_cases()))), CaseParamName());

INSTANTIATE_TEST_SUITE_P(Lengths, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(length_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Special, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(special_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Masks, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(mask_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Varlen, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(varlen_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Layouts, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(layout_cases()))), CaseParamName());

class CudaBackward : public ::testing::TestWithParam<CaseParam> {};

TEST_P(CudaBackward, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  check_backward(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Features, CudaBackward, ::testing::ValuesIn(on_cuda(low_precision(feature_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Lengths, CudaBackward, ::testing::ValuesIn(on_cuda(low_precision(length_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Masks, CudaBackward, ::testing::ValuesIn(on_cuda(low_precision(mask_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Varlen, CudaBackward, ::testing::ValuesIn(on_cuda(low_precision(varlen_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Layouts, CudaBackward, ::testing::ValuesIn(on_cuda(low_precision(layout_cases()))), CaseParamName());

// Every instantiated head dim, odd dims padded up to the next one, and Dv != Dqk.
std::vector<Case> head_dim_cases() {
  std::vector<Case> cases;
  for (int64_t d : {8, 32, 40, 64, 72, 96, 128, 136, 160, 192, 200, 256})
    for (bool causal : {false, true})
      cases.push_back(Case("hdim" + std::to_string(d) + (causal ? "_causal" : ""))
                          .batch(2).seq(173, 301).heads(4, 2).dims(d, d).causal_mask(causal));
  cases.push_back(Case("dqk128_dv64").batch(2).seq(130, 200).heads(2, 1).dims(128, 64));
  cases.push_back(Case("dqk64_dv128").batch(2).seq(130, 200).heads(2, 2).dims(64, 128).causal_mask());
  cases.push_back(Case("dqk192_dv128").seq(300, 300).heads(2, 1).dims(192, 128).win(64, 16));
  return in_dtypes(cases, {DType::f16, DType::bf16});
}
INSTANTIATE_TEST_SUITE_P(HeadDims, CudaForward, ::testing::ValuesIn(on_cuda(head_dim_cases())), CaseParamName());

// Problems the Hopper forward takes (head dims 64/128/256 here, 96/192 below; plain, causal and window
// masks, GQA/MQA, packed batches) at shapes that stress its tiles and barriers: lengths around the
// 128-row and 64/128-key tiles, one key, more keys than queries and the reverse. hd64's 192-row
// blocks end with consumer groups that have no rows (1000, 1100, 130 and packed rows), and under
// causal masks their groups 0 and 1 skip diagonal key tiles (causal_long, window_long): such
// groups issue no products there but keep the turns and the K/V ring going.
// On other GPUs, or with FLASHATTN_FORCE_SM80=1, the same cases check the sm80 kernel.
std::vector<Case> hopper_cases() {
  std::vector<Case> cases;
  for (int64_t d : {64, 128, 256}) {
    const std::string n = "hdim" + std::to_string(d) + "_";
    cases.push_back(Case(n + "full").batch(2).seq(1000, 1000).heads(4, 4).dims(d, d));
    cases.push_back(Case(n + "causal_sq_gt_sk").seq(517, 300).heads(2, 2).dims(d, d).causal_mask());
    cases.push_back(Case(n + "causal_sk_gt_sq").seq(100, 1030).heads(2, 1).dims(d, d).causal_mask());
    cases.push_back(Case(n + "window").seq(700, 700).heads(2, 2).dims(d, d).win(128, 0));
    cases.push_back(Case(n + "window_both").seq(333, 777).heads(2, 2).dims(d, d).win(64, 31));
    // A left bound only: every key tile's rows start at 0 (the backward walks them
    // from a per-key-tile start) but end at different rows; grouped heads.
    cases.push_back(Case(n + "window_left").seq(600, 700).heads(4, 2).dims(d, d).win(150, -1));
    // Past the short-sequence tiles (hd64 causal-like masks take 128-row blocks up to
    // seqlen_q 1024, the table's 192 rows beyond): masks on the table's shape too.
    cases.push_back(Case(n + "causal_long").seq(1100, 1100).heads(2, 1).dims(d, d).causal_mask());
    cases.push_back(Case(n + "window_long").seq(1100, 1300).heads(2, 2).dims(d, d).win(200, 50));
    // Past long_tile_config's thresholds (fwd_traits.h): hd128 takes wider key tiles
    // from 8192 keys without a mask and from 16384 with a causal one, hd256 from 1024 /
    // 8192; each head dim's cases lie a little past its own.
    const int plain_keys = d == 128 ? 8200 : 2100, causal_keys = d == 128 ? 16400 : 8300;
    cases.push_back(Case(n + "long_keys").seq(130, plain_keys).heads(2, 1).dims(d, d));
    cases.push_back(Case(n + "long_keys_causal").seq(150, causal_keys).heads(2, 1).dims(d, d).causal_mask());
    cases.push_back(Case(n + "long_keys_packed").packed({100, 33, 7}, {plain_keys + 100, 1500, 9}).heads(2, 1)
                        .dims(d, d));
    // max_seqlen_k picks the wide tiles for the whole batch; the second sequence's
    // first 100 rows see no key (bottom-right causal, Sq > Sk).
    cases.push_back(Case(n + "long_keys_packed_causal").packed({10, 300}, {causal_keys - 100, 200}).heads(2, 1)
                        .dims(d, d).causal_mask());
    // A causal mask with look-ahead (window (-1, 5)) takes the causal threshold.
    cases.push_back(Case(n + "long_keys_lookahead").seq(140, causal_keys - 50).heads(2, 1).dims(d, d).win(-1, 5));
    cases.push_back(Case(n + "tiny").batch(3).seq(1, 7).heads(2, 2).dims(d, d));
    cases.push_back(Case(n + "mqa").seq(256, 384).heads(8, 1).dims(d, d).causal_mask());
    cases.push_back(Case(n + "one_key").seq(200, 1).heads(2, 2).dims(d, d).causal_mask());
    cases.push_back(Case(n + "packed").packed({5, 130, 257, 1}, {7, 200, 129, 300}).heads(4, 2).dims(d, d));
    cases.push_back(Case(n + "packed_causal").packed({64, 1, 130, 300}, {64, 300, 129, 1}).heads(2, 1)
                        .dims(d, d).causal_mask());
    cases.push_back(Case(n + "packed_window_empty").packed({0, 50, 200}, {9, 0, 333}).heads(2, 2)
                        .dims(d, d).win(40, 7));
    cases.push_back(Case(n + "softcap").seq(300, 300).heads(2, 2).dims(d, d).cap(5.f).magnitude(3.f));
    cases.push_back(Case(n + "alibi_causal").batch(2).seq(257, 300).heads(4, 2).dims(d, d).causal_mask()
                        .slopes(Alibi::per_batch_head));
    cases.push_back(Case(n + "softcap_alibi_packed").packed({70, 1, 200}, {90, 130, 150}).heads(2, 1)
                        .dims(d, d).cap(8.f).slopes(Alibi::per_head).win(50, 20));
    // Modifiers over many steps of grouped heads (each step's head its own slope),
    // and a negative scale (the modifiers' path, the folded scale cannot take it).
    cases.push_back(Case(n + "softcap_alibi_gqa").batch(2).seq(333, 270).heads(6, 2).dims(d, d).cap(20.f)
                        .magnitude(3.f).slopes(Alibi::per_batch_head));
    cases.push_back(Case(n + "negative_scale").seq(200, 300).heads(2, 2).dims(d, d).scale(-0.1f).causal_mask());
    // Scores in the hundreds: rows' maxima jump by far more than 2^8 between key tiles
    // deep into a row, so the lazy rescaling (sm90/fwd_softmax.cuh, hd128 and up) moves its
    // reference mid-row, not only at the first tile.
    cases.push_back(Case(n + "large_scores").seq(200, 900).heads(2, 1).dims(d, d).magnitude(16.f));
    cases.push_back(Case(n + "large_scores_causal").seq(600, 600).heads(2, 2).dims(d, d).magnitude(16.f)
                        .causal_mask());
  }
  return in_dtypes(cases, {DType::f16, DType::bf16});
}
INSTANTIATE_TEST_SUITE_P(Hopper, CudaForward, ::testing::ValuesIn(on_cuda(hopper_cases())), CaseParamName());

// The Hopper forward's cut last round (sm90/fwd_split.h: no mask, the last
// tiles cut over keys, merged by their LSE). On a 132-SM GPU: hd128, 136 tiles
// of 9 key tiles, 132 whole and 4 cut into 3 pieces, 1100 keys (a partial key
// tile in the last piece); hd64's 192-row tiles, 154 of them, the last of each
// head with 80 rows (its third group idles in every piece); hd256 and softcap
// (the modifiers' kernel) with every tile cut. The long_keys and gqa_long cases
// above cut too; FLASHATTN_SM90_FWD_SPLIT=16 (the device plan's second run of the
// Hopper suites) cuts every case it can into up to 16 pieces.
std::vector<Case> hopper_split_cases() {
  std::vector<Case> cases;
  cases.push_back(Case("hdim128_cut_round").seq(2100, 1100).heads(8, 2).dims(128, 128));
  cases.push_back(Case("hdim64_cut_round").seq(2000, 1500).heads(14, 7).dims(64, 64));
  cases.push_back(Case("hdim256_all_cut").seq(700, 1000).heads(4, 4).dims(256, 256));
  cases.push_back(Case("hdim128_softcap_all_cut").batch(2).seq(500, 3000).heads(6, 2).dims(128, 128).cap(10.f)
                      .magnitude(3.f));
  return in_dtypes(cases, {DType::f16, DType::bf16});
}
INSTANTIATE_TEST_SUITE_P(HopperSplit, CudaForward, ::testing::ValuesIn(on_cuda(hopper_split_cases())),
                         CaseParamName());

// The Hopper forward's heavy-first order in narrower sections (sm90/fwd_sections.h):
// many heads of a short causal call, whose K and V exceed what the L2 sections keep,
// so on a 132-SM GPU the list walks sections of fewer heads (128 -> 64 pairs at hd64,
// 128 -> 4 at hd128, 32 -> 16 at hd256; forward only: the backward has its own order).
std::vector<Case> hopper_section_cases() {
  std::vector<Case> cases;
  for (int64_t d : {64, 128, 256})
    cases.push_back(Case("hdim" + std::to_string(d) + "_causal_heads").batch(d == 128 ? 8 : 4).seq(512, 512)
                        .heads(2048 / d, 2048 / d).dims(d, d).causal_mask());
  return in_dtypes(cases, {DType::bf16});
}
INSTANTIATE_TEST_SUITE_P(HopperSections, CudaForward, ::testing::ValuesIn(on_cuda(hopper_section_cases())),
                         CaseParamName());

// The Hopper forward's other head dims, 96 (64-byte swizzled rows, 128 x 128
// tiles) and 192 (128 x 112 tiles, O staged in Q): lengths around the tiles,
// masks that cut them, grouped heads, packed sequences, score modifiers. The
// Hopper backward takes them too: hd192 by product (64 keys per block, 64-byte
// swizzled rows), hd96 by keys (128 keys, dQ's columns 48 / 48 between the
// groups, 32-byte swizzled rows, a 64-byte swizzled fp32 staging).
std::vector<Case> hopper_other_dim_cases() {
  std::vector<Case> cases;
  for (int64_t d : {96, 192}) {
    const std::string n = "hdim" + std::to_string(d) + "_";
    cases.push_back(Case(n + "full").batch(2).seq(1000, 1000).heads(4, 4).dims(d, d));
    cases.push_back(Case(n + "gqa_long").seq(300, 2100).heads(6, 2).dims(d, d));
    cases.push_back(Case(n + "causal_sq_gt_sk").seq(517, 300).heads(2, 2).dims(d, d).causal_mask());
    cases.push_back(Case(n + "causal_sk_gt_sq").seq(100, 1030).heads(2, 1).dims(d, d).causal_mask());
    cases.push_back(Case(n + "window_both").seq(333, 777).heads(2, 2).dims(d, d).win(64, 31));
    cases.push_back(Case(n + "tiny").batch(3).seq(1, 7).heads(2, 2).dims(d, d));
    cases.push_back(Case(n + "packed_causal").packed({64, 1, 130, 300}, {64, 300, 129, 1}).heads(2, 1)
                        .dims(d, d).causal_mask());
    cases.push_back(Case(n + "softcap_alibi").batch(2).seq(257, 300).heads(4, 2).dims(d, d).cap(10.f)
                        .magnitude(3.f).slopes(Alibi::per_batch_head).causal_mask());
    // Scores in the hundreds (hd192's forward rescales lazily, as hopper_cases' do).
    cases.push_back(Case(n + "large_scores_causal").seq(500, 700).heads(2, 1).dims(d, d).magnitude(16.f)
                        .causal_mask());
  }
  return in_dtypes(cases, {DType::f16, DType::bf16});
}
INSTANTIATE_TEST_SUITE_P(HopperOtherDims, CudaForward, ::testing::ValuesIn(on_cuda(hopper_other_dim_cases())),
                         CaseParamName());
INSTANTIATE_TEST_SUITE_P(HopperOtherDims, CudaBackward, ::testing::ValuesIn(on_cuda(hopper_other_dim_cases())),
                         CaseParamName());
// The Hopper backward takes all three head dims of these (hd256 with 64 keys per
// block and the consumer groups split by product), softcap and ALiBi included.
INSTANTIATE_TEST_SUITE_P(Hopper, CudaBackward, ::testing::ValuesIn(on_cuda(hopper_cases())), CaseParamName());

// The Hopper backward at hd192 / hd256 (64 keys per block, group 0 S^T/P^T/dV,
// group 1 dP^T/dS^T/dK, dQ staged in the step's Q/dO stage): grouped-query heads
// with many steps per block (the two-stage ring wraps, the stage hand-back
// runs), lengths that are not multiples of the 64-key or 64-row tiles, masks
// that cut tiles, packed sequences with grouped heads. Small: the float64 oracle
// is slow.
std::vector<Case> hopper_hd256_backward_cases() {
  std::vector<Case> cases;
  for (int64_t d : {192, 256}) {
    const std::string n = "hdim" + std::to_string(d) + "_";
    cases.push_back(Case(n + "gqa").batch(2).seq(250, 270).heads(6, 2).dims(d, d));
    cases.push_back(Case(n + "gqa_causal").seq(301, 229).heads(4, 2).dims(d, d).causal_mask());
    cases.push_back(Case(n + "gqa_window").seq(230, 300).heads(4, 2).dims(d, d).win(70, 9));
    cases.push_back(Case(n + "packed_gqa_causal").packed({1, 65, 200}, {64, 130, 190}).heads(4, 2)
                        .dims(d, d).causal_mask());
  }
  return in_dtypes(cases, {DType::f16, DType::bf16});
}
INSTANTIATE_TEST_SUITE_P(Hopper256, CudaBackward, ::testing::ValuesIn(on_cuda(hopper_hd256_backward_cases())),
                         CaseParamName());
INSTANTIATE_TEST_SUITE_P(HeadDims, CudaBackward, ::testing::ValuesIn(on_cuda(head_dim_cases())), CaseParamName());

// deterministic = true: within the contract's rule, and bitwise the same over
// repeated calls. On an H100/H200 they run the Hopper backward's ordered dQ
// reduce-adds (many key blocks per query tile, grouped heads, each head dim;
// under causal-like masks in decreasing key-block order).
std::vector<Case> deterministic_cases() {
  std::vector<Case> cases;
  for (int64_t d : {64, 96, 128, 192, 256}) {
    const std::string n = "det_hdim" + std::to_string(d) + "_";
    cases.push_back(Case(n + "gqa_long_keys").seq(300, 1300).heads(4, 2).dims(d, d));
    cases.push_back(Case(n + "causal").batch(2).seq(700, 700).heads(2, 1).dims(d, d).causal_mask());
    cases.push_back(Case(n + "window").seq(600, 900).heads(2, 2).dims(d, d).win(200, 30));
    cases.push_back(Case(n + "packed_softcap").packed({5, 400, 130}, {700, 300, 1}).heads(4, 2).dims(d, d)
                        .cap(10.f).causal_mask());
  }
  return in_dtypes(cases, {DType::bf16});
}
class CudaDeterministic : public ::testing::TestWithParam<CaseParam> {};
TEST_P(CudaDeterministic, MatchesReferenceAndRepeats) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const Case& c = std::get<0>(GetParam());
  const Target& t = std::get<1>(GetParam());
  RunOpts o;
  o.deterministic = true;
  check_backward(c, t, o);
  const Problem p = make_problem(c);
  const FwdResult f = run_forward(p, t, o);
  const BwdResult first = run_backward(p, t, f, o);
  for (int i = 0; i < 4; ++i) {
    const BwdResult again = run_backward(p, t, f, o);
    EXPECT_TRUE(bitwise_equal(first.dq, again.dq)) << "dq, call " << i;
    EXPECT_TRUE(bitwise_equal(first.dk, again.dk)) << "dk, call " << i;
    EXPECT_TRUE(bitwise_equal(first.dv, again.dv)) << "dv, call " << i;
  }
}
INSTANTIATE_TEST_SUITE_P(Cuda, CudaDeterministic, ::testing::ValuesIn(on_cuda(deterministic_cases())), CaseParamName());

// Deterministic pseudo-random bf16 values in [-2, 2) (splitmix64), never zeros.
void fill_bf16(std::vector<uint16_t>& x, uint64_t seed) {
  uint64_t s = seed;
  for (auto& e : x) {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    e = fa::float_to_bf16(static_cast<float>(static_cast<int64_t>(z >> 40) - (1 << 23)) / float(1 << 22));
  }
}

// Device buffers for a small contiguous [B, S, H, D] problem.
struct DeviceProblem {
  int64_t B = 2, S = 64, H = 2, D = 64;
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  DeviceProblem(int64_t b, int64_t s, int64_t h, int64_t d) : B(b), S(s), H(h), D(d) { allocate(); }
  DeviceProblem() { allocate(); }
  void allocate() {
    const size_t bytes = static_cast<size_t>(B * S * H * D * 2);
    for (void** p : {&q, &k, &v, &o}) {
      cuda_ok(cudaMalloc(p, bytes + 16), "cudaMalloc");
      cuda_ok(cudaMemset(*p, 0, bytes + 16), "memset");
    }
  }
  ~DeviceProblem() {
    for (void* p : {q, k, v, o}) cudaFree(p);
  }
  fa::TensorView view(void* p, int64_t offset_bytes = 0) const {
    return fa::TensorView::contiguous(static_cast<char*>(p) + offset_bytes, DType::bf16, {B, S, H, D},
                                      {fa::DeviceType::cuda, 0});
  }
};

void expect_refused(const std::function<void()>& call, const std::string& argument) {
  try {
    call();
    ADD_FAILURE() << "expected a refusal naming '" << argument << "'";
  } catch (const fa::Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

TEST(CudaErrors, RefusesWhatTheKernelsCannotRun) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  DeviceProblem d;
  fa::Options opt;
  opt.backend = fa::Backend::cuda;
  std::vector<uint16_t> host(static_cast<size_t>(d.B * d.S * d.H * d.D));
  auto host_view = fa::TensorView::contiguous(host.data(), DType::bf16, {d.B, d.S, d.H, d.D},
                                              {fa::DeviceType::cuda, 0});
  // Host memory labelled as CUDA memory.
  expect_refused([&] { fa::forward(host_view, d.view(d.k), d.view(d.v), d.view(d.o), nullptr, opt); }, "q");
  // Base pointer off the 16-byte grid.
  expect_refused([&] { fa::forward(d.view(d.q, 2), d.view(d.k), d.view(d.v), d.view(d.o), nullptr, opt); }, "q");
  // Host tensors with backend cuda.
  auto cpu_view = fa::TensorView::contiguous(host.data(), DType::bf16, {d.B, d.S, d.H, d.D});
  expect_refused([&] { fa::forward(cpu_view, cpu_view, cpu_view, cpu_view, nullptr, opt); }, "backend");
  // Head dim that is not a multiple of 8.
  auto odd = fa::TensorView::contiguous(d.q, DType::bf16, {1, 8, 1, 12}, {fa::DeviceType::cuda, 0});
  auto odd_o = fa::TensorView::contiguous(d.o, DType::bf16, {1, 8, 1, 12}, {fa::DeviceType::cuda, 0});
  expect_refused([&] { fa::forward(odd, odd, odd, odd_o, nullptr, opt); }, "q");
  // float32 is a CPU dtype.
  auto f32 = fa::TensorView::contiguous(d.q, DType::f32, {1, 8, 1, 16}, {fa::DeviceType::cuda, 0});
  auto f32_o = fa::TensorView::contiguous(d.o, DType::f32, {1, 8, 1, 16}, {fa::DeviceType::cuda, 0});
  try {
    fa::forward(f32, f32, f32, f32_o, nullptr, opt);
    ADD_FAILURE() << "float32 accepted";
  } catch (const fa::Error& e) {
    EXPECT_EQ(e.kind(), fa::ErrorKind::type) << e.what();
  }
  // A device that does not exist.
  auto far = d.view(d.q);
  far.device.index = 999;
  expect_refused([&] {
    auto k = d.view(d.k), v = d.view(d.v), o = d.view(d.o);
    k.device.index = v.device.index = o.device.index = 999;
    fa::forward(far, k, v, o, nullptr, opt);
  }, "q");
}

TEST(CudaGraph, ForwardAndBackwardCaptureAndReplay) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  DeviceProblem d, g;  // g: dout, dq, dk, dv in its q, k, v, o
  float* lse = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&lse), static_cast<size_t>(d.B * d.H * d.S) * sizeof(float)), "cudaMalloc");
  const auto lse_view = fa::TensorView::contiguous(lse, DType::f32, {d.B, d.H, d.S}, {fa::DeviceType::cuda, 0});
  cudaStream_t stream;
  cuda_ok(cudaStreamCreate(&stream), "stream");
  fa::Options opt;
  opt.backend = fa::Backend::cuda;
  opt.causal = true;
  opt.stream = stream;
  auto step = [&] {
    fa::forward(d.view(d.q), d.view(d.k), d.view(d.v), d.view(d.o), &lse_view, opt);
    fa::backward(g.view(g.o), d.view(d.q), d.view(d.k), d.view(d.v), d.view(d.o), lse_view,
                 g.view(g.q), g.view(g.k), g.view(g.v), opt);
  };
  step();  // warm-up outside capture (kernel attributes are set once)
  cuda_ok(cudaStreamSynchronize(stream), "warm-up");
  cudaGraph_t graph;
  cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  step();
  cuda_ok(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec;
  cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (int i = 0; i < 3; ++i) cuda_ok(cudaGraphLaunch(exec, stream), "replay");
  cuda_ok(cudaStreamSynchronize(stream), "sync");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(lse);
}

// A forward whose last round is cut (sm90/fwd_split.h; on a 132-SM Hopper GPU: 16
// tiles of 8 key tiles, each cut into 4 pieces), captured with its scratch and its
// merge, replays the direct call's output bit for bit.
TEST(CudaGraph, ForwardWithACutLastRoundReplaysTheSameOutput) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  DeviceProblem d(1, 1024, 2, 128);
  const size_t n = static_cast<size_t>(d.B * d.S * d.H * d.D);
  std::vector<uint16_t> host(n);
  uint64_t seed = 1;
  for (void* p : {d.q, d.k, d.v}) {
    fill_bf16(host, seed++);
    cuda_ok(cudaMemcpy(p, host.data(), n * 2, cudaMemcpyHostToDevice), "copy");
  }
  cudaStream_t stream;
  cuda_ok(cudaStreamCreate(&stream), "stream");
  fa::Options opt;
  opt.backend = fa::Backend::cuda;
  opt.stream = stream;
  auto out = [&] {
    cuda_ok(cudaStreamSynchronize(stream), "sync");
    std::vector<uint16_t> o(n);
    cuda_ok(cudaMemcpy(o.data(), d.o, n * 2, cudaMemcpyDeviceToHost), "copy back");
    return o;
  };
  fa::forward(d.view(d.q), d.view(d.k), d.view(d.v), d.view(d.o), nullptr, opt);
  const std::vector<uint16_t> direct = out();
  cuda_ok(cudaMemset(d.o, 0, n * 2), "clear");
  cudaGraph_t graph;
  cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  fa::forward(d.view(d.q), d.view(d.k), d.view(d.v), d.view(d.o), nullptr, opt);
  cuda_ok(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec;
  cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (int i = 0; i < 2; ++i) cuda_ok(cudaGraphLaunch(exec, stream), "replay");
  EXPECT_TRUE(out() == direct);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// 64-bit offsets: B=1, N=131072, H=64, D=256 bf16 is 2^31 elements per tensor.
// Heavy (32 GB of GPU memory, ~1 min): runs only with FLASHATTN_LARGE_TESTS=1.
// Rows and keys at the far end of the tensors are checked against float64.
TEST(CudaLarge, MoreThan2To31ElementsPerTensor) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const char* flag = std::getenv("FLASHATTN_LARGE_TESTS");
  if (flag == nullptr || std::string(flag) != "1") GTEST_SKIP() << "set FLASHATTN_LARGE_TESTS=1";
  const int64_t N = 131072, H = 64, D = 256, n = N * H * D;
  ASSERT_GT(n, int64_t(1) << 30);
  std::vector<uint16_t> q(n), k(n), v(n), dout(n);
  fill_bf16(q, 1);
  fill_bf16(k, 2);
  fill_bf16(v, 3);
  fill_bf16(dout, 4);
  std::vector<void*> bufs;
  auto upload = [&](const std::vector<uint16_t>* host) {
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, static_cast<size_t>(n) * 2), "cudaMalloc");
    if (host) cuda_ok(cudaMemcpy(p, host->data(), static_cast<size_t>(n) * 2, cudaMemcpyHostToDevice), "upload");
    bufs.push_back(p);
    return fa::TensorView::contiguous(p, DType::bf16, {1, N, H, D}, {fa::DeviceType::cuda, 0});
  };
  const auto Q = upload(&q), K = upload(&k), V = upload(&v), DO = upload(&dout);
  const auto O = upload(nullptr), DQ = upload(nullptr), DK = upload(nullptr), DV = upload(nullptr);
  float* lse_d = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&lse_d), static_cast<size_t>(H * N) * 4), "cudaMalloc");
  const auto L = fa::TensorView::contiguous(lse_d, DType::f32, {1, H, N}, {fa::DeviceType::cuda, 0});
  fa::Options opt;
  opt.backend = fa::Backend::cuda;
  opt.causal = true;
  fa::forward(Q, K, V, O, &L, opt);
  fa::backward(DO, Q, K, V, O, L, DQ, DK, DV, opt);
  cuda_ok(cudaDeviceSynchronize(), "run");
  auto row_of = [&](const fa::TensorView& t, int64_t i, int64_t h) {
    std::vector<uint16_t> r(D);
    cuda_ok(cudaMemcpy(r.data(), static_cast<uint16_t*>(t.data) + (i * H + h) * D, D * 2, cudaMemcpyDeviceToHost), "download");
    std::vector<double> out(D);
    for (int64_t c = 0; c < D; ++c) out[c] = fa::bf16_to_float(r[c]);
    return out;
  };
  auto at = [&](const std::vector<uint16_t>& x, int64_t i, int64_t h, int64_t c) {
    return double(fa::bf16_to_float(x[(i * H + h) * D + c]));
  };
  const double scale = 1.0 / 16.0;
  const int64_t i = N - 1;  // the last query row sees every key; the last key is seen by it alone
  for (int64_t h : {int64_t(0), H - 1}) {
    // float64 forward of row i, and its gradients.
    std::vector<double> s(N), o(D, 0.0), dq(D, 0.0);
    double m = -1e300, sum = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      double x = 0;
      for (int64_t c = 0; c < D; ++c) x += at(q, i, h, c) * at(k, j, h, c);
      s[j] = x * scale;
      m = std::max(m, s[j]);
    }
    for (int64_t j = 0; j < N; ++j) sum += std::exp(s[j] - m);
    double di = 0.0;
    std::vector<double> dp(N);
    for (int64_t j = 0; j < N; ++j) {
      s[j] = std::exp(s[j] - m) / sum;  // p
      for (int64_t c = 0; c < D; ++c) o[c] += s[j] * at(v, j, h, c);
    }
    for (int64_t c = 0; c < D; ++c) di += at(dout, i, h, c) * o[c];
    for (int64_t j = 0; j < N; ++j) {
      double x = 0;
      for (int64_t c = 0; c < D; ++c) x += at(dout, i, h, c) * at(v, j, h, c);
      const double ds = s[j] * (x - di) * scale;
      for (int64_t c = 0; c < D; ++c) dq[c] += ds * at(k, j, h, c);
      dp[j] = ds;
    }
    const auto got_o = row_of(O, i, h), got_dq = row_of(DQ, i, h), got_dk = row_of(DK, N - 1, h),
               got_dv = row_of(DV, N - 1, h);
    auto check = [&](const char* what, const std::vector<double>& got, const std::vector<double>& want) {
      double err = 0, mag = 0;
      for (int64_t c = 0; c < D; ++c) {
        err = std::max(err, std::fabs(got[c] - want[c]));
        mag = std::max(mag, std::fabs(want[c]));
      }
      EXPECT_LE(err, 0.02 * mag + 1e-4) << what << " head " << h << " max|err| " << err << " max|ref| " << mag;
    };
    check("out", got_o, o);
    check("dq", got_dq, dq);
    std::vector<double> dk(D), dv(D);  // key N-1: only row N-1 sees it
    for (int64_t c = 0; c < D; ++c) {
      dk[c] = dp[N - 1] * at(q, i, h, c);
      dv[c] = s[N - 1] * at(dout, i, h, c);
    }
    check("dk", got_dk, dk);
    check("dv", got_dv, dv);
  }
  for (void* p : bufs) cudaFree(p);
  cudaFree(lse_d);
}

// A bf16 [B=2, N=256, H, D=128] problem with 8 query and 2 kv heads, dO laid out
// like Q: what the Hopper kernels take, for the dispatch tests to vary.
fa::BwdParams hopper_problem() {
  fa::BwdParams p;
  p.dtype = fa::DType::bf16;
  p.batch = 2, p.seqlen_q = p.seqlen_k = 256, p.heads_q = 8, p.heads_kv = 2;
  p.head_dim_qk = p.head_dim_v = 128;
  p.q_row_stride = p.do_row_stride = 8 * 128, p.q_head_stride = p.do_head_stride = 128;
  p.q_batch_stride = p.do_batch_stride = 256 * 8 * 128;
  p.k_row_stride = p.v_row_stride = 2 * 128, p.k_head_stride = p.v_head_stride = 128;
  p.k_batch_stride = p.v_batch_stride = 256 * 2 * 128;
  p.o_row_stride = p.q_row_stride, p.o_head_stride = p.q_head_stride, p.o_batch_stride = p.q_batch_stride;
  p.softmax_scale = 0.088f;
  return p;
}

// What the Hopper forward takes, decided on the host (no GPU needed): inputs whose
// strides TMA cannot describe (broadcast, stride 0; O included) and dropout go to sm80.
TEST(CudaDispatch, HopperForwardTakesOnlyWhatTmaCanDescribe) {
  const fa::FwdParams p = hopper_problem();
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_128_BF16)
  EXPECT_TRUE(fa::sm90::supports_forward(p));
#endif
  fa::FwdParams broadcast = p;
  broadcast.k_head_stride = 0;  // one kv head expanded over two
  EXPECT_FALSE(fa::sm90::supports_forward(broadcast));
  fa::FwdParams batch_broadcast = p;
  batch_broadcast.v_batch_stride = 0;
  EXPECT_FALSE(fa::sm90::supports_forward(batch_broadcast));
  fa::FwdParams out_no_stride = p;  // O leaves through a TMA store too
  out_no_stride.o_head_stride = 0;
  EXPECT_FALSE(fa::sm90::supports_forward(out_no_stride));
  fa::FwdParams softcap = p;  // score modifiers run on the Hopper kernel; dropout does not
  softcap.softcap = 30.f;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_128_BF16)
  EXPECT_TRUE(fa::sm90::supports_forward(softcap));
#endif
  fa::FwdParams dropout = p;
  dropout.dropout_p = 0.1f;
  EXPECT_FALSE(fa::sm90::supports_forward(dropout));
  fa::FwdParams odd_dim = p;  // instantiated: 64, 96, 128, 192, 256; others run padded on sm80
  odd_dim.head_dim_qk = odd_dim.head_dim_v = 80;
  EXPECT_FALSE(fa::sm90::supports_forward(odd_dim));
  fa::FwdParams dim96 = p;
  dim96.head_dim_qk = dim96.head_dim_v = 96;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_96_BF16)
  EXPECT_TRUE(fa::sm90::supports_forward(dim96));
#else
  EXPECT_FALSE(fa::sm90::supports_forward(dim96));
#endif
  fa::FwdParams no_keys = p;
  no_keys.seqlen_k = 0;
  EXPECT_FALSE(fa::sm90::supports_forward(no_keys));
}

// The Hopper backward: the same TMA rule (dO included), head dims 64/128/256,
// softcap and ALiBi, the deterministic mode without a right window bound, no
// dropout.
TEST(CudaDispatch, HopperBackwardTakesOnlyWhatItImplements) {
  const fa::BwdParams p = hopper_problem();
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_128_BF16)
  EXPECT_TRUE(fa::sm90::supports_backward(p));
#endif
  fa::BwdParams deterministic = p;  // in the modifiers' kernels (ordered dQ adds)
  deterministic.deterministic = true;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_MODS_128_BF16)
  EXPECT_TRUE(fa::sm90::supports_backward(deterministic));
#else
  EXPECT_FALSE(fa::sm90::supports_backward(deterministic));
#endif
  fa::BwdParams deterministic_causal = deterministic;  // decreasing key-block order
  deterministic_causal.window_right = 0;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_MODS_128_BF16)
  EXPECT_TRUE(fa::sm90::supports_backward(deterministic_causal));
#endif
  fa::BwdParams broadcast_do = p;
  broadcast_do.do_head_stride = 0;
  EXPECT_FALSE(fa::sm90::supports_backward(broadcast_do));
  fa::BwdParams dropout = p;
  dropout.dropout_p = 0.1f;
  EXPECT_FALSE(fa::sm90::supports_backward(dropout));
  fa::BwdParams mods = p;  // softcap and ALiBi: kernels of their own
  mods.softcap = 30.f;
  const float slopes[1] = {0.5f};
  mods.alibi_slopes = slopes;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_MODS_128_BF16)
  EXPECT_TRUE(fa::sm90::supports_backward(mods));
#else
  EXPECT_FALSE(fa::sm90::supports_backward(mods));
#endif
  fa::BwdParams mods64 = mods;
  mods64.head_dim_qk = mods64.head_dim_v = 64;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_MODS_64_BF16)
  EXPECT_TRUE(fa::sm90::supports_backward(mods64));
#else
  EXPECT_FALSE(fa::sm90::supports_backward(mods64));
#endif
  fa::BwdParams hd192 = p;
  hd192.head_dim_qk = hd192.head_dim_v = 192;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_192_BF16)
  EXPECT_TRUE(fa::sm90::supports_backward(hd192));
#else
  EXPECT_FALSE(fa::sm90::supports_backward(hd192));
#endif
  fa::BwdParams hd256 = p;
  hd256.head_dim_qk = hd256.head_dim_v = 256;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_256_BF16)
  EXPECT_TRUE(fa::sm90::supports_backward(hd256));
#else
  EXPECT_FALSE(fa::sm90::supports_backward(hd256));
#endif
  fa::BwdParams hd96 = p;
  hd96.head_dim_qk = hd96.head_dim_v = 96;
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_96_BF16)
  EXPECT_TRUE(fa::sm90::supports_backward(hd96));
#else
  EXPECT_FALSE(fa::sm90::supports_backward(hd96));
#endif
  fa::BwdParams hd80 = p;  // no Hopper backward at other head dims
  hd80.head_dim_qk = hd80.head_dim_v = 80;
  EXPECT_FALSE(fa::sm90::supports_backward(hd80));
  fa::BwdParams dv_ne_dqk = p;
  dv_ne_dqk.head_dim_qk = 256;
  EXPECT_FALSE(fa::sm90::supports_backward(dv_ne_dqk));
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_SM90_BWD_128_BF16)
  fa::BwdParams causal = p;
  causal.window_right = 0;
  EXPECT_TRUE(fa::sm90::supports_backward(causal));
  fa::BwdParams window = p;
  window.window_left = 64, window.window_right = 0;
  EXPECT_TRUE(fa::sm90::supports_backward(window));
#endif
}

// The sm80 kernels' tiles by the device's shared memory per block (no GPU
// needed): 99 KiB (RTX 30/40/50, L4, L40S) compact, 163 KiB (A100) standard,
// 227 KiB (H100/H200) large; FLASHATTN_SM80_TILES can only lower the tier.
// The Hopper forward's cut of its last round (sm90/fwd_split.h), on 132 SMs.
TEST(Sm90FwdSplit, CutsOnlyAPartialLastRoundOfLongTiles) {
  namespace sm90 = flashattn::sm90;
  // The contract's grid at hd128, N = 16384 (128 x 192 tiles): 2048 tiles, 68 in
  // the last round, each cut into 3 (two rounds of pieces of 29 key tiles).
  const sm90::FwdSplit grid16k = sm90::plan_fwd_split(2048, 86, 132, 128, 192, 128);
  EXPECT_EQ(grid16k.whole, 1980);
  EXPECT_EQ(grid16k.cut, 68);
  EXPECT_EQ(grid16k.parts, 3);
  // hd256 at 16384 keys: 100 tiles in the last round, whose pieces' rows (65 MB at
  // 5 pieces) would cost more than the round saves.
  EXPECT_FALSE(sm90::plan_fwd_split(1024, 205, 132, 128, 80, 256).on());
  // hd128 at 8192 keys: 3 pieces would save 16% of the last round, measured a loss.
  EXPECT_FALSE(sm90::plan_fwd_split(2048, 43, 132, 128, 192, 128).on());
  // hd64 at 2048 keys (192 x 128 tiles): 44 tiles in the last round, cut into 3.
  EXPECT_EQ(sm90::plan_fwd_split(2816, 16, 132, 192, 128, 64).parts, 3);
  EXPECT_FALSE(sm90::plan_fwd_split(2048, 8, 132, 128, 128, 128).on());    // short rows: the merge costs more
  EXPECT_FALSE(sm90::plan_fwd_split(2752, 64, 132, 192, 128, 64).on());   // the last round 85% full
  EXPECT_FALSE(sm90::plan_fwd_split(132 * 4, 64, 132, 128, 128, 128).on());  // full rounds
  EXPECT_FALSE(sm90::plan_fwd_split(100, 3, 132, 128, 128, 128).on());     // pieces of two key tiles at least
  const sm90::FwdSplit few = sm90::plan_fwd_split(24, 24, 132, 128, 128, 128);  // every tile cut
  EXPECT_EQ(few.whole, 0);
  EXPECT_EQ(few.cut, 24);
  EXPECT_EQ(few.parts, 5);
  // Forced: that many pieces wherever a cut can be made, never more than the merge holds.
  EXPECT_EQ(sm90::plan_fwd_split(2048, 8, 132, 128, 128, 128, 4).parts, 4);
  EXPECT_EQ(sm90::plan_fwd_split(24, 64, 132, 128, 128, 128, 40).parts, sm90::kMaxSplitParts);
  EXPECT_FALSE(sm90::plan_fwd_split(24, 7, 132, 128, 128, 128, 4).on());
}

TEST(Sm80Tiles, TierFollowsSharedMemoryAndRequest) {
  using fa::sm80::pick_smem_tier;
  using fa::sm80::SmemTier;
  EXPECT_EQ(pick_smem_tier(101376, nullptr), SmemTier::compact);
  EXPECT_EQ(pick_smem_tier(49152, nullptr), SmemTier::compact);
  EXPECT_EQ(pick_smem_tier(166912, nullptr), SmemTier::standard);
  EXPECT_EQ(pick_smem_tier(232448, nullptr), SmemTier::large);
  EXPECT_EQ(pick_smem_tier(232448, ""), SmemTier::large);
  EXPECT_EQ(pick_smem_tier(232448, "compact"), SmemTier::compact);
  EXPECT_EQ(pick_smem_tier(232448, "standard"), SmemTier::standard);
  EXPECT_EQ(pick_smem_tier(166912, "large"), SmemTier::standard);  // never above the device
  EXPECT_EQ(pick_smem_tier(101376, "standard"), SmemTier::compact);
  EXPECT_EQ(pick_smem_tier(232448, "tiny"), SmemTier::large);  // unknown: ignored
}

// Which tiers have kernels of their own (the rest run the standard ones), as
// scripts/gen_instantiations.py writes them.
TEST(Sm80Tiles, TiersWithTilesOfTheirOwn) {
  using fa::sm80::SmemTier;
  for (int d : fa::sm80::kHeadDims) {
    EXPECT_EQ(fa::sm80::fwd_tier_differs(d, SmemTier::compact), d == 256) << d;
    EXPECT_FALSE(fa::sm80::fwd_tier_differs(d, SmemTier::large)) << d;
    EXPECT_TRUE(fa::sm80::bwd_tiles_differ(d, SmemTier::compact)) << d;
    EXPECT_EQ(fa::sm80::bwd_tiles_differ(d, SmemTier::large), d == 128 || d == 256) << d;
  }
}

// hd256's forward on H100 / H200 takes the compact tier's 64 x 64 tiles for
// problems without score modifiers whose rows see at most 8192 keys (no GPU needed).
TEST(Sm80Tiles, Hd256CompactTiles) {
  using fa::sm80::hd256_compact_tiles;
  using fa::sm80::SmemTier;
  fa::FwdParams p;
  p.seqlen_q = p.seqlen_k = 8192;
  p.softmax_scale = 0.0625f;
  EXPECT_TRUE(hd256_compact_tiles(p, 256, SmemTier::large));
  EXPECT_FALSE(hd256_compact_tiles(p, 128, SmemTier::large));
  EXPECT_FALSE(hd256_compact_tiles(p, 256, SmemTier::standard));  // one block per SM either way
  EXPECT_FALSE(hd256_compact_tiles(p, 256, SmemTier::compact));   // already its tiles
  fa::FwdParams causal = p;
  causal.window_right = 0;
  EXPECT_TRUE(hd256_compact_tiles(causal, 256, SmemTier::large));
  fa::FwdParams longer = p;
  longer.seqlen_k = 8193;  // the keys count, not the queries
  longer.seqlen_q = 128;
  EXPECT_FALSE(hd256_compact_tiles(longer, 256, SmemTier::large));
  longer.window_right = 0;  // bottom-right causal: the last row still sees every key
  EXPECT_FALSE(hd256_compact_tiles(longer, 256, SmemTier::large));
  fa::FwdParams capped = p;
  capped.softcap = 30.f;  // score modifiers keep their tiles
  EXPECT_FALSE(hd256_compact_tiles(capped, 256, SmemTier::large));
  fa::FwdParams window = longer;
  window.seqlen_q = window.seqlen_k = 65536;
  window.window_left = 1000;  // rows see 1001 keys
  EXPECT_TRUE(hd256_compact_tiles(window, 256, SmemTier::large));
  window.window_right = -1;  // unbounded on the right: every later key
  EXPECT_FALSE(hd256_compact_tiles(window, 256, SmemTier::large));
  window.window_left = window.window_right = INT64_MAX;  // no overflow: a row sees every key
  EXPECT_FALSE(hd256_compact_tiles(window, 256, SmemTier::large));
  // The edges: a row sees left + right + 1 keys.
  auto sees = [&](int64_t left, int64_t right) {
    window.window_left = left;
    window.window_right = right;
    return hd256_compact_tiles(window, 256, SmemTier::large);
  };
  EXPECT_TRUE(sees(8191, 0));
  EXPECT_TRUE(sees(4096, 4095));
  EXPECT_FALSE(sees(8192, 0));
  EXPECT_FALSE(sees(4096, 4096));
  EXPECT_FALSE(sees(0, 8192));
  fa::FwdParams short_keys = p;
  short_keys.seqlen_q = short_keys.seqlen_k = 4096;
  short_keys.window_left = INT64_MAX;  // clamped to the keys: rows still see at most 4096
  short_keys.window_right = 0;
  EXPECT_TRUE(hd256_compact_tiles(short_keys, 256, SmemTier::large));
  fa::FwdParams alibi = p;
  float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
  alibi.alibi_slopes = slopes;  // ALiBi keeps its tiles too
  EXPECT_FALSE(hd256_compact_tiles(alibi, 256, SmemTier::large));
}

// The tier a GPU runs follows its limit, and the request lowers it.
TEST(CudaDispatch, Sm80TierOfTheDevice) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  int optin = 0;
  cuda_ok(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), "attribute");
  const char* saved = std::getenv("FLASHATTN_SM80_TILES");
  const std::string restore = saved != nullptr ? saved : "";
  unsetenv("FLASHATTN_SM80_TILES");
  EXPECT_EQ(fa::sm80::device_smem_tier(0), fa::sm80::pick_smem_tier(optin, nullptr));
  setenv("FLASHATTN_SM80_TILES", "compact", 1);
  EXPECT_EQ(fa::sm80::device_smem_tier(0), fa::sm80::SmemTier::compact);
  if (saved != nullptr) setenv("FLASHATTN_SM80_TILES", restore.c_str(), 1);
  else unsetenv("FLASHATTN_SM80_TILES");
}

}  // namespace
}  // namespace fatest

#endif  // FLASHATTN_WITH_CUDA
