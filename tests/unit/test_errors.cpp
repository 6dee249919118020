// Refusals: every invalid argument is refused before any work with the right
// ErrorKind and the right argument() name, and the output buffers are left
// exactly as they were (they are filled with a NaN sentinel before the call).
// Each bad input is one row of a table, run on every host target.
#include <cstring>

#include "harness.h"

namespace fatest {
namespace {

using fa::ErrorKind;

enum class Api { forward, forward_varlen, backward, backward_varlen };

const char* api_name(Api a) {
  switch (a) {
    case Api::forward: return "forward";
    case Api::forward_varlen: return "forward_varlen";
    case Api::backward: return "backward";
    case Api::backward_varlen: return "backward_varlen";
  }
  return "?";
}

bool is_varlen(Api a) { return a == Api::forward_varlen || a == Api::backward_varlen; }

// A valid call, as tensors and views that error cases then break one at a time.
// Batched: B=2, Sq=5, Sk=7, Hq=4, Hkv=2, Dqk=8, Dv=6. Packed: lengths q {3, 0, 4},
// k {5, 2, 0}.
struct Fix {
  static constexpr int64_t B = 2, Sq = 5, Sk = 7, Hq = 4, Hkv = 2, Dqk = 8, Dv = 6;
  HostTensor q, k, v, out, lse, dout, dq, dk, dv, alibi, alibi_bh, cu_q, cu_k, used, table;
  fa::TensorView Q, K, V, O, L, dO, dQ, dK, dV, CQ, CK;
  fa::Options opt;
  int64_t max_q = 4, max_k = 5;

  explicit Fix(bool packed) {
    auto sh = [&](int64_t rows_b, int64_t seq, int64_t h, int64_t d) -> std::vector<int64_t> {
      if (packed) return {rows_b, h, d};
      return {B, seq, h, d};
    };
    const int64_t tq = 7, tk = 7;
    q = make_tensor(DType::f32, sh(tq, Sq, Hq, Dqk));
    k = make_tensor(DType::f32, sh(tk, Sk, Hkv, Dqk));
    v = make_tensor(DType::f32, sh(tk, Sk, Hkv, Dv));
    dout = make_tensor(DType::f32, sh(tq, Sq, Hq, Dv));
    out = make_tensor(DType::f32, sh(tq, Sq, Hq, Dv));
    dq = make_tensor(DType::f32, q.shape);
    dk = make_tensor(DType::f32, k.shape);
    dv = make_tensor(DType::f32, v.shape);
    lse = packed ? make_tensor(DType::f32, {Hq, tq}) : make_tensor(DType::f32, {B, Hq, Sq});
    alibi = make_tensor(DType::f32, {Hq});
    alibi_bh = make_tensor(DType::f32, {packed ? 3 : B, Hq});
    int i = 0;
    for (HostTensor* t : {&q, &k, &v, &dout, &alibi, &alibi_bh})
      for (int64_t e = 0; e < t->numel(); ++e) t->set(e, 0.25 * std::sin(0.7 * ++i));
    // Backward inputs that a forward would produce (values don't matter for refusals).
    for (int64_t e = 0; e < out.numel(); ++e) out.set(e, 0.1);
    for (int64_t e = 0; e < lse.numel(); ++e) lse.set(e, 1.0);
    cu_q = make_tensor(DType::i32, {4});
    cu_k = make_tensor(DType::i32, {4});
    const int cq[4] = {0, 3, 3, 7}, ck[4] = {0, 5, 7, 7};
    for (int b = 0; b < 4; ++b) {
      cu_q.set(b, cq[b]);
      cu_k.set(b, ck[b]);
    }
    // seqused_k within each sequence's key rows: 7 batched; 5, 2, 0 packed.
    used = make_tensor(DType::i32, {packed ? 3 : B});
    const int uk[3] = {4, 2, 0};
    for (int64_t b = 0; b < used.numel(); ++b) used.set(b, packed ? uk[b] : 7 - 3 * b);
    table = make_tensor(DType::i32, {packed ? 3 : B, 1});
    for (int64_t e = 0; e < table.numel(); ++e) table.set(e, 0);
    Q = q.view(); K = k.view(); V = v.view(); O = out.view(); L = lse.view();
    dO = dout.view(); dQ = dq.view(); dK = dk.view(); dV = dv.view();
    CQ = cu_q.view(); CK = cu_k.view();
  }

  // Output buffers, NaN-filled until the library writes them.
  std::vector<const HostTensor*> outputs() const { return {&out, &lse, &dq, &dk, &dv}; }

