// How the CPU backend's tile products scale with threads on their own, with
// operands in each thread's cache: the hardware's share of the backend's
// thread scaling (docs/cpu_notes.md v9: the bf16 paths reach 9-10.5x at 16
// threads while fp32 reaches 13-15x; is that AMX per core slowing down when
// every core runs it, or the kernels' memory traffic?).
//
// Each thread repeats one attention-shaped product, C[64][64] = A[64][D] B[D][64]
// (S = Q K^T of a 64-row query tile against 64 keys), on its own buffers for
// --seconds, first on one thread, then on every thread count asked for; printed:
// GFLOP/s in all and the speed-up over one thread, per level (fp32 on the
// AVX-512 table, bf16 on AMX and on AVX512-BF16 where present). The one-thread
// point is timed again after the others and the faster of the two is the base
// (the first AMX run of a process was 35% slower than the second on the dev box).
//
// First, a clock probe: a loop of dependent multiply-adds in registers (no
// memory, latency-bound, so its speed follows the core clock alone). Its
// speed-up at N threads is the ceiling any kernel's can reach on this host: a
// lone busy core may run at a higher clock than N busy ones (turbo).
//
//   flashattn_tile_scaling [--threads 1,2,4,8,16] [--hdim 128] [--seconds 1]
#include <omp.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cpu/kernels/isa.h"
#include "backends/cpu/kernels/kernels.h"

namespace {

namespace cpu = flashattn::detail::cpu;

// Calls of `once` per second on this thread, after a warm-up and a barrier with
// the other threads of the enclosing parallel region (called inside it).
template <typename Once>
double calls_per_second(Once&& once, int batch, double seconds) {
  for (int i = 0; i < 200; ++i) once();  // warm caches and clocks
#pragma omp barrier
  const auto t0 = std::chrono::steady_clock::now();
  int64_t n = 0;
  double elapsed = 0;
  do {
    for (int i = 0; i < batch; ++i) once();
    n += batch;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed < seconds);
  return static_cast<double>(n) / elapsed;
}

// Products per second of all threads together, each on its own operands.
double run(const cpu::Kernels& k, bool bf16, int threads, int64_t d, double seconds) {
  constexpr int64_t M = 64, N = 64;
  std::vector<double> per_thread(static_cast<size_t>(threads), 0.0);
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> a(static_cast<size_t>(M * d), 0.5f), b(static_cast<size_t>(d * N), 0.25f),
        c(static_cast<size_t>(M * N));
    // bf16 operands: ones of 0x3f00 (0.5) are as good as any for timing; B in
    // the VNNI panels the product reads (16 columns per panel).
    std::vector<uint16_t> a16(static_cast<size_t>(M * d), 0x3f00), b16(static_cast<size_t>(d * N), 0x3e80);
    if (bf16 && k.thread_begin) k.thread_begin();
    auto once = [&] {
      if (bf16)
        k.gemm_bf16(M, N, d, a16.data(), d, b16.data(), d * 16, c.data(), N, false);
      else
        k.gemm_f32(M, N, d, a.data(), d, b.data(), N, c.data(), N, false);
    };
    per_thread[static_cast<size_t>(omp_get_thread_num())] = calls_per_second(once, 100, seconds);
    if (bf16 && k.thread_end) k.thread_end();
  }
  double sum = 0;
  for (double x : per_thread) sum += x;
  return sum;
}

volatile float g_probe_sink;  // the probe's results go somewhere, so the loop stays

// Dependent multiply-add chains per second, all threads together (clock probe).
double clock_probe(int threads, double seconds) {
  constexpr int kChains = 16, kSteps = 4096;
  std::vector<double> per_thread(static_cast<size_t>(threads), 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    float acc[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = 1.0f + 0.01f * float(j);
    const float m = 0.9999999f + 0.f * g_probe_sink, a = 1e-7f;  // m not a compile-time constant
    auto once = [&] {
      for (int i = 0; i < kSteps; ++i)
        for (int j = 0; j < kChains; ++j) acc[j] = acc[j] * m + a;
    };
    per_thread[static_cast<size_t>(t)] = calls_per_second(once, 20, seconds) * kSteps * kChains;
    float sink = 0;
    for (float x : acc) sink += x;
    if (t == 0) g_probe_sink = sink;
  }
  double sum = 0;
  for (double x : per_thread) sum += x;
  return sum;
}

// One printed row: rate(t) at every thread count, the one-thread point timed
// again after the busy ones and the faster of the two taken as the base.
template <typename Rate>
void print_row(const char* name, const std::vector<int>& threads, Rate&& rate, int decimals) {
  double one = rate(1);
  std::vector<double> at;
  for (int t : threads) at.push_back(t == 1 ? one : rate(t));
  one = std::max(one, rate(1));
  std::printf("%-17s", name);
  for (size_t i = 0; i < threads.size(); ++i) {
    const double g = threads[i] == 1 ? one : at[i];
    std::printf("  %dT %8.*f (%5.2fx)", threads[i], decimals, g / 1e9, g / one);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2, 4, 8, 16};
  int64_t d = 128;
  double seconds = 1.0;
  CLI::App app{"The CPU tile products' own thread scaling, operands in cache (see the header of "
               "bench/cpu/tile_scaling.cpp)"};
  app.add_option("--threads", threads, "thread counts, comma-separated")->delimiter(',')->check(CLI::Range(1, 4096));
  app.add_option("--hdim", d, "the product's inner dimension D")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app.add_option("--seconds", seconds, "time per point")->check(CLI::Range(0.001, 3600.0));
  CLI11_PARSE(app, argc, argv);
  if (d % cpu::kBf16Block != 0) {
    std::fprintf(stderr, "--hdim must be a multiple of %lld\n", static_cast<long long>(cpu::kBf16Block));
    return 2;
  }
  struct Case {
    const char* name;
    cpu::Isa isa;
    bool bf16;
  };
  const Case cases[] = {{"fp32 avx512", cpu::Isa::avx512, false},
                        {"bf16 avx512_bf16", cpu::Isa::avx512_bf16, true},
                        {"bf16 amx", cpu::Isa::amx, true}};
  print_row("clock probe", threads, [&](int t) { return clock_probe(t, seconds); }, 2);
  std::printf("   (G multiply-adds/s; the ceiling of any kernel's speed-up)\n");
  const double flops = 2.0 * 64 * 64 * static_cast<double>(d);
  std::printf("product 64 x 64 x %lld per call, %.1f s per point; GFLOP/s (speed-up over 1 thread)\n",
              static_cast<long long>(d), seconds);
  for (const Case& c : cases) {
    if (static_cast<int>(c.isa) > static_cast<int>(cpu::supported_isa())) {
      std::printf("%-17s not on this CPU\n", c.name);
      continue;
    }
    const cpu::Kernels& k = cpu::kernels(c.isa);
    if (c.bf16 && !k.gemm_bf16) continue;
    print_row(c.name, threads, [&](int t) { return run(k, c.bf16, t, d, seconds) * flops; }, 1);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
