// Shared between the bench sweeps (bench.cpp on the host, bench_cuda.cpp on
// the GPU) and their table/JSON output (bench_report.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <flashattn/types.h>

namespace facli {

struct BenchArgs {
  std::string backend = "auto";
  std::string dtype;
  std::vector<int64_t> hdims, seqlens;
  bool causal = false, both_masks = false;
  std::string mode = "fwd";
  int64_t batch_tokens = 0, model_dim = 0;
  int64_t seqlen_q = 0, kv_heads = 0;  // 0: Sq = N, Hkv = Hq (the square grid)
  int repeats = 5, warmup = 1, threads = 0;
  bool no_reference = false, progress = false;
  std::string json;
};

struct BenchRow {
  int64_t seqlen = 0, head_dim = 0, batch = 0, heads = 0;  // seqlen: the keys' N
  int64_t seqlen_q = 0, heads_kv = 0;
  bool causal = false;
  std::string mode;  // fwd | bwd | fwdbwd
  double flops = 0;  // by the contract's count
  int repeats = 0;
  double flash_ms = 0;  // median
  double flash_tflops = 0;
  int64_t flash_peak_bytes = 0;  // peak heap beyond inputs/outputs, all threads (GPU: see
                                 // bench_cuda.cpp)
  bool peak_known = true;        // false: not measurable, shown as "-"
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
  std::string device;  // the GPU's name; empty on the host
  bool shaped = false;  // --seqlen-q or --kv-heads given: the table shows Sq and Hkv
};

// The tensors of one grid point: q, out, dout [B, Sq, Hq, D], k, v [B, N, Hkv, D].
struct GridShape {
  int64_t batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  std::vector<int64_t> q_shape() const { return {batch, seqlen_q, heads, head_dim}; }
  std::vector<int64_t> kv_shape() const { return {batch, seqlen_k, heads_kv, head_dim}; }
  std::vector<int64_t> lse_shape() const { return {batch, heads, seqlen_q}; }
};
// B = max(1, batch tokens / N), Hq = max(1, model dim / D), Sq and Hkv from
// --seqlen-q and --kv-heads; a --kv-heads that does not divide Hq is refused.
GridShape grid_shape(const BenchArgs& args, int64_t n, int64_t d);
// A row's shape fields and its FLOPs (the contract's count, mode included).
BenchRow shaped_row(const BenchArgs& args, const GridShape& g, bool causal);

void print_bench_header(const BenchMeta& meta);
void print_bench_row(const BenchMeta& meta, const BenchRow& row);
void write_bench_json(const std::string& path, const BenchMeta& meta,
                      const std::vector<BenchRow>& rows);

// The median of timings (not empty).
double median(std::vector<double> v);

// The sweep on the GPU (the cuda backend): `dtype` resolved, defaults filled in.
std::vector<BenchRow> run_bench_cuda(const BenchArgs& args, flashattn::DType dtype,
                                     const BenchMeta& meta);

// The full command line, for the JSON record (set by main).
void set_command_line(int argc, char** argv);

}  // namespace facli