  void all_on(fa::Device d) {
    for (fa::TensorView* t : {&Q, &K, &V, &O, &L, &dO, &dQ, &dK, &dV, &CQ, &CK}) t->device = d;
  }

  void call(Api api) {
    const fa::Varlen vl{CQ, CK, max_q, max_k};
    switch (api) {
      case Api::forward: return fa::forward(Q, K, V, O, &L, opt);
      case Api::forward_varlen: return fa::forward_varlen(Q, K, V, O, &L, vl, opt);
      case Api::backward: return fa::backward(dO, Q, K, V, O, L, dQ, dK, dV, opt);
      case Api::backward_varlen: return fa::backward_varlen(dO, Q, K, V, O, L, dQ, dK, dV, vl, opt);
    }
  }
};

const fa::Device kCuda0{fa::DeviceType::cuda, 0};
const fa::Device kCuda1{fa::DeviceType::cuda, 1};

struct ErrorCase {
  std::string name;
  std::vector<Api> apis;
  std::function<void(Fix&)> mutate;
  ErrorKind kind;
  std::string argument;
};

const std::vector<Api> kFwd{Api::forward};
const std::vector<Api> kBoth{Api::forward, Api::backward};
const std::vector<Api> kAll{Api::forward, Api::forward_varlen, Api::backward, Api::backward_varlen};
const std::vector<Api> kPacked{Api::forward_varlen, Api::backward_varlen};
const std::vector<Api> kBwd{Api::backward};
const std::vector<Api> kFwdAll{Api::forward, Api::forward_varlen};
const std::vector<Api> kFwdPacked{Api::forward_varlen};
const std::vector<Api> kBwdAll{Api::backward, Api::backward_varlen};

constexpr ErrorKind kValue = ErrorKind::value, kType = ErrorKind::type;

std::vector<ErrorCase> error_cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  return {
      // ---- ranks
      {"q_wrong_rank", kAll, [](Fix& f) { f.Q.ndim = f.Q.ndim - 1; }, kValue, "q"},
      {"k_wrong_rank", kAll, [](Fix& f) { f.K.ndim = f.K.ndim - 1; }, kValue, "k"},
      {"v_wrong_rank", kAll, [](Fix& f) { f.V.ndim = 2; }, kValue, "v"},
      {"out_wrong_rank", kAll, [](Fix& f) { f.O.ndim = f.O.ndim - 1; }, kValue, "out"},
      {"lse_wrong_rank", kAll, [](Fix& f) { f.L.ndim = 1; }, kValue, "lse"},
      {"lse_missing_in_backward", kBwdAll, [](Fix& f) { f.L = fa::TensorView{}; }, kValue, "lse"},
      {"packed_q_rank4", kPacked, [](Fix& f) { f.Q.ndim = 4; f.Q.shape[3] = 1; f.Q.stride[3] = 1; }, kValue, "q"},
      {"packed_lse_batched_layout", kPacked, [](Fix& f) { f.L.ndim = 3; f.L.shape[2] = 1; f.L.stride[2] = 1; }, kValue, "lse"},
      {"dout_wrong_rank", kBwdAll, [](Fix& f) { f.dO.ndim = 2; }, kValue, "dout"},
      {"dq_wrong_rank", kBwdAll, [](Fix& f) { f.dQ.ndim = f.dQ.ndim - 1; }, kValue, "dq"},
      // ---- shapes
      {"k_batch_mismatch", kBoth, [](Fix& f) { f.K.shape[0] = 1; }, kValue, "k"},
      {"v_batch_mismatch", kBoth, [](Fix& f) { f.V.shape[0] = 1; }, kValue, "v"},
      {"out_batch_mismatch", kBoth, [](Fix& f) { f.O.shape[0] = 1; }, kValue, "out"},
      {"k_head_dim_mismatch", kAll, [](Fix& f) { f.K.shape[f.K.ndim - 1] = 4; }, kValue, "k"},
      {"v_seqlen_mismatch", kAll, [](Fix& f) { f.V.shape[f.V.ndim - 3] -= 1; }, kValue, "v"},
      {"v_heads_mismatch", kAll, [](Fix& f) { f.V.shape[f.V.ndim - 2] = 1; }, kValue, "v"},
      {"out_seqlen_mismatch", kAll, [](Fix& f) { f.O.shape[f.O.ndim - 3] -= 1; }, kValue, "out"},
      {"out_heads_mismatch", kAll, [](Fix& f) { f.O.shape[f.O.ndim - 2] = 2; }, kValue, "out"},
      {"out_head_dim_mismatch", kAll, [](Fix& f) { f.O.shape[f.O.ndim - 1] = 5; }, kValue, "out"},
      {"hq_not_multiple_of_hkv", kBoth, [](Fix& f) {
         f.Q.shape[2] = 3; f.O.shape[2] = 3; f.L.shape[1] = 3; f.dO.shape[2] = 3; f.dQ.shape[2] = 3;
       }, kValue, "k"},
      {"zero_query_heads", kFwd, [](Fix& f) { f.Q.shape[2] = 0; f.O.shape[2] = 0; f.L.shape[1] = 0; }, kValue, "q"},
      {"zero_kv_heads", kFwd, [](Fix& f) { f.K.shape[2] = 0; f.V.shape[2] = 0; }, kValue, "k"},
      {"zero_head_dim", kFwd, [](Fix& f) { f.Q.shape[3] = 0; f.K.shape[3] = 0; }, kValue, "q"},
      {"zero_value_dim", kFwd, [](Fix& f) { f.V.shape[3] = 0; f.O.shape[3] = 0; }, kValue, "v"},
      {"negative_size", kAll, [](Fix& f) { f.Q.shape[f.Q.ndim - 3] = -1; }, kValue, "q"},
      {"lse_wrong_seqlen", kBoth, [](Fix& f) { f.L.shape[2] = 4; }, kValue, "lse"},
      {"lse_wrong_heads", kAll, [](Fix& f) { f.L.shape[f.L.ndim - 2] = 2; }, kValue, "lse"},
      {"lse_wrong_batch", kBoth, [](Fix& f) { f.L.shape[0] = 1; }, kValue, "lse"},
      {"packed_lse_wrong_total", kPacked, [](Fix& f) { f.L.shape[1] = 6; }, kValue, "lse"},
      {"dout_shape_mismatch", kBwdAll, [](Fix& f) { f.dO.shape[f.dO.ndim - 1] = 5; }, kValue, "dout"},
      {"dq_shape_mismatch", kBwdAll, [](Fix& f) { f.dQ.shape[f.dQ.ndim - 1] = 4; }, kValue, "dq"},
      {"dk_shape_mismatch", kBwdAll, [](Fix& f) { f.dK.shape[f.dK.ndim - 3] -= 1; }, kValue, "dk"},
      {"dv_shape_mismatch", kBwdAll, [](Fix& f) { f.dV.shape[f.dV.ndim - 2] = 1; }, kValue, "dv"},
      // ---- dtypes (TypeError kind)
      {"k_dtype_mismatch", kAll, [](Fix& f) { f.K.dtype = DType::f16; }, kType, "k"},
      {"v_dtype_mismatch", kAll, [](Fix& f) { f.V.dtype = DType::bf16; }, kType, "v"},
      {"out_dtype_mismatch", kAll, [](Fix& f) { f.O.dtype = DType::f16; }, kType, "out"},
      {"q_int32", kAll, [](Fix& f) { f.Q.dtype = DType::i32; }, kType, "q"},
      {"all_int32", kBoth, [](Fix& f) { for (auto* t : {&f.Q, &f.K, &f.V, &f.O}) t->dtype = DType::i32; }, kType, "q"},
      {"lse_dtype_f16", kAll, [](Fix& f) { f.L.dtype = DType::f16; }, kType, "lse"},
      {"lse_dtype_int32", kAll, [](Fix& f) { f.L.dtype = DType::i32; }, kType, "lse"},
      {"dout_dtype_mismatch", kBwdAll, [](Fix& f) { f.dO.dtype = DType::f16; }, kType, "dout"},
      {"dq_dtype_mismatch", kBwdAll, [](Fix& f) { f.dQ.dtype = DType::bf16; }, kType, "dq"},
      {"dk_dtype_mismatch", kBwdAll, [](Fix& f) { f.dK.dtype = DType::f16; }, kType, "dk"},
      {"dv_dtype_mismatch", kBwdAll, [](Fix& f) { f.dV.dtype = DType::i32; }, kType, "dv"},
      // ---- strides and data
      {"q_last_dim_strided", kAll, [](Fix& f) { f.Q.stride[f.Q.ndim - 1] = 2; }, kValue, "q"},
      {"v_last_dim_strided", kAll, [](Fix& f) { f.V.stride[f.V.ndim - 1] = 0; }, kValue, "v"},
      {"out_last_dim_strided", kAll, [](Fix& f) { f.O.stride[f.O.ndim - 1] = 2; }, kValue, "out"},
      {"k_negative_stride", kAll, [](Fix& f) { f.K.stride[f.K.ndim - 3] *= -1; }, kValue, "k"},
      {"out_negative_stride", kAll, [](Fix& f) { f.O.stride[0] = -f.O.stride[0]; }, kValue, "out"},
      {"q_null_data", kAll, [](Fix& f) { f.Q.data = nullptr; }, kValue, "q"},
      {"v_null_data", kAll, [](Fix& f) { f.V.data = nullptr; }, kValue, "v"},
      {"out_null_data", kAll, [](Fix& f) { f.O.data = nullptr; }, kValue, "out"},
      {"lse_null_data", kAll, [](Fix& f) { f.L.data = nullptr; }, kValue, "lse"},
      {"dq_null_data", kBwdAll, [](Fix& f) { f.dQ.data = nullptr; }, kValue, "dq"},
      {"out_overlapping_heads", kAll, [](Fix& f) { f.O.stride[f.O.ndim - 2] = 0; }, kValue, "out"},
      {"out_overlapping_rows", kAll, [](Fix& f) { f.O.stride[f.O.ndim - 3] = 1; }, kValue, "out"},
      {"lse_overlapping", kFwd, [](Fix& f) { f.L.stride[1] = 1; }, kValue, "lse"},
      {"dk_overlapping", kBwdAll, [](Fix& f) { f.dK.stride[f.dK.ndim - 2] = 0; }, kValue, "dk"},
      {"dq_overlapping", kBwdAll, [](Fix& f) { f.dQ.stride[f.dQ.ndim - 3] = 2; }, kValue, "dq"},
      // ---- alibi
      {"alibi_wrong_length", kAll, [](Fix& f) { auto a = f.alibi.view(); a.shape[0] = Fix::Hq + 1; f.opt.alibi_slopes = a; }, kValue, "alibi_slopes"},
      {"alibi_wrong_batch", kBoth, [](Fix& f) { auto a = f.alibi_bh.view(); a.shape[0] = 1; f.opt.alibi_slopes = a; }, kValue, "alibi_slopes"},
      {"alibi_wrong_heads_2d", kAll, [](Fix& f) { auto a = f.alibi_bh.view(); a.shape[1] = 2; f.opt.alibi_slopes = a; }, kValue, "alibi_slopes"},
      {"alibi_rank3", kAll, [](Fix& f) { auto a = f.alibi_bh.view(); a.ndim = 3; a.shape[2] = 1; a.stride[2] = 1; f.opt.alibi_slopes = a; }, kValue, "alibi_slopes"},
      {"alibi_dtype_f16", kAll, [](Fix& f) { auto a = f.alibi.view(); a.dtype = DType::f16; f.opt.alibi_slopes = a; }, kType, "alibi_slopes"},
      {"alibi_null_data", kAll, [](Fix& f) { auto a = f.alibi.view(); a.data = nullptr; f.opt.alibi_slopes = a; }, kValue, "alibi_slopes"},
      {"alibi_strided", kAll, [](Fix& f) { auto a = f.alibi.view(); a.stride[0] = 2; a.shape[0] = Fix::Hq; f.opt.alibi_slopes = a; }, kValue, "alibi_slopes"},
      {"alibi_other_device", kAll, [](Fix& f) { auto a = f.alibi.view(); a.device = kCuda0; f.opt.alibi_slopes = a; }, kValue, "alibi_slopes"},
      // ---- options
      {"window_left_minus2", kAll, [](Fix& f) { f.opt.window = {-2, 0}; }, kValue, "window"},
      {"window_right_minus5", kAll, [](Fix& f) { f.opt.window = {3, -5}; }, kValue, "window"},
      {"dropout_one", kAll, [](Fix& f) { f.opt.dropout_p = 1.f; }, kValue, "dropout_p"},
      {"dropout_negative", kAll, [](Fix& f) { f.opt.dropout_p = -0.1f; }, kValue, "dropout_p"},
      {"dropout_nan", kAll, [nan](Fix& f) { f.opt.dropout_p = nan; }, kValue, "dropout_p"},
      {"dropout_above_one", kBoth, [](Fix& f) { f.opt.dropout_p = 1.5f; }, kValue, "dropout_p"},
      {"softmax_scale_nan", kAll, [nan](Fix& f) { f.opt.softmax_scale = nan; }, kValue, "softmax_scale"},
      {"softmax_scale_inf", kAll, [inf](Fix& f) { f.opt.softmax_scale = inf; }, kValue, "softmax_scale"},
      {"softmax_scale_minus_inf", kBoth, [inf](Fix& f) { f.opt.softmax_scale = -inf; }, kValue, "softmax_scale"},
      {"softcap_negative", kAll, [](Fix& f) { f.opt.softcap = -1.f; }, kValue, "softcap"},
      {"softcap_nan", kAll, [nan](Fix& f) { f.opt.softcap = nan; }, kValue, "softcap"},
      {"softcap_inf", kBoth, [inf](Fix& f) { f.opt.softcap = inf; }, kValue, "softcap"},
      {"num_threads_negative", kAll, [](Fix& f) { f.opt.num_threads = -1; }, kValue, "num_threads"},
      // A million threads, each with its own scratch, crashed the process (Python fuzzing).
      {"num_threads_million", kAll, [](Fix& f) { f.opt.num_threads = 1000000; }, kValue, "num_threads"},
      // ---- devices and backends
      {"k_other_device", kAll, [](Fix& f) { f.K.device = kCuda0; }, kValue, "k"},
      {"v_other_device", kAll, [](Fix& f) { f.V.device = kCuda0; }, kValue, "v"},
      {"out_other_device", kAll, [](Fix& f) { f.O.device = kCuda0; }, kValue, "out"},
      {"lse_other_device", kAll, [](Fix& f) { f.L.device = kCuda0; }, kValue, "lse"},
      {"dout_other_device", kBwdAll, [](Fix& f) { f.dO.device = kCuda0; }, kValue, "dout"},
      {"dv_other_device", kBwdAll, [](Fix& f) { f.dV.device = kCuda0; }, kValue, "dv"},
      {"v_other_cuda_ordinal", kAll, [](Fix& f) { f.all_on(kCuda0); f.V.device = kCuda1; f.opt.backend = fa::Backend::cuda; }, kValue, "v"},
      {"cpu_backend_cuda_tensors", kAll, [](Fix& f) { f.all_on(kCuda0); f.opt.backend = fa::Backend::cpu; }, kValue, "backend"},
      {"reference_backend_cuda_tensors", kAll, [](Fix& f) { f.all_on(kCuda0); f.opt.backend = fa::Backend::reference; }, kValue, "backend"},
      // ---- seqused_k (forward only)
      {"seqused_k_float", kFwdAll, [](Fix& f) { auto u = f.used.view(); u.dtype = DType::f32; f.opt.seqused_k = u; }, kType, "seqused_k"},
      {"seqused_k_wrong_length", kFwdAll, [](Fix& f) { auto u = f.used.view(); u.shape[0] = 1; f.opt.seqused_k = u; }, kValue, "seqused_k"},
      {"seqused_k_rank2", kFwdAll, [](Fix& f) { auto u = f.used.view(); u.ndim = 2; u.shape[1] = 1; u.stride[1] = 1; f.opt.seqused_k = u; }, kValue, "seqused_k"},
      {"seqused_k_strided", kFwdAll, [](Fix& f) { auto u = f.used.view(); u.stride[0] = 0; f.opt.seqused_k = u; }, kValue, "seqused_k"},
      {"seqused_k_other_device", kFwdAll, [](Fix& f) { auto u = f.used.view(); u.device = kCuda0; f.opt.seqused_k = u; }, kValue, "seqused_k"},
      {"seqused_k_null", kFwdAll, [](Fix& f) { auto u = f.used.view(); u.data = nullptr; f.opt.seqused_k = u; }, kValue, "seqused_k"},
      {"seqused_k_above_rows", kFwdAll, [](Fix& f) { f.used.set(1, Fix::Sk + 1); f.opt.seqused_k = f.used.view(); }, kValue, "seqused_k"},
      {"seqused_k_negative", kFwdAll, [](Fix& f) { f.used.set(0, -1); f.opt.seqused_k = f.used.view(); }, kValue, "seqused_k"},
      {"seqused_k_above_sequence", kFwdPacked, [](Fix& f) { f.used.set(1, 3); f.opt.seqused_k = f.used.view(); }, kValue, "seqused_k"},
      // New rows that share memory with the cache they go into: refused on cuda by name (a
      // GPU copies them with no stage in between), with or without a GPU.
      {"k_new_sharing_the_cache_on_cuda", kFwd, [](Fix& f) {
         f.all_on(kCuda0); f.opt.backend = fa::Backend::cuda;
         auto u = f.used.view(); u.device = kCuda0; f.opt.seqused_k = u;
         fa::TensorView kn = f.K, vn = f.V;
         kn.shape[1] = vn.shape[1] = 1;
         f.opt.k_new = kn; f.opt.v_new = vn;
       }, ErrorKind::unsupported, "k_new"},
      {"k_new_more_rows_than_the_cache", kFwd, [](Fix& f) {
         f.opt.seqused_k = f.used.view();
         fa::TensorView kn = f.K, vn = f.V;  // views past their buffers: refused before any read
         kn.shape[1] = vn.shape[1] = Fix::Sk + 1;
         f.opt.k_new = kn; f.opt.v_new = vn;
       }, kValue, "k_new"},
      // A paged pool with no block: the GPU kernels clamp entries into the pool (the host
      // does not read a table in device memory), so one block at least.
      {"block_table_empty_pool_on_cuda", kFwd, [](Fix& f) {
         f.all_on(kCuda0); f.opt.backend = fa::Backend::cuda;
         auto u = f.used.view(); u.device = kCuda0; f.opt.seqused_k = u;
         auto t = f.table.view(); t.device = kCuda0; f.opt.block_table = t;
         f.K.shape[0] = f.V.shape[0] = 0;
         f.K.shape[1] = f.V.shape[1] = 64;
       }, kValue, "k"},
      // Index arrays in memory the call writes: refused on cuda (the kernels read them while
      // they write; the host backends read them once and take such calls).
      {"seqused_k_inside_out_on_cuda", kFwdAll, [](Fix& f) {
         f.all_on(kCuda0); f.opt.backend = fa::Backend::cuda;
         auto u = f.used.view(); u.device = kCuda0; u.data = f.O.data; f.opt.seqused_k = u;
       }, ErrorKind::unsupported, "seqused_k"},
      {"seqused_k_inside_lse_on_cuda", kFwd, [](Fix& f) {
         f.all_on(kCuda0); f.opt.backend = fa::Backend::cuda;
         auto u = f.used.view(); u.device = kCuda0; u.data = f.L.data; f.opt.seqused_k = u;
       }, ErrorKind::unsupported, "seqused_k"},
      {"block_table_inside_out_on_cuda", kFwd, [](Fix& f) {
         f.all_on(kCuda0); f.opt.backend = fa::Backend::cuda;
         auto u = f.used.view(); u.device = kCuda0; f.opt.seqused_k = u;
         auto t = f.table.view(); t.device = kCuda0; t.data = f.O.data; f.opt.block_table = t;
         f.K.shape[0] = f.V.shape[0] = 2;
         f.K.shape[1] = f.V.shape[1] = 64;
       }, ErrorKind::unsupported, "block_table"},
      {"cu_seqlens_q_inside_out_on_cuda", kFwdPacked, [](Fix& f) {
         f.all_on(kCuda0); f.opt.backend = fa::Backend::cuda; f.CQ.data = f.O.data;
       }, ErrorKind::unsupported, "cu_seqlens_q"},
      {"cu_seqlens_k_inside_dk_on_cuda", {Api::backward_varlen}, [](Fix& f) {
         f.all_on(kCuda0); f.opt.backend = fa::Backend::cuda; f.CK.data = f.dK.data;
       }, ErrorKind::unsupported, "cu_seqlens_k"},
      {"block_table_packed", kFwdPacked, [](Fix& f) { f.opt.block_table = f.table.view(); }, ErrorKind::unsupported, "block_table"},
      {"block_table_in_backward", kBwdAll, [](Fix& f) { f.opt.block_table = f.table.view(); }, ErrorKind::unsupported, "block_table"},
      {"seqused_k_in_backward", kBwdAll, [](Fix& f) { f.opt.seqused_k = f.used.view(); }, ErrorKind::unsupported, "seqused_k"},
      // ---- packed lengths
      {"cu_seqlens_q_float", kPacked, [](Fix& f) { f.CQ.dtype = DType::f32; }, kType, "cu_seqlens_q"},
      {"cu_seqlens_k_f16", kPacked, [](Fix& f) { f.CK.dtype = DType::f16; }, kType, "cu_seqlens_k"},
      {"cu_seqlens_k_rank2", kPacked, [](Fix& f) { f.CK.ndim = 2; f.CK.shape[1] = 1; f.CK.stride[1] = 1; }, kValue, "cu_seqlens_k"},
      {"cu_seqlens_length_mismatch", kPacked, [](Fix& f) { f.CK.shape[0] = 3; }, kValue, "cu_seqlens_k"},
      {"cu_seqlens_q_empty", kPacked, [](Fix& f) { f.CQ.shape[0] = 0; f.CK.shape[0] = 0; }, kValue, "cu_seqlens_q"},
      {"cu_seqlens_q_not_from_0", kPacked, [](Fix& f) { f.cu_q.set(0, 1); }, kValue, "cu_seqlens_q"},
      {"cu_seqlens_k_decreasing", kPacked, [](Fix& f) { f.cu_k.set(2, 4); }, kValue, "cu_seqlens_k"},
      {"cu_seqlens_q_negative_length", kPacked, [](Fix& f) { f.cu_q.set(1, -2); }, kValue, "cu_seqlens_q"},
      {"cu_seqlens_q_last_not_total", kPacked, [](Fix& f) { f.cu_q.set(3, 6); }, kValue, "cu_seqlens_q"},
      {"cu_seqlens_k_last_beyond_total", kPacked, [](Fix& f) { f.cu_k.set(3, 8); }, kValue, "cu_seqlens_k"},
      {"cu_seqlens_q_null", kPacked, [](Fix& f) { f.CQ.data = nullptr; }, kValue, "cu_seqlens_q"},
      {"cu_seqlens_k_strided", kPacked, [](Fix& f) { f.CK.stride[0] = 2; f.CK.shape[0] = 4; }, kValue, "cu_seqlens_k"},
      {"cu_seqlens_q_other_device", kPacked, [](Fix& f) { f.CQ.device = kCuda0; }, kValue, "cu_seqlens_q"},
      {"max_seqlen_q_too_small", kPacked, [](Fix& f) { f.max_q = 3; }, kValue, "max_seqlen_q"},
      {"max_seqlen_k_too_small", kPacked, [](Fix& f) { f.max_k = 4; }, kValue, "max_seqlen_k"},
      {"max_seqlen_q_negative", kPacked, [](Fix& f) { f.max_q = -1; }, kValue, "max_seqlen_q"},
  };
}

struct ErrorParam {
  ErrorCase ec;
  Api api;
  Target target;
};

void PrintTo(const ErrorParam& p, std::ostream* os) {
  *os << p.ec.name << " / " << api_name(p.api) << " / " << p.target.name;
}

std::vector<ErrorParam> error_params() {
  std::vector<ErrorParam> r;
  for (const ErrorCase& ec : error_cases())
    for (Api api : ec.apis)
      for (const Target& t : {cpu_target(), auto_target()}) r.push_back({ec, api, t});
  return r;
}

std::string byte_snapshot(const Fix& f) {
  std::string s;
  for (const HostTensor* t : f.outputs()) s.append(reinterpret_cast<const char*>(t->buf.data()), t->buf.size());
  return s;
}

class Refusal : public ::testing::TestWithParam<ErrorParam> {};

TEST_P(Refusal, NamesArgumentAndWritesNothing) {
  const ErrorParam& p = GetParam();
  Fix f(is_varlen(p.api));
  f.opt.backend = p.target.backend;
  p.ec.mutate(f);
  const std::string before = byte_snapshot(f);
  try {
    f.call(p.api);
    ADD_FAILURE() << "no error was thrown";
  } catch (const fa::Error& e) {
    EXPECT_EQ(e.argument(), p.ec.argument) << e.what();
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(p.ec.kind)) << e.what();
    EXPECT_NE(std::string(e.what()).find("argument '" + p.ec.argument + "'"), std::string::npos)
        << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a flashattn::Error: " << e.what();
  }
  EXPECT_EQ(byte_snapshot(f), before) << "an output buffer was written";
}

