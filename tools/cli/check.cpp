// `flashattn check`: random configurations of every feature, each compared
// against the float64 reference backend with the contract's accuracy rule.
#include <chrono>
#include <cstring>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <flashattn/flashattn.h>

#include "accuracy.h"
#include "attn_options.h"
#include "backend_choice.h"
#include "check_config.h"
#include "commands.h"
#include "errors.h"
#include "host_tensor.h"
#include "naive.h"
#include "progress.h"
#include "staging.h"

namespace facli {

namespace {

using flashattn::DType;

struct CheckArgs {
  std::string backend = "auto";
  int trials = 200;
  std::string seed = "0";
  int64_t max_seqlen = 300;
  int64_t only_trial = -1;
  int threads = 0;
  bool verbose = false, progress = false;
};

// The tensors of one trial, in the contract's layout for the config.
struct Trial {
  const CheckConfig& c;
  HostTensor q, k, v, alibi, cu_q, cu_k, dout;
  flashattn::Varlen varlen;

  Trial(const CheckConfig& cfg, std::mt19937_64& rng) : c(cfg) {
    const int64_t sq = c.packed ? c.total_q() : c.seqlen_q();
    const int64_t sk = c.packed ? c.total_k() : c.seqlen_k();
    q = HostTensor::zeros(c.dtype, shape(sq, c.heads_q, c.dqk));
    k = HostTensor::zeros(c.dtype, shape(sk, c.heads_kv, c.dqk));
    v = HostTensor::zeros(c.dtype, shape(sk, c.heads_kv, c.dv));
    fill_normal(q, rng, c.q_sigma);
    fill_normal(k, rng);
    fill_normal(v, rng);
    dout = HostTensor::zeros(c.dtype, out_shape());
    fill_normal(dout, rng);
    if (c.alibi) {
      alibi = HostTensor::zeros(DType::f32, c.alibi == 1 ? std::vector<int64_t>{c.heads_q}
                                                         : std::vector<int64_t>{c.batch, c.heads_q});
      std::uniform_real_distribution<float> slope(0.f, 0.5f);
      for (int64_t i = 0; i < alibi.numel(); ++i) alibi.set(i, slope(rng));
    }
    if (c.packed) {
      cu_q = HostTensor::zeros(DType::i32, {c.batch + 1});
      cu_k = HostTensor::zeros(DType::i32, {c.batch + 1});
      for (int64_t b = 0; b <= c.batch; ++b) {
        const int32_t qo = static_cast<int32_t>(c.q_row0(b)), ko = static_cast<int32_t>(c.k_row0(b));
        std::memcpy(cu_q.data.data() + 4 * b, &qo, 4);
        std::memcpy(cu_k.data.data() + 4 * b, &ko, 4);
      }
      varlen = {cu_q.view(), cu_k.view(), c.seqlen_q(), c.seqlen_k()};
    }
  }

  std::vector<int64_t> shape(int64_t rows, int64_t heads, int64_t dim) const {
    if (c.packed) return {rows, heads, dim};
    return {c.batch, rows, heads, dim};
  }
  std::vector<int64_t> out_shape() const { return shape(c.packed ? c.total_q() : c.seqlen_q(), c.heads_q, c.dv); }
  std::vector<int64_t> lse_shape() const {
    if (c.packed) return {c.heads_q, c.total_q()};
    return {c.batch, c.heads_q, c.seqlen_q()};
  }

  flashattn::Options options(flashattn::Backend backend, int threads) {
    flashattn::Options o;
    o.softmax_scale = c.scale;
    o.causal = c.causal;
    o.window = {c.window_left, c.window_right};
    o.softcap = c.softcap;
    if (c.alibi) o.alibi_slopes = alibi.view();
    o.dropout_p = c.dropout;
    o.seed = c.seed;
    o.offset = c.offset;
    o.deterministic = c.deterministic;
    o.backend = backend;
    o.num_threads = threads;
    return o;
  }

  // On the device (`on_device`) the call gets copies; the results come back to
  // the host tensors either way.
  void forward(const flashattn::Options& o, bool on_device, HostTensor& out, HostTensor& lse) {
    out = HostTensor::zeros(c.dtype, out_shape());
    lse = HostTensor::zeros(DType::f32, lse_shape());
    Staging st(on_device);
    const flashattn::Options so = staged(st, o);
    const flashattn::TensorView qv = st.in(q), kv = st.in(k), vv = st.in(v);
    const flashattn::TensorView ov = st.out(out), lv = st.out(lse);
    if (c.packed)
      flashattn::forward_varlen(qv, kv, vv, ov, &lv, staged(st), so);
    else
      flashattn::forward(qv, kv, vv, ov, &lv, so);
    st.finish();
  }

