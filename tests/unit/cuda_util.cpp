// The CUDA test target and helpers (cuda_util.h).
#include "cuda_util.h"

#if defined(FLASHATTN_WITH_CUDA)

#include <stdexcept>

#include "flashattn/flashattn.h"
#include "kernels/sm80/launch.h"

namespace fatest {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

const Target& cuda_target() {
  static const Target target = [] {
    Target t;
    t.name = "cuda";
    t.backend = fa::Backend::cuda;
    t.device = {fa::DeviceType::cuda, 0};
    t.alloc = [](size_t n) {
      void* p = nullptr;
      cuda_ok(cudaMalloc(&p, n > 0 ? n : 16), "cudaMalloc");
      return p;
    };
    t.release = [](void* p) { cudaFree(p); };
    t.to_device = [](void* d, const void* s, size_t n) {
      cuda_ok(cudaMemcpy(d, s, n, cudaMemcpyHostToDevice), "upload");
    };
    t.to_host = [](void* d, const void* s, size_t n) {
      cuda_ok(cudaDeviceSynchronize(), "kernel");
      cuda_ok(cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost), "download");
    };
    // fp16/bf16, head dims that are multiples of 8 up to 256, 16-byte rows.
    t.supports = [](const Case& c) {
      return c.dtype != DType::f32 && c.Dqk % 8 == 0 && c.Dv % 8 == 0 && c.Dqk <= 256 &&
             c.Dv <= 256 && c.layout != Layout::padded && c.out_layout != Layout::padded;
    };
    return t;
  }();
  return target;
}

bool have_gpu() { return fa::cuda_available(); }

std::vector<CaseParam> on_cuda(const std::vector<Case>& cases) {
  std::vector<CaseParam> out;
  for (const Case& c : cases)
    if (cuda_target().supports(c)) out.emplace_back(c, cuda_target());
  return out;
}

std::vector<Case> low_precision(std::vector<Case> cases) {
  std::vector<Case> out;
  for (Case c : cases) {
    if (c.dtype == DType::f32) continue;
    out.push_back(std::move(c));
  }
  return out;
}

bool cuda_builds(DType dt, int64_t dqk, int64_t dv) {
  fa::FwdParams p;
  p.dtype = dt;
  p.head_dim_qk = dqk;
  p.head_dim_v = dv;
  return flashattn::sm80::forward_head_dim(p) != 0;
}

}  // namespace fatest

#endif  // FLASHATTN_WITH_CUDA