INSTANTIATE_TEST_SUITE_P(
    Table, Refusal, ::testing::ValuesIn(error_params()),
    [](const ::testing::TestParamInfo<ErrorParam>& i) {
      return i.param.ec.name + "_" + api_name(i.param.api) + "_" + i.param.target.name;
    });

// The fixture is valid as it stands: each refusal above is due to its one change.
TEST(RefusalBaseline, UnchangedFixtureRuns) {
  for (Api api : kAll)
    for (const Target& t : {cpu_target(), auto_target(), reference_target()}) {
      Fix f(is_varlen(api));
      f.opt.backend = t.backend;
      ASSERT_NO_THROW(f.call(api)) << api_name(api) << " " << t.name;
      if (api == Api::forward || api == Api::forward_varlen) {
        EXPECT_FALSE(any_nan(f.out.values())) << api_name(api) << " " << t.name;
      } else {
        EXPECT_FALSE(any_nan(f.dk.values())) << api_name(api) << " " << t.name;
      }
    }
}

// Optional arguments in their valid forms: no lse, slopes [Hq] and [B, Hq].
TEST(RefusalBaseline, OptionalArgumentsAccepted) {
  for (Api api : kAll) {
    Fix f(is_varlen(api));
    f.opt.alibi_slopes = f.alibi.view();
    EXPECT_NO_THROW(f.call(api)) << api_name(api);
    f.opt.alibi_slopes = f.alibi_bh.view();
    EXPECT_NO_THROW(f.call(api)) << api_name(api);
  }
  for (Api api : {Api::forward, Api::forward_varlen}) {
    Fix f(is_varlen(api));
    f.opt.seqused_k = f.used.view();
    EXPECT_NO_THROW(f.call(api)) << api_name(api) << " with seqused_k";
  }
  Fix f(false);
  EXPECT_NO_THROW(fa::forward(f.Q, f.K, f.V, f.O, nullptr, f.opt));
  const fa::TensorView undefined{};
  EXPECT_NO_THROW(fa::forward(f.Q, f.K, f.V, f.O, &undefined, f.opt));
}

