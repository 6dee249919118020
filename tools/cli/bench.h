// Shared between the bench sweep (bench.cpp) and its table/JSON output
// (bench_report.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace facli {

struct BenchRow {
  int64_t seqlen = 0, head_dim = 0, batch = 0, heads = 0;
  bool causal = false;
  std::string mode;  // fwd | bwd | fwdbwd
  double flops = 0;  // by the contract's count
  int repeats = 0;
  double flash_ms = 0;  // median
  double flash_tflops = 0;
  int64_t flash_peak_bytes = 0;  // peak heap beyond inputs/outputs, all threads
  double flash_peak_bytes_per_thread = 0;
  // The reference, when it ran.
  std::optional<double> ref_ms, ref_tflops, speedup;
  std::optional<int64_t> ref_peak_bytes;
  std::optional<double> ref_peak_bytes_per_thread;
  int ref_repeats = 0;
  std::string ref_skipped;  // why it did not run
};

struct BenchMeta {
  std::string backend, dtype;
  int threads = 0;
  int64_t batch_tokens = 0, model_dim = 0;
  int warmup = 0, repeats = 0;
};

void print_bench_header(const BenchMeta& meta);
void print_bench_row(const BenchRow& row);
void write_bench_json(const std::string& path, const BenchMeta& meta,
                      const std::vector<BenchRow>& rows);

// The full command line, for the JSON record (set by main).
void set_command_line(int argc, char** argv);

}  // namespace facli
