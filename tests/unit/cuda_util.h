// The CUDA backend as a test target, and what the CUDA test files (test_cuda.cpp,
// test_cuda_kvcache.cpp) share. Only with the CUDA backend (FLASHATTN_WITH_CUDA).
#pragma once

#if defined(FLASHATTN_WITH_CUDA)

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cases.h"

namespace fatest {

// Throws std::runtime_error with `what` and CUDA's message unless e is cudaSuccess.
void cuda_ok(cudaError_t e, const char* what);
// Device buffers on cuda:0; supports fp16 / bf16, head dims that are multiples of 8 up to
// 256, 16-byte rows.
const Target& cuda_target();
bool have_gpu();
// The cases cuda_target supports, as gtest parameters.
std::vector<CaseParam> on_cuda(const std::vector<Case>& cases);
// The cases without the fp32 ones.
std::vector<Case> low_precision(std::vector<Case> cases);
// Whether this build has a kernel for the head dim and dtype (FLASHATTN_CUDA_HEAD_DIMS /
// FLASHATTN_CUDA_DTYPES): tests of a head dim a build may lack skip the others.
bool cuda_builds(DType dt, int64_t dqk, int64_t dv);

// An environment variable set for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) unsetenv(name_);
    else setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

}  // namespace fatest

#endif  // FLASHATTN_WITH_CUDA