// A CUDA request in a build or machine without CUDA is refused, not run on the host.
TEST(RefusalBackend, CudaUnavailable) {
  if (fa::cuda_available()) GTEST_SKIP() << "this build has a usable CUDA backend";
  for (Api api : kAll) {
    {  // host tensors, explicit cuda backend
      Fix f(is_varlen(api));
      f.opt.backend = fa::Backend::cuda;
      const std::string before = byte_snapshot(f);
      try {
        f.call(api);
        ADD_FAILURE() << "no error";
      } catch (const fa::Error& e) {
        EXPECT_EQ(e.argument(), "backend");
        EXPECT_TRUE(e.kind() == ErrorKind::unsupported || e.kind() == ErrorKind::value) << e.what();
      }
      EXPECT_EQ(byte_snapshot(f), before);
    }
    {  // tensors marked as CUDA memory, automatic backend: resolves to cuda, which is missing
      Fix f(is_varlen(api));
      f.all_on(kCuda0);
      f.opt.backend = fa::Backend::automatic;
      const std::string before = byte_snapshot(f);
      try {
        f.call(api);
        ADD_FAILURE() << "no error";
      } catch (const fa::Error& e) {
        EXPECT_EQ(e.argument(), "backend");
        EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(ErrorKind::unsupported)) << e.what();
      }
      EXPECT_EQ(byte_snapshot(f), before);
    }
  }
}

