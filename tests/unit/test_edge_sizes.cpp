// Edge sizes: zero-length sides (batched Sq = 0 or Sk = 0 are also in the
// length tables), an empty packed batch, head dims 1 and 256, odd head dims
// (the CPU backends take any positive size).
//
// Zero-size outputs were refused as "output strides overlap" before 8b8fa94
// (row-major strides over a 0 dim are 0); these tests keep that fixed.
#include "cases.h"

namespace fatest {
namespace {

TEST(ZeroSize, EmptyBatch) {
  for (DType dt : {DType::f32, DType::bf16}) {
    check_forward(Case("empty_batch").batch(0).seq(4, 4).heads(2, 1).type(dt), cpu_target());
    check_backward(Case("empty_batch").batch(0).seq(4, 4).heads(2, 1).type(dt), cpu_target());
  }
}

// The views a caller builds with TensorView::contiguous for empty problems.
TEST(ZeroSize, ContiguousZeroSizeOutputsAccepted) {
  std::vector<std::vector<float>> bufs;
  auto view = [&](std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    bufs.emplace_back(static_cast<size_t>(n) + 1, 0.5f);
    return fa::TensorView::contiguous(bufs.back().data(), DType::f32, shape);
  };
  bufs.reserve(16);
  // Sq = 0: out [2, 0, 2, 8], lse [2, 2, 0].
  const fa::TensorView q0 = view({2, 0, 2, 8}), k = view({2, 3, 1, 8}), v = view({2, 3, 1, 8});
  const fa::TensorView out0 = view({2, 0, 2, 8}), lse0 = view({2, 2, 0});
  EXPECT_NO_THROW(fa::forward(q0, k, v, out0, &lse0, {}));
  // Sk = 0: dk, dv [2, 0, 1, 8]; dq is zero.
  const fa::TensorView q = view({2, 3, 2, 8}), k0 = view({2, 0, 1, 8}), v0 = view({2, 0, 1, 8});
  const fa::TensorView out = view({2, 3, 2, 8}), lse = view({2, 2, 3}), dout = view({2, 3, 2, 8});
  const fa::TensorView dq = view({2, 3, 2, 8}), dk0 = view({2, 0, 1, 8}), dv0 = view({2, 0, 1, 8});
  EXPECT_NO_THROW(fa::forward(q, k0, v0, out, &lse, {}));
  EXPECT_NO_THROW(fa::backward(dout, q, k0, v0, out, lse, dq, dk0, dv0, {}));
  const float* dqp = static_cast<const float*>(dq.data);
  for (int64_t e = 0; e < dq.numel(); ++e) ASSERT_EQ(dqp[e], 0.f);
}

// cu_seqlens = [0] (no sequences), lse [2, 0].
TEST(ZeroSize, NoSequencesWithLse) {
  HostTensor q = make_tensor(DType::f32, {0, 2, 8}), k = make_tensor(DType::f32, {0, 1, 8});
  HostTensor v = make_tensor(DType::f32, {0, 1, 8}), out = make_tensor(DType::f32, {0, 2, 8});
  HostTensor lse = make_tensor(DType::f32, {2, 0}), cu = make_tensor(DType::i32, {1});
  cu.set(0, 0);
  const fa::Varlen vl{cu.view(), cu.view(), 0, 0};
  const fa::TensorView lv = lse.view();
  for (const Target& t : {cpu_target(), auto_target(), reference_target()}) {
    fa::Options o;
    o.backend = t.backend;
    EXPECT_NO_THROW(fa::forward_varlen(q.view(), k.view(), v.view(), out.view(), &lv, vl, o)) << t.name;
    HostTensor dq = make_tensor(DType::f32, {0, 2, 8}), dk = make_tensor(DType::f32, {0, 1, 8});
    HostTensor dv = make_tensor(DType::f32, {0, 1, 8});
    EXPECT_NO_THROW(fa::backward_varlen(out.view(), q.view(), k.view(), v.view(), out.view(), lse.view(),
                                        dq.view(), dk.view(), dv.view(), vl, o)) << t.name;
    for (const HostTensor* x : {&out, &lse, &dq, &dk, &dv}) EXPECT_TRUE(x->gaps_intact()) << t.name;
  }
}

class EdgeDims : public ::testing::TestWithParam<CaseParam> {};
TEST_P(EdgeDims, ForwardMatchesReference) { check_forward(std::get<0>(GetParam()), std::get<1>(GetParam())); }
TEST_P(EdgeDims, BackwardMatchesReference) { check_backward(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(
    Dims, EdgeDims,
    ::testing::ValuesIn(on_cpu(in_dtypes({
        Case("head_dim_1").seq(20, 25).heads(2, 1).dims(1, 1).causal_mask(),
        Case("dqk_1_dv_7").seq(20, 25).dims(1, 7),
        Case("dqk_13_dv_1").seq(25, 20).heads(2, 2).dims(13, 1).win(3, 3),
        Case("head_dim_256").seq(20, 70).heads(2, 1).dims(256, 256).causal_mask(),
        Case("dqk_256_dv_64").seq(33, 17).dims(256, 64),
        Case("head_dim_300_cpu").seq(9, 12).dims(300, 20),
        Case("many_heads").seq(9, 12).heads(16, 4).dims(8, 8),
        Case("group_8").seq(21, 21).heads(8, 1).dims(8, 8).causal_mask(),
    }))),
    CaseParamName());

}  // namespace
}  // namespace fatest
