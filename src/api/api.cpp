// The public entry points: validate, then dispatch to the chosen backend.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "api/validate.h"
#include "backends/backend.h"
#include "flashattn/flashattn.h"
#include "kernels/common/philox.h"

namespace flashattn {

const char* version() { return "0.1.0"; }

const char* to_string(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
  }
  return "unknown";
}

const char* to_string(Backend b) {
  switch (b) {
    case Backend::automatic: return "auto";
    case Backend::reference: return "reference";
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
  }
  return "unknown";
}

Backend backend_from_string(const char* name) {
  for (Backend b : {Backend::automatic, Backend::reference, Backend::cpu, Backend::cuda})
    if (std::strcmp(name, to_string(b)) == 0) return b;
  throw Error(ErrorKind::value, "backend",
              std::string("unknown backend '") + name + "'; choose auto, reference, cpu or cuda");
}

bool cuda_available() {
#if defined(FLASHATTN_WITH_CUDA)
  return detail::cuda_device_count() > 0;
#else
  return false;
#endif
}

Backend resolve_backend(Backend requested, Device device) {
  if (requested != Backend::automatic) return requested;
  return device.type == DeviceType::cuda ? Backend::cuda : Backend::cpu;
}

namespace {

#if !defined(FLASHATTN_WITH_CUDA)
[[noreturn]] void no_cuda() {
  throw Error(ErrorKind::unsupported, "backend",
              cuda_available() ? "the CUDA backend failed to start"
                               : "the CUDA backend is not available: this build has no CUDA "
                                 "support or no CUDA device is visible");
}
#endif

// Backend-specific refusals, before any work.
void check_backend(const FwdParams& p, bool backward) {
  if (p.backend == Backend::cuda) {
#if defined(FLASHATTN_WITH_CUDA)
    detail::cuda_check(p, backward);
#else
    (void)backward;
    no_cuda();
#endif
  }
}

// A KV cache on cuda: its device pointers and new rows (the sm80 forward reads the
// lengths and the table on the device, kv_append writes the rows).
void check_backend(const detail::HostFwdParams& p) {
  check_backend(static_cast<const FwdParams&>(p), false);
#if defined(FLASHATTN_WITH_CUDA)
  if (p.backend == Backend::cuda) detail::cuda_check_kv(p);
#endif
}

// The per-sequence length arrays of a host call, copied once validated: the backends
// read them again while they write out / dq..., which may share their memory (a
// seqused_k inside out crashed the CPU forward when its values changed mid-call).
struct HostLengths {
  std::vector<int32_t> cu_q, cu_k, used, table;

  const int32_t* copy(const int32_t* src, int64_t n, std::vector<int32_t>& dst) {
    if (src == nullptr) return nullptr;
    dst.assign(src, src + n);
    return dst.data();
  }
  template <typename P>
  P own(const P& p) {
    P r = p;
    if (p.device.type == DeviceType::cpu) {
      r.cu_seqlens_q = copy(p.cu_seqlens_q, p.batch + 1, cu_q);
      r.cu_seqlens_k = copy(p.cu_seqlens_k, p.batch + 1, cu_k);
    }
    return r;
  }
  detail::HostFwdParams own(const detail::HostFwdParams& p) {
    detail::HostFwdParams r = own<detail::HostFwdParams>(p);
    if (p.device.type != DeviceType::cpu) return r;
    r.kv.seqused_k = copy(p.kv.seqused_k, p.batch, used);
    if (p.kv.block_table != nullptr) {  // rows made contiguous
      const int64_t width = p.seqlen_k / p.kv.page_size;
      table.resize(static_cast<size_t>(p.batch * width));
      for (int64_t b = 0; b < p.batch; ++b)
        std::copy(p.kv.block_table + b * p.kv.block_table_stride,
                  p.kv.block_table + b * p.kv.block_table_stride + width, table.begin() + b * width);
      r.kv.block_table = table.data();
      r.kv.block_table_stride = width;
    }
    return r;
  }
};

void run_host_params(const detail::HostFwdParams& params) {
  check_backend(params);
  HostLengths lengths;
  const detail::HostFwdParams p = lengths.own(params);
  if (p.backend != Backend::cuda) {  // CUDA writes the new rows on its stream
    detail::write_new_kv(p);
    if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return;  // nothing to compute
  }
  switch (p.backend) {
    case Backend::reference: return detail::reference_forward(p);
    case Backend::cpu: return detail::cpu_forward(p);
    case Backend::cuda:
#if defined(FLASHATTN_WITH_CUDA)
      return detail::cuda_forward(p);
#else
      no_cuda();
#endif
    case Backend::automatic: break;
  }
  throw Error(ErrorKind::value, "backend", "was not resolved");
}

}  // namespace

void run_forward(const FwdParams& params) {
  detail::HostFwdParams p;  // no KV cache through a bare parameter block
  static_cast<FwdParams&>(p) = params;
  run_host_params(p);
}

void run_backward(const BwdParams& params) {
  check_backend(params, true);
  // With no query rows, dk and dv are zero; with no keys, dq is: the backends
  // write those zeros, so only an empty batch returns here.
  if (params.batch == 0 || params.heads_q == 0) return;
  HostLengths lengths;
  const BwdParams p = lengths.own(params);
  switch (p.backend) {
    case Backend::reference: return detail::reference_backward(p);
    case Backend::cpu: return detail::cpu_backward(p);
    case Backend::cuda:
#if defined(FLASHATTN_WITH_CUDA)
      return detail::cuda_backward(p);
#else
      no_cuda();
#endif
    case Backend::automatic: break;
  }
  throw Error(ErrorKind::value, "backend", "was not resolved");
}

void forward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
             const TensorView* lse, const Options& options) {
  run_host_params(detail::make_fwd_params(q, k, v, out, lse, nullptr, options));
}

void forward_varlen(const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& out, const TensorView* lse, const Varlen& varlen,
                    const Options& options) {
  run_host_params(detail::make_fwd_params(q, k, v, out, lse, &varlen, options));
}

void validate_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                      const TensorView& out, const TensorView* lse, const Varlen* varlen,
                      const Options& options) {
  check_backend(detail::make_fwd_params(q, k, v, out, lse, varlen, options));
}

void backward(const TensorView& dout, const TensorView& q, const TensorView& k,
              const TensorView& v, const TensorView& out, const TensorView& lse,
              const TensorView& dq, const TensorView& dk, const TensorView& dv,
              const Options& options) {
  run_backward(detail::make_bwd_params(dout, q, k, v, out, lse, dq, dk, dv, nullptr, options));
}

void backward_varlen(const TensorView& dout, const TensorView& q, const TensorView& k,
                     const TensorView& v, const TensorView& out, const TensorView& lse,
                     const TensorView& dq, const TensorView& dk, const TensorView& dv,
                     const Varlen& varlen, const Options& options) {
  run_backward(detail::make_bwd_params(dout, q, k, v, out, lse, dq, dk, dv, &varlen, options));
}

bool dropout_keep(uint64_t seed, uint64_t offset, int64_t b, int64_t h, int64_t i, int64_t j,
                  float dropout_p) {
  return detail::DropoutRng::make(seed, offset, dropout_p).keep(b, h, i, j);
}

}  // namespace flashattn
