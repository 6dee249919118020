// `flashattn bench`: the contract's benchmark grid (B*N = batch tokens, Hq*D =
// model dim), scaled to the backend. On the host it times the flash backend
// against the float64 reference where the reference fits in memory; the GPU
// sweep is bench_cuda.cpp.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <flashattn/flashattn.h>

#include "attn_options.h"
#include "backend_choice.h"
#include "bench.h"
#include "commands.h"
#include "device.h"
#include "errors.h"
#include "flops.h"
#include "host_tensor.h"
#include "memory.h"
#include "output_files.h"
#include "progress.h"

namespace facli {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

GridShape grid_shape(const BenchArgs& a, int64_t n, int64_t d) {
  GridShape g{std::max<int64_t>(1, a.batch_tokens / n), a.seqlen_q > 0 ? a.seqlen_q : n, n,
              std::max<int64_t>(1, a.model_dim / d), 0, d};
  g.heads_kv = a.kv_heads > 0 ? a.kv_heads : g.heads;
  if (g.heads % g.heads_kv != 0)
    throw CliError("--kv-heads", fmt::format("{} kv heads do not divide the {} query heads of "
                                             "D = {} (Hq = --model-dim / D)", g.heads_kv, g.heads, d));
  return g;
}

BenchRow shaped_row(const BenchArgs& a, const GridShape& g, bool causal) {
  BenchRow row;
  row.seqlen = g.seqlen_k;
  row.seqlen_q = g.seqlen_q;
  row.head_dim = g.head_dim;
  row.batch = g.batch;
  row.heads = g.heads;
  row.heads_kv = g.heads_kv;
  row.causal = causal;
  row.mode = a.mode;
  row.flops = forward_flops(g.batch, g.heads, g.seqlen_q, g.seqlen_k, g.head_dim, g.head_dim, causal) *
              (a.mode == "fwd" ? 1.0 : a.mode == "bwd" ? 2.5 : 3.5);
  return row;
}

namespace {

// CPU defaults: small enough that the default sweep (reference included) takes
// about a minute on 2 cores.
constexpr int64_t kCpuBatchTokens = 8192;
constexpr int64_t kCpuModelDim = 256;
// GPU defaults: the contract's grid, timed with more repeats (runs are short).
constexpr int64_t kCudaBatchTokens = 16384;
constexpr int64_t kCudaModelDim = 2048;
constexpr int kCudaRepeats = 20;
constexpr int kCudaWarmup = 3;
const std::vector<int64_t> kCudaHdims = {64, 128, 256};
// The reference keeps Sq*Sk doubles per (batch, head) per thread.
constexpr double kReferenceMemoryLimit = 2.0 * 1024 * 1024 * 1024;
// The reference runs at most --repeats times and stops after this much time.
constexpr double kReferenceBudgetMs = 10000.0;

// The buffers of one grid point (GridShape: Dv = D).
struct Problem {
  HostTensor q, k, v, out, lse, dout, dq, dk, dv;

