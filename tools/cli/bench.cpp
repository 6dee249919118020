// `flashattn bench`: the contract's benchmark grid (B*N = batch tokens, Hq*D =
// model dim), scaled to the backend, timing the flash backend against the
// float64 reference where the reference fits in memory.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <flashattn/flashattn.h>

#include "attn_options.h"
#include "bench.h"
#include "commands.h"
#include "errors.h"
#include "flops.h"
#include "host_tensor.h"
#include "memory.h"
#include "output_files.h"
#include "progress.h"

namespace facli {

namespace {

// CPU defaults: small enough that the default sweep (reference included) takes
// about a minute on 2 cores.
constexpr int64_t kCpuBatchTokens = 8192;
constexpr int64_t kCpuModelDim = 256;
// The reference keeps Sq*Sk doubles per (batch, head) per thread.
constexpr double kReferenceMemoryLimit = 2.0 * 1024 * 1024 * 1024;
// The reference runs at most --repeats times and stops after this much time.
constexpr double kReferenceBudgetMs = 10000.0;

struct BenchArgs {
  std::string backend = "auto";
  std::string dtype;
  std::vector<int64_t> hdims, seqlens;
  bool causal = false, both_masks = false;
  std::string mode = "fwd";
  int64_t batch_tokens = 0, model_dim = 0;
  int repeats = 5, warmup = 1, threads = 0;
  bool no_reference = false, progress = false;
  std::string json;
};

// The buffers of one grid point: [B, N, H, D] everywhere (no GQA, Dv = D).
struct Problem {
  HostTensor q, k, v, out, lse, dout, dq, dk, dv;

  Problem(flashattn::DType dtype, int64_t b, int64_t n, int64_t h, int64_t d, bool backward) {
    std::mt19937_64 rng(0x5eed + static_cast<uint64_t>(n * 1000 + d));
    const std::vector<int64_t> shape{b, n, h, d};
    for (HostTensor* t : {&q, &k, &v}) {
      *t = HostTensor::zeros(dtype, shape);
      fill_normal(*t, rng);
    }
    out = HostTensor::zeros(dtype, shape);
    lse = HostTensor::zeros(flashattn::DType::f32, {b, h, n});
    if (backward) {
      dout = HostTensor::zeros(dtype, shape);
      fill_normal(dout, rng);
      dq = HostTensor::zeros(dtype, shape);
      dk = HostTensor::zeros(dtype, shape);
      dv = HostTensor::zeros(dtype, shape);
    }
  }