TEST(RefusalMisc, BackendFromString) {
  EXPECT_EQ(fa::backend_from_string("auto"), fa::Backend::automatic);
  EXPECT_EQ(fa::backend_from_string("reference"), fa::Backend::reference);
  EXPECT_EQ(fa::backend_from_string("cpu"), fa::Backend::cpu);
  EXPECT_EQ(fa::backend_from_string("cuda"), fa::Backend::cuda);
  for (const char* bad : {"gpu", "", "CPU", "automatic"}) {
    try {
      fa::backend_from_string(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const fa::Error& e) {
      EXPECT_EQ(e.argument(), "backend");
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(ErrorKind::value));
    }
  }
}

TEST(RefusalMisc, TensorViewRankAboveFour) {
  float x = 0.f;
  try {
    fa::TensorView::contiguous(&x, DType::f32, {1, 1, 1, 1, 1});
    ADD_FAILURE() << "accepted rank 5";
  } catch (const fa::Error& e) {
    EXPECT_EQ(e.argument(), "shape");
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(ErrorKind::value));
  }
}

// The error message names the argument, what was given and what is allowed.
TEST(RefusalMisc, MessageSaysWhatWasGiven) {
  Fix f(false);
  f.opt.dropout_p = 1.f;
  try {
    f.call(Api::forward);
    ADD_FAILURE();
  } catch (const fa::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dropout_p"), std::string::npos) << m;
    EXPECT_NE(m.find("1.0"), std::string::npos) << m;
    EXPECT_NE(m.find("[0, 1)"), std::string::npos) << m;
  }
  Fix g(false);
  g.K.shape[3] = 4;
  try {
    g.call(Api::forward);
    ADD_FAILURE();
  } catch (const fa::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[2, 7, 2, 4]"), std::string::npos) << m;  // what was given
    EXPECT_NE(m.find("8"), std::string::npos) << m;             // what is allowed
  }
}

}  // namespace
}  // namespace fatest
