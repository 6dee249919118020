// One forward problem timed two ways in one process, interleaved, on the same
// device buffers: the kernel compiled into this program and launched directly
// (launch_fwd, as sm90_tile_sweep.cu does) and the library's whole call through
// the benchmark shim's C ABI (fa_forward, as bench_gpu.py does). A gap between
// the two is the library's call path or its build of the kernel, not the GPU.
//
// Build (repository root):
//   nvcc -std=c++17 -O3 -DNDEBUG -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED --expt-relaxed-constexpr \
//     --use_fast_math -gencode arch=compute_90a,code=sm_90a -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     bench/gpu/lib_vs_sweep.cu -o build/lib_vs_sweep -ldl
// Run on the H200: build/lib_vs_sweep SHIM.so [N ...]   (default N = 2048 16384)
#include <dlfcn.h>

#include "sweep_common.h"
#include "kernels/sm90/fwd_launch.cuh"

using Elem = cutlass::bfloat16_t;
using FaForward = int (*)(const void*, const int64_t*, const int64_t*, const void*, const int64_t*,
                          const int64_t*, const void*, const int64_t*, const int64_t*, void*,
                          const int64_t*, const int64_t*, float*, int, int, int, int64_t, int64_t, float,
                          float, uint64_t, void*, char*, int);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: %s SHIM.so [N ...]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW);
  auto fa_forward = lib ? reinterpret_cast<FaForward>(dlsym(lib, "fa_forward")) : nullptr;
  if (!fa_forward) {
    std::printf("cannot load fa_forward from %s: %s\n", argv[1], dlerror());
    return 2;
  }
  std::vector<int64_t> ns = {2048, 16384};
  if (argc > 2) {
    ns.clear();
    for (int i = 2; i < argc; ++i) ns.push_back(std::atoll(argv[i]));
  }
  sweep::for_each_problem(ns, [&](const sweep::Problem& pr) {
    if (pr.D == 64) return;  // one hd64 kernel less to compile: its tiles did not change
    const auto p = sweep::params(pr);
    const int64_t shape[4] = {pr.B, pr.N, pr.H, pr.D};
    const int64_t stride[4] = {pr.N * pr.H * pr.D, pr.H * pr.D, pr.D, 1};
    char err[512] = "";
    auto direct = [&] {
      return pr.D == 128 ? flashattn::sm90::run_fwd<128, Elem>(p, 0) : flashattn::sm90::run_fwd<256, Elem>(p, 0);
    };
    auto library = [&] {
      const int rc = fa_forward(pr.q, shape, stride, pr.k, shape, stride, pr.v, shape, stride, pr.o, shape, stride,
                                pr.lse, 2, 0, int(pr.causal), -1, -1, 0.f, 0.f, 0, nullptr, err, sizeof err);
      if (rc != 0) std::printf("fa_forward: %s\n", err);  // median_ms stops at the error below
      return rc == 0 ? cudaSuccess : cudaErrorUnknown;
    };
    for (int round = 0; round < 3; ++round) {
      const double a = sweep::median_ms(direct, 3, 15), b = sweep::median_ms(library, 3, 15);
      std::printf("D=%3d causal=%d N=%6lld round %d  direct %7.1f  library %7.1f TFLOP/s\n", int(pr.D),
                  int(pr.causal), (long long)pr.N, round, pr.flops() / a / 1e9, pr.flops() / b / 1e9);
      std::fflush(stdout);
    }
  });
  return 0;
}
