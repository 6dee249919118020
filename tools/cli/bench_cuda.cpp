// `flashattn bench` on the GPU: our side of the contract's grid (the peers are
// timed by bench/gpu/bench_gpu.py). The inputs of each (N, D) are drawn once,
// uploaded, and every mask runs on them; nothing is downloaded. Each timed run
// sits between two CUDA events on the default stream, after --warmup untimed
// runs; the row shows the median. No reference: its N^2 scores would not fit.
#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <flashattn/flashattn.h>

#include "bench.h"
#include "device.h"
#include "errors.h"
#include "host_tensor.h"
#include "progress.h"
#include "staging.h"

namespace facli {

namespace {

// Normal(0, 1) in parallel chunks: one tensor of the grid holds 2^25 values.
void fill_normal_parallel(HostTensor& t, uint64_t seed) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t n = t.numel(), chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c));
    std::normal_distribution<float> dist(0.f, 1.f);
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) t.set(i, dist(rng));
  }
}

// The device tensors of one (N, D) (GridShape: Dv = D).
struct DeviceProblem {
  HostTensor q, k, v, out, lse, dout, dq, dk, dv;  // host sides, sizes for the device copies
  Staging st{true};
  flashattn::TensorView qv, kv, vv, ov, lv, dov, dqv, dkv, dvv;

  DeviceProblem(flashattn::DType dtype, const GridShape& g, bool backward) {
    const std::vector<int64_t> qshape = g.q_shape(), kshape = g.kv_shape();
    uint64_t seed = 0x5eed + static_cast<uint64_t>(g.seqlen_k * 1000 + g.head_dim);
    q = HostTensor::zeros(dtype, qshape);
    k = HostTensor::zeros(dtype, kshape);
    v = HostTensor::zeros(dtype, kshape);
    for (HostTensor* t : {&q, &k, &v}) fill_normal_parallel(*t, seed++);
    qv = st.in(q);
    kv = st.in(k);
    vv = st.in(v);
    out = HostTensor::zeros(dtype, qshape);
    lse = HostTensor::zeros(flashattn::DType::f32, g.lse_shape());
    ov = st.out(out);
    lv = st.out(lse);
    if (backward) {
      dout = HostTensor::zeros(dtype, qshape);
      fill_normal_parallel(dout, seed);
      dq = HostTensor::zeros(dtype, qshape);
      dk = dv = HostTensor::zeros(dtype, kshape);
      dov = st.in(dout);
      dqv = st.out(dq);
      dkv = st.out(dk);
      dvv = st.out(dv);
    }
  }

  void run(const std::string& mode, const flashattn::Options& o) {
    if (mode != "bwd") flashattn::forward(qv, kv, vv, ov, &lv, o);
    if (mode != "fwd") flashattn::backward(dov, qv, kv, vv, ov, lv, dqv, dkv, dvv, o);
  }
};

BenchRow time_point(const BenchArgs& a, DeviceProblem& p, const GridShape& g, bool causal) {
  BenchRow row = shaped_row(a, g, causal);
  row.ref_skipped = "no reference on the GPU";
  flashattn::Options opt;
  opt.causal = causal;
  opt.backend = flashattn::Backend::cuda;
  if (a.mode == "bwd") p.run("fwd", opt);  // the backward's out and LSE, untimed

  // The first call (a warm-up when there is one) also measures device memory.
  std::vector<double> times;
  const int64_t free_before = device_free_bytes();
  const double first = device_time_ms([&] { p.run(a.mode, opt); });
  const int64_t drop = free_before - device_free_bytes();
  row.peak_known = drop >= 0;
  row.flash_peak_bytes = std::max<int64_t>(drop, 0);
  row.flash_peak_bytes_per_thread = static_cast<double>(row.flash_peak_bytes);
  if (a.warmup == 0) times.push_back(first);
  for (int i = 1; i < a.warmup; ++i) p.run(a.mode, opt);
  while (static_cast<int>(times.size()) < a.repeats)
    times.push_back(device_time_ms([&] { p.run(a.mode, opt); }));
  row.repeats = static_cast<int>(times.size());
  row.flash_ms = median(times);
  row.flash_tflops = row.flops / (row.flash_ms * 1e-3) / 1e12;
  return row;
}

}  // namespace

std::vector<BenchRow> run_bench_cuda(const BenchArgs& a, flashattn::DType dtype,
                                     const BenchMeta& meta) {
  if (dtype != flashattn::DType::f16 && dtype != flashattn::DType::bf16)
    throw CliError("--dtype", fmt::format("the cuda backend computes f16 and bf16, got {}", a.dtype));
  for (int64_t d : a.hdims)
    if (d % 8 != 0 || d > 256)
      throw CliError("--hdim", fmt::format("the cuda backend needs head dims that are multiples of "
                                           "8 up to 256, got {}", d));
  std::vector<bool> masks;
  if (a.both_masks) masks = {false, true};
  else masks = {a.causal};

  print_bench_header(meta);
  std::vector<BenchRow> rows;
  const int total = static_cast<int>(a.hdims.size() * a.seqlens.size() * masks.size());
  Progress progress(total, a.progress);
  ArgLabels labels = option_labels();
  labels["q"] = "--dtype/--hdim";  // the cuda refusals of q are about its dtype and head dim
  for (int64_t d : a.hdims)
    for (int64_t n : a.seqlens) {
      const GridShape g = grid_shape(a, n, d);
      progress.update(static_cast<int>(rows.size()), fmt::format("N={} D={}: inputs", n, d));
      DeviceProblem p(dtype, g, a.mode != "fwd");
      for (bool causal : masks) {
        progress.update(static_cast<int>(rows.size()),
                        fmt::format("N={} D={}{}", n, d, causal ? " causal" : ""));
        call_library(labels, [&] { rows.push_back(time_point(a, p, g, causal)); });
        progress.finish();
        print_bench_row(meta, rows.back());
      }
    }
  return rows;
}

}  // namespace facli