  void backward(const flashattn::Options& o, bool on_device, HostTensor& out, HostTensor& lse,
                HostTensor& dq, HostTensor& dk, HostTensor& dv) {
    dq = HostTensor::zeros(c.dtype, q.shape);
    dk = HostTensor::zeros(c.dtype, k.shape);
    dv = HostTensor::zeros(c.dtype, v.shape);
    Staging st(on_device);
    const flashattn::Options so = staged(st, o);
    const flashattn::TensorView dov = st.in(dout), qv = st.in(q), kv = st.in(k), vv = st.in(v);
    const flashattn::TensorView ov = st.in(out), lv = st.in(lse);
    const flashattn::TensorView dqv = st.out(dq), dkv = st.out(dk), dvv = st.out(dv);
    if (c.packed)
      flashattn::backward_varlen(dov, qv, kv, vv, ov, lv, dqv, dkv, dvv, staged(st), so);
    else
      flashattn::backward(dov, qv, kv, vv, ov, lv, dqv, dkv, dvv, so);
    st.finish();
  }

 private:
  flashattn::Options staged(Staging& st, flashattn::Options o) {
    if (c.alibi) o.alibi_slopes = st.in(alibi);
    return o;
  }
  flashattn::Varlen staged(Staging& st) {
    return {st.in(cu_q), st.in(cu_k), varlen.max_seqlen_q, varlen.max_seqlen_k};
  }
};

std::vector<Verdict> run_trial(const CheckConfig& c, std::mt19937_64& rng,
                               flashattn::Backend backend, int threads) {
  Trial t(c, rng);
  const bool dev = backend == flashattn::Backend::cuda;
  const flashattn::Options flash = t.options(backend, threads);
  const flashattn::Options ref = t.options(flashattn::Backend::reference, threads);
  HostTensor out_f, lse_f, out_r, lse_r;
  t.forward(flash, dev, out_f, lse_f);
  t.forward(ref, false, out_r, lse_r);

  const std::vector<float> qf = t.q.to_float(), kf = t.k.to_float(), vf = t.v.to_float();
  const std::vector<float> af = c.alibi ? t.alibi.to_float() : std::vector<float>{};
  const NaiveInputs nin{qf, kf, vf, af};
  const NaiveForward naive = naive_forward(c, nin);
  const double s = naive.max_abs_score;
  const bool fp32 = c.dtype == DType::f32;
  std::vector<Verdict> verdicts;
  // A result may always be off by twice the naive same-precision computation
  // (plus an atol below fp32): that is the problem's conditioning, not a bug.
  const auto compare = [&](const char* name, const std::vector<float>& got,
                           const std::vector<float>& expected, const std::vector<float>& nai,
                           double rule_bound) {
    const double conditioned = conditioned_bound(
        max_abs_error(nai, expected), fp32 ? 0.0 : rounding_atol(c.dtype, expected));
    verdicts.push_back({name, max_abs_error(got, expected), std::max(rule_bound, conditioned)});
  };
  const std::vector<float> orf = out_r.to_float();
  const double r_out = max_abs_finite(orf);
  compare("out", out_f.to_float(), orf, naive.out, fp32 ? fp32_output_bound(r_out, s) : 0.0);
  const std::vector<float> lf = lse_f.to_float(), lr = lse_r.to_float();
  verdicts.push_back({"lse", max_abs_error(lf, lr), lse_bound(max_abs_finite(lr), s)});
  if (!c.backward) return verdicts;

  HostTensor dq_f, dk_f, dv_f, dq_r, dk_r, dv_r;
  t.backward(flash, dev, out_f, lse_f, dq_f, dk_f, dv_f);
  t.backward(ref, false, out_r, lse_r, dq_r, dk_r, dv_r);
  const NaiveBackward ng = naive_backward(c, nin, naive.out, t.dout.to_float());
  struct Grad {
    const char* name;
    const HostTensor& got;
    const HostTensor& ref;
    const std::vector<float>& naive;
    const std::vector<float>& magnitude;
    const std::vector<float>* through_d;  // the part through D (null: none)
  };
  const Grad grads[] = {{"dq", dq_f, dq_r, ng.dq, ng.mag_dq, &ng.mag_d_dq},
                        {"dk", dk_f, dk_r, ng.dk, ng.mag_dk, &ng.mag_d_dk},
                        {"dv", dv_f, dv_r, ng.dv, ng.mag_dv, nullptr}};
  for (const Grad& g : grads) {
    const std::vector<float> gr = g.ref.to_float();
    const double r = max_abs_finite(gr);
    // Gradients that cancel to ~0 keep the rounding of the terms that formed them.
    const double rule = (fp32 ? fp32_grad_bound(r, s) : lowp_grad_bound(r)) +
                        summation_allowance(g.magnitude) +
                        (g.through_d ? stored_output_allowance(c.dtype, *g.through_d) : 0.0);
    compare(g.name, g.got.to_float(), gr, g.naive, rule);
  }
  if (c.deterministic) {  // bitwise identical on a second run
    HostTensor dq2, dk2, dv2;
    t.backward(flash, dev, out_f, lse_f, dq2, dk2, dv2);
    const bool same = dq2.data == dq_f.data && dk2.data == dk_f.data && dv2.data == dv_f.data;
    verdicts.push_back({"deterministic", same ? 0.0 : 1.0, 0.0});
  }
  return verdicts;
}

std::string summarize(const std::vector<Verdict>& vs, bool failures_only) {
  std::string s;
  for (const Verdict& v : vs) {
    if (failures_only && v.ok()) continue;
    if (v.name == "deterministic")
      s += v.ok() ? " deterministic ok;" : " backward not bitwise reproducible;";
    else
      s += fmt::format(" {} err {:.3g} {} bound {:.3g};", v.name, v.error, v.ok() ? "<=" : ">",
                       v.bound);
  }
  if (!s.empty()) s.pop_back();
  return s;
}

// auto: cuda when a GPU is visible (the trials then draw what it runs), else cpu.
flashattn::Backend checked_backend(const std::string& name) {
  const flashattn::Backend b = parse_backend(name);
  if (b != flashattn::Backend::automatic) return b;
  return flashattn::cuda_available() ? flashattn::Backend::cuda : flashattn::Backend::cpu;
}

int run_check(const CheckArgs& a) {
  const flashattn::Backend backend = checked_backend(a.backend);
  const bool cuda = backend == flashattn::Backend::cuda;
  const std::string name = a.backend == "auto"
                               ? fmt::format("{} (auto)", flashattn::to_string(backend))
                               : a.backend;
  const uint64_t seed = parse_uint64(a.seed, "--seed");
  const auto t0 = std::chrono::steady_clock::now();
  int passed = 0, failed = 0, no_kernel = 0;
  bool no_backward = false;
  const int64_t first = a.only_trial >= 0 ? a.only_trial : 0;
  const int64_t last = a.only_trial >= 0 ? a.only_trial + 1 : a.trials;
  Progress progress(static_cast<int>(last - first), a.progress);
  for (int64_t trial = first; trial < last; ++trial) {
    progress.update(static_cast<int>(trial - first), fmt::format("trial {}", trial));
    // One generator per trial, so `--trial N` reproduces trial N of any run.
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(trial));
    CheckConfig c = random_config(rng, a.max_seqlen, cuda ? ConfigSpace::cuda : ConfigSpace::any);
    if (cuda && !cuda_runs(c.dtype, c.dqk, c.dv, false)) {
      ++no_kernel;  // a build without every kernel (FLASHATTN_CUDA_HEAD_DIMS / _DTYPES)
      if (a.verbose) fmt::print("skipped trial {}: {} | no cuda kernel in this build\n", trial, c.describe());
      continue;
    }
    if (cuda && c.backward && !cuda_runs(c.dtype, c.dqk, c.dv, true)) {
      c.backward = c.deterministic = false;  // the library refused a tiny backward
      no_backward = true;
    }
    std::string line;
    bool ok = true;
    try {
      const std::vector<Verdict> vs = run_trial(c, rng, backend, a.threads);
      for (const Verdict& v : vs) ok = ok && v.ok();
      if (!ok) line = summarize(vs, true);
      else if (a.verbose) line = summarize(vs, false);
    } catch (const flashattn::Error& e) {
      if (e.argument() == "backend" || e.kind() == flashattn::ErrorKind::runtime) {
        progress.finish();
        fmt::print("FAIL trial {}: {} | {}\n", trial, c.describe(), e.what());
        std::fflush(stdout);
        rethrow_library_error(e, {{"backend", "--backend"}});
      }
      ok = false;
      line = fmt::format(" refused: {}", e.what());
    } catch (const RunFailure& e) {  // a CUDA error: later trials could not be trusted
      progress.finish();
      fmt::print("FAIL trial {}: {} | {}\n", trial, c.describe(), e.what());
      std::fflush(stdout);
      throw;
    }
    ok ? ++passed : ++failed;
    if (!line.empty()) {
      progress.finish();
      fmt::print("{} trial {}: {} |{}\n", ok ? "ok" : "FAIL", trial, c.describe(), line);
      std::fflush(stdout);
    }
  }
  progress.finish();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string notes;
  if (no_backward) notes += "; backward: not available on cuda yet, skipped";
  if (no_kernel) notes += fmt::format("; {} trials skipped: no cuda kernel in this build", no_kernel);
  fmt::print("{} passed, {} failed ({:.1f} s, backend {} vs reference, seed {}{})\n", passed, failed,
             secs, name, a.seed, notes);
  if (failed > 0)
    fmt::print("reproduce one with: flashattn check --backend {} --seed {} --max-seqlen {} --trial N -v\n",
               flashattn::to_string(backend), a.seed, a.max_seqlen);
  return failed == 0 ? 0 : 1;
}

}  // namespace

