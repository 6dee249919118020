#include "attn_options.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "errors.h"

namespace facli {

void add_attn_options(CLI::App& app, AttnArgs& a) {
  add_backend_option(app, a.backend);
  app.add_option("--dtype", a.dtype,
                 "f32|f16|bf16; default: from --q ('<f4' f32, '<f2' f16). bf16 files are "
                 "uint16 ('<u2') and need --dtype bf16");
  a.scale_opt = app.add_option("--scale", a.scale, "softmax scale (default 1/sqrt(Dqk))");
  app.add_flag("--causal", a.causal, "causal mask (bottom-right aligned)");
  app.add_option("--window", a.window,
                 "local window L,R (-1: unbounded), e.g. --window=-1,0 or --window 128,0");
  app.add_option("--softcap", a.softcap, "softcap F: s = F*tanh(s/F); 0 is off")
      ->capture_default_str();
  app.add_option("--alibi", a.alibi, "ALiBi slopes .npy, float32 [Hq] or [B, Hq]");
  app.add_option("--dropout", a.dropout, "dropout probability in [0, 1)")->capture_default_str();
  app.add_option("--seed", a.seed, "dropout seed")->type_name("UINT64")->capture_default_str();
  app.add_option("--offset", a.offset, "dropout offset")->type_name("UINT64")->capture_default_str();
  app.add_option("--cu-seqlens-q", a.cu_seqlens_q,
                 "packed layout: int32 (or int64) [B+1] offsets of the query sequences");
  app.add_option("--cu-seqlens-k", a.cu_seqlens_k, "packed layout: offsets of the key sequences");
  a.max_q_opt = app.add_option("--max-seqlen-q", a.max_seqlen_q,
                               "packed: bound on the query lengths (default: computed)");
  a.max_k_opt = app.add_option("--max-seqlen-k", a.max_seqlen_k,
                               "packed: bound on the key lengths (default: computed)");
  app.add_flag("--deterministic", a.deterministic, "bitwise reproducible backward");
  app.add_option("--threads", a.threads, "CPU threads; 0: OpenMP default")
      ->capture_default_str()
      ->check(CLI::Range(0, flashattn::kMaxThreads));
}

uint64_t parse_uint64(const std::string& text, const std::string& option) {
  uint64_t v = 0;
  const char* e = text.data() + text.size();
  const auto r = std::from_chars(text.data(), e, v);
  if (text.empty() || r.ec != std::errc() || r.ptr != e)
    throw CliError(option, fmt::format("expected an unsigned 64-bit integer, got '{}'", text));
  return v;
}

flashattn::Window parse_window(const std::string& text) {
  const auto bad = [&]() {
    return CliError("--window", fmt::format("expected L,R as two integers (-1: unbounded), "
                                            "e.g. --window=-1,0; got '{}'", text));
  };
  const size_t comma = text.find(',');
  if (comma == std::string::npos) throw bad();
  const auto parse = [&](const char* b, const char* e) {
    int64_t v = 0;
    const auto r = std::from_chars(b, e, v);
    if (r.ec != std::errc() || r.ptr != e || b == e) throw bad();
    return v;
  };
  const char* s = text.data();
  flashattn::Window w;
  w.left = parse(s, s + comma);
  w.right = parse(s + comma + 1, s + text.size());
  return w;
}

namespace {
// double -> float without undefined behaviour: out-of-range values become +-inf,
// which the library then refuses by name.
float narrow(double x) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  if (std::isfinite(x) && std::abs(x) > std::numeric_limits<float>::max()) return x > 0 ? inf : -inf;
  return static_cast<float>(x);
}
}  // namespace

flashattn::Options make_options(const AttnArgs& a) {
  flashattn::Options o;
  o.backend = parse_backend(a.backend);
  if (a.scale_opt && a.scale_opt->count() > 0) o.softmax_scale = narrow(a.scale);
  o.causal = a.causal;
  if (!a.window.empty()) o.window = parse_window(a.window);
  o.softcap = narrow(a.softcap);
  o.dropout_p = narrow(a.dropout);
  o.seed = parse_uint64(a.seed, "--seed");
  o.offset = parse_uint64(a.offset, "--offset");
  o.deterministic = a.deterministic;
  o.num_threads = a.threads;
  return o;
}

}  // namespace facli
