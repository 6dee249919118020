// `flashattn info`: what this build and this machine offer.
#include <omp.h>

#include <fmt/format.h>
#include <flashattn/flashattn.h>

#include "commands.h"
#include "device.h"

namespace facli {

namespace {

int run_info() {
  fmt::print("flashattn {}\n", flashattn::version());
#if defined(FLASHATTN_WITH_CUDA)
  const std::string cuda = flashattn::cuda_available() ? "available: " + device_name()
                                                       : "built, but no CUDA device is visible";
#else
  const std::string cuda = "not in this build";
#endif
  fmt::print("backends: reference (float64 oracle), cpu (flash, OpenMP), cuda ({})\n", cuda);
  fmt::print("OpenMP max threads: {}\n", omp_get_max_threads());
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // Features the CPU reports (cpuid); AMX also needs the OS to grant its tile state.
  const std::pair<const char*, bool> features[] = {
      {"avx2", __builtin_cpu_supports("avx2")},
      {"fma", __builtin_cpu_supports("fma")},
      {"avx512f", __builtin_cpu_supports("avx512f")},
      {"avx512bw", __builtin_cpu_supports("avx512bw")},
      {"avx512vl", __builtin_cpu_supports("avx512vl")},
      {"avx512_bf16", __builtin_cpu_supports("avx512bf16")},
      {"avx512_fp16", __builtin_cpu_supports("avx512fp16")},
      {"amx_tile", __builtin_cpu_supports("amx-tile")},
      {"amx_bf16", __builtin_cpu_supports("amx-bf16")},
  };
  std::string have, lack;
  for (auto [name, on] : features) (on ? have : lack) += fmt::format(" {}", name);
  fmt::print("CPU features:{}\n", have.empty() ? " (none of those checked)" : have);
  if (!lack.empty()) fmt::print("CPU lacks:{}\n", lack);
#else
  fmt::print("CPU features: (not an x86 build)\n");
#endif
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& root) {
  CLI::App* app = root.add_subcommand("info", "Version, backends, threads and CPU features");
  return {app, [] { return run_info(); }};
}

}  // namespace facli