Command add_check_command(CLI::App& root) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* app = root.add_subcommand(
      "check", "Compare a backend with the float64 reference on random configurations");
  app->footer(
      "Configurations: f32/f16/bf16, "
      "lengths 1, 17, 113, 239 (1023 with --max-seqlen >= 1023) and random, Sq != Sk both ways, "
      "GQA/MQA, causal, windows, fully masked rows, softcap, "
      "ALiBi [Hq] and [B, Hq], dropout, packed varlen with empty sequences, Dv != Dqk, large "
      "scores, forward and backward.\n"
      "On cuda: fp16/bf16 only, head dims multiples of 8 up to 256 (the kernel sizes "
      "64/96/128/192/256 and sizes padded up to them, e.g. 40, 72, 136), inputs copied to the GPU "
      "and results back, compared on the host; the backward only where the library's cuda backend "
      "has one (else the summary says it was skipped), trials without a kernel in this build "
      "skipped and counted.\n"
      "Accuracy rule (R = max|ref|, max|s| = largest |scale q.k| or final logit): fp32 out: "
      "max|err| <= 1e-5 max(1, R) + 2e-7 max|s| R; fp32 gradients: 1e-4 max(1, R) + "
      "2e-6 max|s| R. fp16/bf16 out: 2x the error of a naive computation in that dtype (S rounded "
      "to the dtype, softmax in fp32, P rounded, O = P V accumulated in fp32 and rounded) plus "
      "atol = 2 max|rd(ref + 0.3) - 0.3 - ref|, at least one unit in the last place of max|ref|; "
      "fp16/bf16 gradients: a simpler bound, "
      "0.05 max(1, R). Every output and gradient may also be off by 2x the naive computation's "
      "error in its own precision (+ atol below fp32), and gradients by 2^-23 times the largest "
      "sum of |terms| forming them: where gradients cancel (large scores, one visible key) the "
      "fixed bounds no longer describe what any fp32 code can do; fp16/bf16 gradients also by "
      "half the dtype's epsilon times the terms that reach them through D = dO.O, which the "
      "backward reads from the output as stored. LSE (fp32 always): "
      "1e-5 max(1, R) + 2e-7 max|s|. Deterministic backwards must be bitwise reproducible. "
      "Prints one line per failure and exits 1 if any failed.");
  add_backend_option(*app, args->backend,
                     ". The backend checked; here auto is cuda whenever a GPU is visible");
  app->add_option("--trials", args->trials, "number of random configurations")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000000));
  app->add_option("--seed", args->seed, "seed of the configurations and inputs")
      ->type_name("UINT64")
      ->capture_default_str();
  app->add_option("--max-seqlen", args->max_seqlen, "longest sequence drawn")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app->add_option("--trial", args->only_trial, "run only trial N (to reproduce a failure)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--threads", args->threads, "CPU threads; 0: OpenMP default")
      ->capture_default_str()
      ->check(CLI::Range(0, flashattn::kMaxThreads));
  app->add_flag("-v,--verbose", args->verbose, "one line per trial, not only failures");
  app->add_flag("--progress", args->progress, "progress bar on stderr even when not a terminal");
  return {app, [args] { return run_check(*args); }};
}

}  // namespace facli