  void forward(const flashattn::Options& o) {
    const flashattn::TensorView lv = lse.view();
    flashattn::forward(q.view(), k.view(), v.view(), out.view(), &lv, o);
  }
  void backward(const flashattn::Options& o) {
    flashattn::backward(dout.view(), q.view(), k.view(), v.view(), out.view(), lse.view(),
                        dq.view(), dk.view(), dv.view(), o);
  }
  void run(const std::string& mode, const flashattn::Options& o) {
    if (mode != "bwd") forward(o);
    if (mode != "fwd") backward(o);
  }
};

template <typename F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

BenchRow bench_point(const BenchArgs& a, flashattn::DType dtype, flashattn::Backend backend,
                     int threads, int64_t n, int64_t d, bool causal) {
  BenchRow row;
  row.seqlen = n;
  row.head_dim = d;
  row.batch = std::max<int64_t>(1, a.batch_tokens / n);
  row.heads = std::max<int64_t>(1, a.model_dim / d);
  row.causal = causal;
  row.mode = a.mode;
  const double fwd = forward_flops(row.batch, row.heads, n, n, d, d, causal);
  row.flops = fwd * (a.mode == "fwd" ? 1.0 : a.mode == "bwd" ? 2.5 : 3.5);

  const bool backward = a.mode != "fwd";
  Problem p(dtype, row.batch, n, row.heads, d, backward);
  flashattn::Options opt;
  opt.causal = causal;
  opt.backend = backend;
  opt.num_threads = a.threads;
  if (a.mode == "bwd") p.forward(opt);  // the backward's out and lse, untimed

  // Flash: the first call (a warm-up when there is one) also measures memory.
  std::vector<double> times;
  times.reserve(static_cast<size_t>(a.repeats));
  if (a.warmup > 0) {
    row.flash_peak_bytes = memory::measure_peak_extra([&] { p.run(a.mode, opt); });
    for (int i = 1; i < a.warmup; ++i) p.run(a.mode, opt);
  } else {
    row.flash_peak_bytes = memory::measure_peak_extra(
        [&] { times.push_back(time_ms([&] { p.run(a.mode, opt); })); });
  }
  row.flash_peak_bytes_per_thread = static_cast<double>(row.flash_peak_bytes) / threads;
  while (static_cast<int>(times.size()) < a.repeats)
    times.push_back(time_ms([&] { p.run(a.mode, opt); }));
  row.repeats = static_cast<int>(times.size());
  row.flash_ms = median(times);
  row.flash_tflops = row.flops / (row.flash_ms * 1e-3) / 1e12;

  // Reference: O(N^2) doubles per (batch, head) in flight, one per thread.
  const int64_t work = row.batch * row.heads;
  const double ref_bytes = static_cast<double>(std::min<int64_t>(threads, work)) *
                           static_cast<double>(n) * static_cast<double>(n) * 8.0;
  if (a.no_reference) {
    row.ref_skipped = "--no-reference";
  } else if (backend == flashattn::Backend::reference) {
    row.ref_skipped = "the benchmarked backend is the reference";
  } else if (ref_bytes > kReferenceMemoryLimit) {
    row.ref_skipped = fmt::format("it would hold {:.1f} GiB of scores (limit 2 GiB)",
                                  ref_bytes / (1024.0 * 1024 * 1024));
  } else {
    flashattn::Options ref = opt;
    ref.backend = flashattn::Backend::reference;
    std::vector<double> rt;
    rt.reserve(static_cast<size_t>(a.repeats));
    row.ref_peak_bytes = memory::measure_peak_extra(
        [&] { rt.push_back(time_ms([&] { p.run(a.mode, ref); })); });
    double total = rt.back();
    while (static_cast<int>(rt.size()) < a.repeats && total < kReferenceBudgetMs) {
      rt.push_back(time_ms([&] { p.run(a.mode, ref); }));
      total += rt.back();
    }
    row.ref_repeats = static_cast<int>(rt.size());
    row.ref_ms = median(rt);
    row.ref_tflops = row.flops / (*row.ref_ms * 1e-3) / 1e12;
    row.speedup = *row.ref_ms / row.flash_ms;
    row.ref_peak_bytes_per_thread = static_cast<double>(*row.ref_peak_bytes) /
                                    static_cast<double>(std::min<int64_t>(threads, work));
  }
  return row;
}

int run_bench(BenchArgs& a, const CLI::App& app) {
  // Host memory only, so the backend is a CPU one (cuda is refused here) and the
  // defaults are the CPU's.
  const flashattn::Backend backend = parse_backend(a.backend);
  if (app.count("--dtype") == 0) a.dtype = "f32";
  if (app.count("--hdim") == 0) a.hdims = {128};
  if (app.count("--seqlens") == 0) a.seqlens = {512, 1024, 2048, 4096};
  if (app.count("--batch-tokens") == 0) a.batch_tokens = kCpuBatchTokens;
  if (app.count("--model-dim") == 0) a.model_dim = kCpuModelDim;
  const flashattn::DType dtype = parse_dtype(a.dtype);
  if (!a.json.empty()) check_output_paths({{"--json", a.json, nullptr}});

  const int threads = a.threads > 0 ? a.threads : omp_get_max_threads();
  std::vector<bool> masks;
  if (a.both_masks) masks = {false, true};
  else masks = {a.causal};

  BenchMeta meta{flashattn::to_string(flashattn::resolve_backend(backend, {})), a.dtype, threads,
                 a.batch_tokens, a.model_dim, a.warmup, a.repeats};
  print_bench_header(meta);
  std::vector<BenchRow> rows;
  const int total = static_cast<int>(a.hdims.size() * a.seqlens.size() * masks.size());
  Progress progress(total, a.progress);
  ArgLabels labels = option_labels();
  for (int64_t d : a.hdims)
    for (int64_t n : a.seqlens)
      for (bool causal : masks) {
        progress.update(static_cast<int>(rows.size()),
                        fmt::format("N={} D={}{}", n, d, causal ? " causal" : ""));
        call_library(labels, [&] {
          rows.push_back(bench_point(a, dtype, backend, threads, n, d, causal));
        });
        progress.finish();
        print_bench_row(rows.back());
      }
  if (!a.json.empty()) write_bench_json(a.json, meta, rows);
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& root) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* app = root.add_subcommand(
      "bench", "Time the flash backend on the contract's grid against the float64 reference");
  app->footer(
      "The grid: B*N = --batch-tokens, Hq*D = --model-dim, so B = max(1, tokens/N) and "
      "Hq = max(1, model_dim/D); Dv = Dqk = D, Hkv = Hq, random normal inputs.\n"
      "CPU defaults: --dtype f32 --hdim 128 --seqlens 512,1024,2048,4096 --batch-tokens 8192 "
      "--model-dim 256 (about a minute on 2 cores). Times are the median of --repeats after "
      "--warmup (steady_clock). TFLOP/s count 2*B*Hq*visible(i,j)*(Dqk+Dv) for the forward, "
      "2.5x for the backward. The reference is skipped when its Sq*Sk doubles per thread would "
      "pass 2 GiB; it runs up to --repeats times, at most ~10 s, without warm-up. Memory is the "
      "peak heap of a call beyond its inputs and outputs, divided by the threads.");
  add_backend_option(*app, args->backend);
  app->add_option("--dtype", args->dtype, "f32|f16|bf16 (default f32 on the CPU)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--hdim", args->hdims, "head dims, comma separated (default 128)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app->add_option("--seqlens", args->seqlens, "sequence lengths N (default 512,1024,2048,4096)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app->add_flag("--causal", args->causal, "causal mask");
  app->add_flag("--both-masks", args->both_masks, "each point without and with the causal mask");
  app->add_option("--mode", args->mode, "fwd|bwd|fwdbwd")
      ->capture_default_str()
      ->check(CLI::IsMember({"fwd", "bwd", "fwdbwd"}));
  app->add_option("--batch-tokens", args->batch_tokens, "B*N (CPU default 8192)")
      ->check(CLI::PositiveNumber);
  app->add_option("--model-dim", args->model_dim, "Hq*D (CPU default 256)")
      ->check(CLI::PositiveNumber);
  app->add_option("--repeats", args->repeats, "timed runs (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--warmup", args->warmup, "untimed runs first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app->add_option("--threads", args->threads, "CPU threads; 0: OpenMP default")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app->add_flag("--no-reference", args->no_reference, "do not time the reference");
  app->add_option("--json", args->json, "also write the results as JSON to this file");
  app->add_flag("--progress", args->progress, "progress bar on stderr even when not a terminal");
  return {app, [args, app] { return run_bench(*args, *app); }};
}

}  // namespace facli
