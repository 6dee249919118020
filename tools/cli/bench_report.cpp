// The bench table on stdout and the JSON record of a sweep.
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench.h"
#include "errors.h"

namespace facli {

namespace {

std::string g_command_line;

std::string human_bytes(double b) {
  if (b < 1024) return fmt::format("{:.0f} B", b);
  if (b < 1024 * 1024) return fmt::format("{:.1f} KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", b / (1024 * 1024));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The shape columns: N D B H, and with decoding shapes Sq and Hkv too.
std::string shape_header(const BenchMeta& m) {
  return m.shaped ? fmt::format("{:>6} {:>6} {:>4} {:>4} {:>4} {:>4}", "Sq", "N", "D", "B", "H", "Hkv")
                  : fmt::format("{:>6} {:>4} {:>4} {:>4}", "N", "D", "B", "H");
}
std::string shape_cells(const BenchMeta& m, const BenchRow& r) {
  return m.shaped ? fmt::format("{:>6} {:>6} {:>4} {:>4} {:>4} {:>4}", r.seqlen_q, r.seqlen, r.head_dim,
                                r.batch, r.heads, r.heads_kv)
                  : fmt::format("{:>6} {:>4} {:>4} {:>4}", r.seqlen, r.head_dim, r.batch, r.heads);
}

}  // namespace

void set_command_line(int argc, char** argv) {
  g_command_line.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) g_command_line.push_back(' ');
    g_command_line.append(argv[i]);
  }
}

void print_bench_header(const BenchMeta& m) {
  if (!m.device.empty()) {
    fmt::print("backend {} on {}, dtype {}, B*N = {}, Hq*D = {}, warm-up {}, median of {} "
               "(CUDA events)\n",
               m.backend, m.device, m.dtype, m.batch_tokens, m.model_dim, m.warmup, m.repeats);
    fmt::print("rows are timed only, not checked (flashattn check --backend cuda checks accuracy)\n");
    fmt::print("{} {:>6} {:>6} | {:>10} {:>8} | {:>12}\n", shape_header(m), "causal", "mode", "ms",
               "TFLOP/s", "device mem");
    std::fflush(stdout);
    return;
  }
  fmt::print("backend {}, dtype {}, {} threads, B*N = {}, Hq*D = {}, warm-up {}, median of {}\n",
             m.backend, m.dtype, m.threads, m.batch_tokens, m.model_dim, m.warmup, m.repeats);
  fmt::print("rows are timed only, not checked (flashattn check checks accuracy)\n");
  fmt::print("{} {:>6} {:>6} | {:>10} {:>8} | {:>10} {:>8} {:>8} | {:>14} {:>14}\n", shape_header(m),
             "causal", "mode", "flash ms", "TFLOP/s", "ref ms", "TFLOP/s", "speedup", "flash mem/thr",
             "ref mem/thr");
  std::fflush(stdout);
}

void print_bench_row(const BenchMeta& m, const BenchRow& r) {
  const std::string flash_mem =
      r.peak_known ? human_bytes(r.flash_peak_bytes_per_thread) : std::string("-");
  if (!m.device.empty()) {
    fmt::print("{} {:>6} {:>6} | {:>10.3f} {:>8.1f} | {:>12}\n", shape_cells(m, r),
               r.causal ? "yes" : "no", r.mode, r.flash_ms, r.flash_tflops, flash_mem);
    std::fflush(stdout);
    return;
  }
  const auto ms = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.2f}", *v) : std::string("-");
  };
  const std::string ref_mem =
      r.ref_peak_bytes_per_thread ? human_bytes(*r.ref_peak_bytes_per_thread) : std::string("-");
  fmt::print("{} {:>6} {:>6} | {:>10.2f} {:>8.4f} | {:>10} {:>8} {:>8} | {:>14} {:>14}\n",
             shape_cells(m, r), r.causal ? "yes" : "no", r.mode, r.flash_ms, r.flash_tflops, ms(r.ref_ms),
             r.ref_tflops ? fmt::format("{:.4f}", *r.ref_tflops) : std::string("-"),
             r.speedup ? fmt::format("{:.1f}x", *r.speedup) : std::string("-"),
             flash_mem, ref_mem);
  if (!r.ref_skipped.empty()) fmt::print("       reference skipped: {}\n", r.ref_skipped);
  std::fflush(stdout);
}

void write_bench_json(const std::string& path, const BenchMeta& m,
                      const std::vector<BenchRow>& rows) {
  nlohmann::json j;
  j["date"] = utc_now();
  j["host"] = host_name();
  j["command"] = g_command_line;
  j["backend"] = m.backend;
  j["device"] = m.device.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.device);
  j["timer"] = m.device.empty() ? "steady_clock" : "cuda_event";
  j["checked"] = false;  // bench times; flashattn check checks
  j["dtype"] = m.dtype;
  j["threads"] = m.threads;
  j["batch_tokens"] = m.batch_tokens;
  j["model_dim"] = m.model_dim;
  j["warmup"] = m.warmup;
  j["repeats"] = m.repeats;
  j["rows"] = nlohmann::json::array();
  for (const BenchRow& r : rows) {
    j["rows"].push_back({
        {"seqlen", r.seqlen},
        {"seqlen_q", r.seqlen_q},
        {"head_dim", r.head_dim},
        {"batch", r.batch},
        {"heads", r.heads},
        {"heads_kv", r.heads_kv},
        {"causal", r.causal},
        {"mode", r.mode},
        {"flops", r.flops},
        {"repeats", r.repeats},
        {"flash_ms", r.flash_ms},
        {"flash_tflops", r.flash_tflops},
        {"flash_peak_bytes", r.peak_known ? nlohmann::json(r.flash_peak_bytes) : nlohmann::json(nullptr)},
        {"flash_peak_bytes_per_thread",
         r.peak_known ? nlohmann::json(r.flash_peak_bytes_per_thread) : nlohmann::json(nullptr)},
        {"ref_ms", opt(r.ref_ms)},
        {"ref_tflops", opt(r.ref_tflops)},
        {"speedup", opt(r.speedup)},
        {"ref_peak_bytes", opt(r.ref_peak_bytes)},
        {"ref_peak_bytes_per_thread", opt(r.ref_peak_bytes_per_thread)},
        {"ref_repeats", r.ref_repeats},
        {"ref_skipped", r.ref_skipped.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.ref_skipped)},
    });
  }
  std::ofstream f(path);
  f << j.dump(2) << '\n';
  f.close();
  if (!f) throw CliError(file_label("--json", path), "cannot write the file");
}

}  // namespace facli
