// The public entry points: validate, then dispatch to the chosen backend.
#include <cstring>
#include <string>

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

}  // namespace

void run_forward(const FwdParams& p) {
  check_backend(p, false);
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return;  // nothing to compute
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

void run_backward(const BwdParams& p) {
  check_backend(p, true);
  // With no query rows, dk and dv are zero; with no keys, dq is: the backends
  // write those zeros, so only an empty batch returns here.
  if (p.batch == 0 || p.heads_q == 0) return;
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
  run_forward(detail::make_fwd_params(q, k, v, out, lse, nullptr, options));
}

void forward_varlen(const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& out, const TensorView* lse, const Varlen& varlen,
                    const Options& options) {
  run_forward(detail::make_fwd_params(q, k, v, out, lse, &varlen, options));
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