  Problem(flashattn::DType dtype, const GridShape& g, bool backward) {
    std::mt19937_64 rng(0x5eed + static_cast<uint64_t>(g.seqlen_k * 1000 + g.head_dim));
    const std::vector<int64_t> qshape = g.q_shape(), kshape = g.kv_shape();
    q = HostTensor::zeros(dtype, qshape);
    k = HostTensor::zeros(dtype, kshape);
    v = HostTensor::zeros(dtype, kshape);
    for (HostTensor* t : {&q, &k, &v}) fill_normal(*t, rng);
    out = HostTensor::zeros(dtype, qshape);
    lse = HostTensor::zeros(flashattn::DType::f32, g.lse_shape());
    if (backward) {
      dout = HostTensor::zeros(dtype, qshape);
      fill_normal(dout, rng);
      dq = HostTensor::zeros(dtype, qshape);
      dk = HostTensor::zeros(dtype, kshape);
      dv = HostTensor::zeros(dtype, kshape);
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

BenchRow bench_point(const BenchArgs& a, flashattn::DType dtype, flashattn::Backend backend,
                     int threads, int64_t n, int64_t d, bool causal) {
  const GridShape g = grid_shape(a, n, d);
  BenchRow row = shaped_row(a, g, causal);
  Problem p(dtype, g, a.mode != "fwd");
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
                           static_cast<double>(g.seqlen_q) * static_cast<double>(n) * 8.0;
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

// auto: cuda when a GPU is visible and it runs the dtype (default bf16 there),
// every head dim (default 64,128,256) and the mode; else cpu.
flashattn::Backend bench_backend(const BenchArgs& a, const CLI::App& app) {
  const flashattn::Backend b = parse_backend(a.backend);
  if (b != flashattn::Backend::automatic) return b;
  const flashattn::DType dtype = app.count("--dtype") ? parse_dtype(a.dtype) : flashattn::DType::bf16;
  const std::vector<int64_t> hdims = app.count("--hdim") ? a.hdims : kCudaHdims;
  for (int64_t d : hdims)
    if (!cuda_runs(dtype, d, d, a.mode != "fwd")) return flashattn::Backend::cpu;
  return flashattn::Backend::cuda;
}

int run_bench(BenchArgs& a, const CLI::App& app) {
  const flashattn::Backend backend = bench_backend(a, app);
  const bool cuda = backend == flashattn::Backend::cuda;
  // Defaults: the contract's grid on the GPU, a small one on the CPU.
  if (app.count("--dtype") == 0) a.dtype = cuda ? "bf16" : "f32";
  if (app.count("--hdim") == 0) a.hdims = cuda ? kCudaHdims : std::vector<int64_t>{128};
  if (app.count("--seqlens") == 0)
    a.seqlens = cuda ? std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384}
                     : std::vector<int64_t>{512, 1024, 2048, 4096};
  if (app.count("--batch-tokens") == 0) a.batch_tokens = cuda ? kCudaBatchTokens : kCpuBatchTokens;
  if (app.count("--model-dim") == 0) a.model_dim = cuda ? kCudaModelDim : kCpuModelDim;
  if (app.count("--repeats") == 0) a.repeats = cuda ? kCudaRepeats : 5;
  if (app.count("--warmup") == 0) a.warmup = cuda ? kCudaWarmup : 1;
  const flashattn::DType dtype = parse_dtype(a.dtype);
  if (!a.json.empty()) check_output_paths({{"--json", a.json, nullptr}});

  const int threads = cuda ? 0 : a.threads > 0 ? a.threads : omp_get_max_threads();
  for (int64_t d : a.hdims)  // every shape refused before any point runs
    for (int64_t n : a.seqlens) grid_shape(a, n, d);
  BenchMeta meta{flashattn::to_string(flashattn::resolve_backend(backend, {})), a.dtype, threads,
                 a.batch_tokens, a.model_dim, a.warmup, a.repeats, cuda ? device_name() : "",
                 a.seqlen_q > 0 || a.kv_heads > 0};
  std::vector<BenchRow> rows;
  if (cuda) {
    rows = run_bench_cuda(a, dtype, meta);
  } else {
    std::vector<bool> masks;
    if (a.both_masks) masks = {false, true};
    else masks = {a.causal};
    print_bench_header(meta);
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
          print_bench_row(meta, rows.back());
        }
  }
  if (!a.json.empty()) write_bench_json(a.json, meta, rows);
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& root) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* app = root.add_subcommand(
      "bench", "Time a backend on the contract's grid (on the CPU, against the float64 reference)");
  app->footer(
      "The grid: B*N = --batch-tokens, Hq*D = --model-dim, so B = max(1, tokens/N) and "
      "Hq = max(1, model_dim/D); Dv = Dqk = D, Hkv = Hq, Sq = N, random normal inputs. "
      "--seqlen-q and --kv-heads give decoding shapes: Sq query rows per sequence against N "
      "keys (causal: bottom-right aligned), Hq query heads sharing Hkv kv heads. TFLOP/s count "
      "2*B*Hq*visible(i,j)*(Dqk+Dv) for the forward, 2.5x for the backward. Rows are timed "
      "only, never checked for accuracy (flashattn check does that).\n"
      "CPU (cpu, reference): defaults --dtype f32 --hdim 128 --seqlens 512,1024,2048,4096 "
      "--batch-tokens 8192 --model-dim 256 --warmup 1 --repeats 5 (about a minute on 2 cores). "
      "Times are the median of --repeats after --warmup (steady_clock). The reference is skipped "
      "when its Sq*Sk doubles per thread would pass 2 GiB; it runs up to --repeats times, at most "
      "~10 s, without warm-up. Memory is the peak heap of a call beyond its inputs and outputs, "
      "divided by the threads.\n"
      "GPU (cuda): our side only (bench/gpu/bench_gpu.py times the peers), no reference. "
      "Defaults: the contract's grid, --dtype bf16 --hdim 64,128,256 --seqlens "
      "512,1024,...,16384 --batch-tokens 16384 --model-dim 2048 --warmup 3 --repeats 20. Inputs "
      "stay on the GPU; each run is timed with two CUDA events, the median is reported. Memory is "
      "the drop of free device memory (cudaMemGetInfo) across the first call: what the call "
      "kept, 0 for a backend that allocates nothing; '-' when another process changed it.");
  add_backend_option(*app, args->backend,
                     ". Here auto is cuda when the GPU runs the dtype, every --hdim and the --mode");
  app->add_option("--dtype", args->dtype, "f32|f16|bf16 (default f32 on the CPU, bf16 on cuda)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--hdim", args->hdims, "head dims, comma separated (default 128; cuda 64,128,256)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app->add_option("--seqlens", args->seqlens,
                  "sequence lengths N (default 512,1024,2048,4096; cuda up to 16384)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app->add_option("--seqlen-q", args->seqlen_q,
                  "query rows per sequence (default: N, the square grid), e.g. 1 for decoding")
      ->check(CLI::PositiveNumber);
  app->add_option("--kv-heads", args->kv_heads, "kv heads (default: Hq); must divide Hq (GQA / MQA)")
      ->check(CLI::PositiveNumber);
  app->add_flag("--causal", args->causal, "causal mask");
  app->add_flag("--both-masks", args->both_masks, "each point without and with the causal mask");
  app->add_option("--mode", args->mode, "fwd|bwd|fwdbwd")
      ->capture_default_str()
      ->check(CLI::IsMember({"fwd", "bwd", "fwdbwd"}));
  app->add_option("--batch-tokens", args->batch_tokens, "B*N (CPU default 8192, cuda 16384)")
      ->check(CLI::PositiveNumber);
  app->add_option("--model-dim", args->model_dim, "Hq*D (CPU default 256, cuda 2048)")
      ->check(CLI::PositiveNumber);
  app->add_option("--repeats", args->repeats, "timed runs, the median is reported (default 5; cuda 20)")
      ->check(CLI::Range(1, 1000000));
  app->add_option("--warmup", args->warmup, "untimed runs first (default 1; cuda 3)")
      ->check(CLI::Range(0, 1000000));
  app->add_option("--threads", args->threads, "CPU threads; 0: OpenMP default")
      ->capture_default_str()
      ->check(CLI::Range(0, flashattn::kMaxThreads));
  app->add_flag("--no-reference", args->no_reference, "do not time the reference");
  app->add_option("--json", args->json, "also write the results as JSON to this file");
  app->add_flag("--progress", args->progress, "progress bar on stderr even when not a terminal");
  return {app, [args, app] { return run_bench(*args, *app); }};
}

}  // namespace facli
