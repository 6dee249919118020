// A C ABI over flashattn::forward/backward for device tensors, so the GPU
// benchmark can drive flashattn from Python (ctypes) in the same process as
// PyTorch's kernels. Not a public interface: the Python package replaces it.
#include <cstdio>
#include <cstring>

#include "flashattn/flashattn.h"

namespace {

flashattn::TensorView view4(const void* p, flashattn::DType t, const int64_t* shape,
                            const int64_t* stride, int device) {
  flashattn::TensorView v;
  v.data = const_cast<void*>(p);
  v.dtype = t;
  v.device = {flashattn::DeviceType::cuda, device};
  v.ndim = 4;
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = shape[i];
    v.stride[i] = stride[i];
  }
  return v;
}

// Score modifiers for the calls that follow (fa_set_mods): the ABI of
// fa_forward / fa_backward stays as it was, so older shims still run with
// bench_gpu.py.
struct Mods {
  float softcap = 0.f;
  const float* alibi = nullptr;  // device, fp32 [Hq]
  int64_t heads = 0;
  int device = 0;
} g_mods;

// A KV cache's keys in use per sequence (fa_set_seqused_k) for the forward calls that
// follow, by the same rule.
struct Used {
  const int32_t* seqused_k = nullptr;  // device, int32 [batch]
  int64_t batch = 0;
  int device = 0;
} g_used;

void apply_mods(flashattn::Options& opt) {
  if (g_mods.softcap > 0.f) opt.softcap = g_mods.softcap;
  if (g_mods.alibi)
    opt.alibi_slopes = flashattn::TensorView::contiguous(const_cast<float*>(g_mods.alibi), flashattn::DType::f32,
                                                         {g_mods.heads}, {flashattn::DeviceType::cuda, g_mods.device});
}

}  // namespace

extern "C" {

// Softcap (0: off) and ALiBi slopes (null: off; a device fp32 [heads] array) for
// every later fa_forward / fa_backward call (bench/gpu/bench_mods.py).
void fa_set_mods(float softcap, const float* alibi, int64_t heads, int device) {
  g_mods = {softcap, alibi, heads, device};
}

// seqused_k (null: off; a device int32 [batch] array) for every later fa_forward call
// (bench/gpu/bench_decode.py --used).
void fa_set_seqused_k(const int32_t* seqused_k, int64_t batch, int device) { g_used = {seqused_k, batch, device}; }

// Tensors in flashattn's [B, S, H, D] order, any strides; dtype 1 = fp16, 2 = bf16.
// lse (may be null) is a contiguous float32 [B, Hq, Sq]. Returns 0, or 2 with a
// message in err.
int fa_forward(const void* q, const int64_t* q_shape, const int64_t* q_stride, const void* k,
               const int64_t* k_shape, const int64_t* k_stride, const void* v,
               const int64_t* v_shape, const int64_t* v_stride, void* out,
               const int64_t* o_shape, const int64_t* o_stride, float* lse, int dtype, int device,
               int causal, int64_t window_left, int64_t window_right, float softcap,
               float dropout_p, uint64_t seed, void* stream, char* err, int err_len) {
  namespace fa = flashattn;
  try {
    const fa::DType t = dtype == 1 ? fa::DType::f16 : fa::DType::bf16;
    fa::Options opt;
    opt.causal = causal != 0;
    opt.window = {window_left, window_right};
    opt.softcap = softcap;
    opt.dropout_p = dropout_p;
    opt.seed = seed;
    opt.stream = stream;
    apply_mods(opt);
    if (g_used.seqused_k)
      opt.seqused_k = fa::TensorView::contiguous(const_cast<int32_t*>(g_used.seqused_k), fa::DType::i32,
                                                 {g_used.batch}, {fa::DeviceType::cuda, g_used.device});
    fa::TensorView lse_view;
    if (lse) {
      lse_view = fa::TensorView::contiguous(lse, fa::DType::f32, {q_shape[0], q_shape[2], q_shape[1]},
                                            {fa::DeviceType::cuda, device});
    }
    fa::forward(view4(q, t, q_shape, q_stride, device), view4(k, t, k_shape, k_stride, device),
                view4(v, t, v_shape, v_stride, device), view4(out, t, o_shape, o_stride, device),
                lse ? &lse_view : nullptr, opt);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, static_cast<size_t>(err_len), "%s", e.what());
    return 2;
  }
}

// Gradients: every tensor in [B, S, H, D] order with the shape/stride arrays of q
// (dq, dout, out share q's; dk, dv share k's and v's). lse is contiguous [B, Hq, Sq].
int fa_backward(const void* dout, const void* q, const void* k, const void* v, const void* out,
                const float* lse, void* dq, void* dk, void* dv, const int64_t* q_shape,
                const int64_t* q_stride, const int64_t* k_shape, const int64_t* k_stride,
                const int64_t* v_shape, const int64_t* v_stride, int dtype, int device, int causal,
                int deterministic, void* stream, char* err, int err_len) {
  namespace fa = flashattn;
  try {
    const fa::DType t = dtype == 1 ? fa::DType::f16 : fa::DType::bf16;
    fa::Options opt;
    opt.causal = causal != 0;
    opt.deterministic = deterministic != 0;
    opt.stream = stream;
    apply_mods(opt);
    const auto lse_view = fa::TensorView::contiguous(const_cast<float*>(lse), fa::DType::f32,
                                                     {q_shape[0], q_shape[2], q_shape[1]},
                                                     {fa::DeviceType::cuda, device});
    const auto o_shape = v_shape;  // [B, Sq, Hq, Dv] is q's shape with v's head dim
    int64_t out_shape[4] = {q_shape[0], q_shape[1], q_shape[2], o_shape[3]};
    fa::backward(view4(dout, t, out_shape, q_stride, device), view4(q, t, q_shape, q_stride, device),
                 view4(k, t, k_shape, k_stride, device), view4(v, t, v_shape, v_stride, device),
                 view4(out, t, out_shape, q_stride, device), lse_view,
                 view4(dq, t, q_shape, q_stride, device), view4(dk, t, k_shape, k_stride, device),
                 view4(dv, t, v_shape, v_stride, device), opt);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, static_cast<size_t>(err_len), "%s", e.what());
    return 2;
  }
}

}  // extern "C"
