// Times the sm80 forward kernel under several tile shapes per head dim on the
// contract's grid, so the tile table in kernels/sm80/traits.h rests on
// measurements. Build: nvcc (see bench/gpu/README in docs/kernel_notes.md);
// run on the GPU: ./tile_sweep [N ...]. Outputs compare against the first
// variant of each head dim (max |diff| should be ~1e-3, rounding only).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "flashattn/numeric.h"
#include "kernels/sm80/fwd_launch.cuh"

using namespace flashattn;
using Elem = cutlass::bfloat16_t;

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                  \
    }                                                                                \
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

template <int D, int M, int N, int W>
void run(const Problem& pr, const char* tag, std::vector<uint16_t>* first) {
  using Traits = sm80::FwdTraits<D, Elem, M, N, W>;
  const auto p = params(pr);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) CHECK((sm80::launch_fwd<Traits, false>(p, 0)));
  std::vector<float> ms;
  for (int i = 0; i < 10; ++i) {
    CHECK(cudaEventRecord(a));
    CHECK((sm80::launch_fwd<Traits, false>(p, 0)));
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double flops = 4.0 * pr.B * pr.H * pr.N * pr.N * pr.D / (pr.causal ? 2 : 1);
  const size_t n = size_t(pr.B * pr.N * pr.H * pr.D);
  std::vector<uint16_t> out(n);
  CHECK(cudaMemcpy(out.data(), pr.o, n * 2, cudaMemcpyDeviceToHost));
  double diff = 0;
  if (first->empty()) *first = out;
  else
    for (size_t i = 0; i < n; ++i)
      diff = std::max(diff, double(std::fabs(bf16_to_float(out[i]) - bf16_to_float((*first)[i]))));
  std::printf("D=%3lld causal=%d N=%6lld  %-14s %7.1f TFLOP/s  (%.3f ms, regs/spill see ptxas)  max|diff| %.1e\n",
              (long long)pr.D, pr.causal, (long long)pr.N, tag, flops / ms[5] / 1e9, ms[5], diff);
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
        Problem pr{16384 / N, N, 2048 / D, D, causal, nullptr, nullptr, nullptr, nullptr, nullptr};
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
#if defined(FLASHATTN_SWEEP_SHORT)  // the table's shapes only (quick A/B builds of a kernel change)
        if (D == 64) {
          run<64, 128, 64, 4>(pr, "128x64 w4", &first);
        } else if (D == 128) {
          run<128, 128, 32, 4>(pr, "128x32 w4", &first);
          run<128, 128, 64, 4>(pr, "128x64 w4", &first);
        } else {
          run<256, 128, 64, 8>(pr, "128x64 w8", &first);
        }
#else
        if (D == 64) {
          run<64, 128, 128, 4>(pr, "128x128 w4", &first);
          run<64, 128, 64, 4>(pr, "128x64 w4", &first);
          run<64, 64, 128, 4>(pr, "64x128 w4", &first);
          run<64, 128, 128, 8>(pr, "128x128 w8", &first);
        } else if (D == 128) {
          run<128, 128, 64, 4>(pr, "128x64 w4", &first);
          run<128, 128, 32, 4>(pr, "128x32 w4", &first);
          run<128, 64, 64, 4>(pr, "64x64 w4", &first);
          run<128, 128, 64, 8>(pr, "128x64 w8", &first);
          run<128, 128, 128, 8>(pr, "128x128 w8", &first);
        } else {
          run<256, 128, 64, 8>(pr, "128x64 w8", &first);
          run<256, 64, 64, 4>(pr, "64x64 w4", &first);
          run<256, 128, 32, 8>(pr, "128x32 w8", &first);
          run<256, 64, 32, 4>(pr, "64x32 w4", &first);
        }
#endif
        for (void* t : {(void*)pr.q, (void*)pr.k, (void*)pr.v, (void*)pr.o, (void*)pr.lse}) cudaFree(t);
      }
  return 0;
}
