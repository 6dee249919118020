// Times the Hopper (sm90a) forward kernel under several tile configurations per
// head dim (query rows = 64 x consumer warp groups, keys per tile, K/V stages)
// on the contract's grid, so the table in kernels/sm90/fwd_traits.h rests on
// measurements. The first configuration of each head dim is the table's; the
// others are compared with it (max |diff| should be ~1e-3 or below: rounding).
//
// Build (repository root, one nvcc, ~4 minutes on 2 cores):
//   nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr --use_fast_math \
//     -gencode arch=compute_90a,code=sm_90a -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     -Xptxas -v bench/gpu/sm90_tile_sweep.cu -o build/sm90_tile_sweep 2>&1 | grep -E 'spill|registers|error'
// Run on the H200: build/sm90_tile_sweep [N ...]   (default N = 512 2048 16384;
//   B = 16384 / N, H = 2048 / D, bf16, causal and not)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "flashattn/numeric.h"
#include "kernels/sm90/fwd_launch.cuh"

using namespace flashattn;
using Elem = cutlass::bfloat16_t;

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

struct Problem {
  int64_t B, N, H, D;
  bool causal;
  Elem *q, *k, *v, *o;
  float* lse;
};

detail::FwdKernelParams params(const Problem& pr) {
  detail::FwdKernelParams p;
  p.q = pr.q; p.k = pr.k; p.v = pr.v; p.out = pr.o; p.lse = pr.lse;
  p.dtype = DType::bf16;
  p.device = {DeviceType::cuda, 0};
  p.batch = pr.B; p.seqlen_q = p.seqlen_k = pr.N; p.heads_q = p.heads_kv = pr.H;
  p.head_dim_qk = p.head_dim_v = pr.D;
  const int64_t rs = pr.H * pr.D, bs = pr.N * rs;
  p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = bs;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = rs;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = pr.D;
  p.lse_batch_stride = pr.H * pr.N; p.lse_head_stride = pr.N;
  p.softmax_scale = 1.f / std::sqrt(float(pr.D));
  p.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  p.causal = pr.causal;
  p.window_left = -1; p.window_right = pr.causal ? 0 : -1;
  return p;
}

template <int D, int M, int N, int S>
void run(const Problem& pr, std::vector<uint16_t>* first) {
  using Traits = sm90::FwdTraits<D, Elem, M, N, S>;
  const auto p = params(pr);
  CHECK(cudaMemset(pr.o, 0, size_t(pr.B * pr.N * pr.H * pr.D) * 2));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) CHECK((sm90::launch_fwd<Traits>(p, 0)));
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) {
    CHECK(cudaEventRecord(a));
    CHECK((sm90::launch_fwd<Traits>(p, 0)));
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  const double flops = 4.0 * pr.B * pr.H * pr.N * pr.N * pr.D / (pr.causal ? 2 : 1);
  const size_t n = size_t(pr.B * pr.N * pr.H * pr.D);
  std::vector<uint16_t> out(n);
  CHECK(cudaMemcpy(out.data(), pr.o, n * 2, cudaMemcpyDeviceToHost));
  double diff = 0;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) finite = finite && std::isfinite(bf16_to_float(out[i]));
  if (first->empty()) *first = out;
  else
    for (size_t i = 0; i < n; ++i)
      diff = std::max(diff, double(std::fabs(bf16_to_float(out[i]) - bf16_to_float((*first)[i]))));
  char tag[64];
  std::snprintf(tag, sizeof tag, "%dx%d %dwg %dst%s", M, N, M / 64, S, Traits::kOInQ ? " o-in-q" : "");
  std::printf("D=%3d causal=%d N=%6lld  %-22s %7.1f TFLOP/s  (%.3f ms, smem %3d KiB)  max|diff| %.1e%s\n", D,
              int(pr.causal), (long long)pr.N, tag, flops / med / 1e9, med, Traits::kSmemBytes / 1024, diff,
              finite ? "" : "  NON-FINITE OUTPUT");
  std::fflush(stdout);
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
}

int main(int argc, char** argv) {
  std::vector<int64_t> ns = {512, 2048, 16384};
  if (argc > 1) {
    ns.clear();
    for (int i = 1; i < argc; ++i) ns.push_back(std::atoll(argv[i]));
  }
  for (int64_t D : {64, 128, 256})
    for (bool causal : {false, true})
      for (int64_t N : ns) {
        Problem pr{std::max<int64_t>(1, 16384 / N), N, 2048 / D, D, causal, nullptr, nullptr, nullptr, nullptr, nullptr};
        const size_t n = size_t(pr.B * pr.N * pr.H * pr.D);
        std::vector<uint16_t> h(n);
        std::mt19937 g(1);
        std::normal_distribution<float> dist;
        for (Elem** t : {&pr.q, &pr.k, &pr.v}) {
          for (auto& x : h) x = float_to_bf16(dist(g));
          CHECK(cudaMalloc(t, n * 2));
          CHECK(cudaMemcpy(*t, h.data(), n * 2, cudaMemcpyHostToDevice));
        }
        CHECK(cudaMalloc(&pr.o, n * 2));
        CHECK(cudaMalloc(&pr.lse, size_t(pr.B * pr.H * pr.N) * 4));
        std::vector<uint16_t> first;
        // <head dim, query rows (64 per consumer group), keys per tile, stages>;
        // the first of each head dim is the table's entry.
        if (D == 64) {
          run<64, 128, 128, 2>(pr, &first);
          run<64, 128, 128, 3>(pr, &first);
          run<64, 192, 128, 2>(pr, &first);
        } else if (D == 128) {
          run<128, 128, 128, 2>(pr, &first);
          run<128, 128, 128, 3>(pr, &first);
          run<128, 128, 176, 2>(pr, &first);
        } else {
          run<256, 128, 64, 2>(pr, &first);
          run<256, 128, 80, 2>(pr, &first);
        }
        for (void* t : {(void*)pr.q, (void*)pr.k, (void*)pr.v, (void*)pr.o, (void*)pr.lse}) CHECK(cudaFree(t));
      }
  return 0;
}
