// What the two tile-sweep programs (tile_sweep.cu for sm80, sm90_tile_sweep.cu)
// share: the problem grid (bf16, B = 16384 / N, H = 2048 / D, causal and not),
// kernel parameters for it, median timing of a launch in the GPU's power-capped
// state, and the comparison of every variant's output with the first one of its
// head dim.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "flashattn/numeric.h"
#include "kernels/common/kernel_params.h"

namespace sweep {

using namespace flashattn;

inline void check(cudaError_t e, const char* what, int line) {
  if (e == cudaSuccess) return;
  std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), what, line);
  std::exit(1);
}
#define SWEEP_CHECK(x) sweep::check((x), #x, __LINE__)

struct Problem {
  int64_t B, N, H, D;
  bool causal;
  void *q, *k, *v, *o;
  float* lse;
  size_t elems() const { return size_t(B * N * H * D); }
  double flops() const { return 4.0 * B * H * N * N * D / (causal ? 2 : 1); }
};

inline detail::FwdKernelParams params(const Problem& pr) {
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

// Seconds of back-to-back launches before each timing: SWEEP_WARM_S in the
// environment, 0.3 by default. The H200 runs boosted for about 0.1 s after idling
// and then holds its power cap, ~10% slower on long problems
// (bench/results/2026-11-30_h200_lib_vs_sweep_s8.txt); without this warm-up the
// first configurations timed after the host's input set-up ran in the boost.
inline double warm_seconds() {
  const char* env = std::getenv("SWEEP_WARM_S");
  return env != nullptr ? std::atof(env) : 0.3;
}

// Median milliseconds of `reps` launches after `warmup` ones and warm_seconds()
// of launches back to back.
template <typename Launch>
double median_ms(Launch&& launch, int warmup, int reps) {
  cudaEvent_t a, b;
  SWEEP_CHECK(cudaEventCreate(&a));
  SWEEP_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) SWEEP_CHECK(launch());
  const double warm_ms = 1e3 * warm_seconds();
  SWEEP_CHECK(cudaEventRecord(a));
  for (float spent = 0.f; spent < warm_ms;) {  // ten launches per look at the clock
    for (int i = 0; i < 10; ++i) SWEEP_CHECK(launch());
    SWEEP_CHECK(cudaEventRecord(b));
    SWEEP_CHECK(cudaEventSynchronize(b));
    SWEEP_CHECK(cudaEventElapsedTime(&spent, a, b));
  }
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    SWEEP_CHECK(cudaEventRecord(a));
    SWEEP_CHECK(launch());
    SWEEP_CHECK(cudaEventRecord(b));
    SWEEP_CHECK(cudaEventSynchronize(b));
    float t;
    SWEEP_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  SWEEP_CHECK(cudaEventDestroy(a));
  SWEEP_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Largest |difference| of the output from the head dim's first variant (which
// it becomes when `first` is empty); *finite is false on any inf or NaN.
inline double diff_from_first(const Problem& pr, std::vector<uint16_t>* first, bool* finite) {
  std::vector<uint16_t> out(pr.elems());
  SWEEP_CHECK(cudaMemcpy(out.data(), pr.o, out.size() * 2, cudaMemcpyDeviceToHost));
  *finite = true;
  for (uint16_t x : out) *finite = *finite && std::isfinite(bf16_to_float(x));
  double diff = 0;
  if (first->empty()) *first = out;
  else
    for (size_t i = 0; i < out.size(); ++i)
      diff = std::max(diff, double(std::fabs(bf16_to_float(out[i]) - bf16_to_float((*first)[i]))));
  return diff;
}

// Sequence lengths from the command line (default 512 2048 16384).
inline std::vector<int64_t> seqlens(int argc, char** argv) {
  std::vector<int64_t> ns = {512, 2048, 16384};
  if (argc > 1) {
    ns.clear();
    for (int i = 1; i < argc; ++i) ns.push_back(std::atoll(argv[i]));
  }
  return ns;
}

// Calls body(problem) for each head dim of dims (64/128/256 unless given), not
// causal and causal, each N, on fresh N(0, 1) inputs (seed 1).
template <typename Body>
void for_each_problem(const std::vector<int64_t>& ns, Body&& body,
                      const std::vector<int64_t>& dims = {64, 128, 256}) {
  for (int64_t D : dims)
    for (bool causal : {false, true})
      for (int64_t N : ns) {
        Problem pr{std::max<int64_t>(1, 16384 / N), N, 2048 / D, D, causal, nullptr, nullptr, nullptr, nullptr, nullptr};
        const size_t n = pr.elems();
        std::vector<uint16_t> h(n);
        std::mt19937 g(1);
        std::normal_distribution<float> dist;
        for (void** t : {&pr.q, &pr.k, &pr.v}) {
          for (auto& x : h) x = float_to_bf16(dist(g));
          SWEEP_CHECK(cudaMalloc(t, n * 2));
          SWEEP_CHECK(cudaMemcpy(*t, h.data(), n * 2, cudaMemcpyHostToDevice));
        }
        SWEEP_CHECK(cudaMalloc(&pr.o, n * 2));
        SWEEP_CHECK(cudaMemset(pr.o, 0, n * 2));
        SWEEP_CHECK(cudaMalloc(&pr.lse, size_t(pr.B * pr.H * pr.N) * 4));
        body(pr);
        for (void* t : {pr.q, pr.k, pr.v, pr.o, static_cast<void*>(pr.lse)}) SWEEP_CHECK(cudaFree(t));
      }
}

}  // namespace sweep
