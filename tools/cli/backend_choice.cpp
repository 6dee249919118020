#include "backend_choice.h"

#include <map>
#include <tuple>

#include "errors.h"
#include "host_tensor.h"
#include "staging.h"

namespace facli {

using flashattn::Backend;
using flashattn::DType;

void add_backend_option(CLI::App& app, std::string& backend, const std::string& extra_help) {
  app.add_option("--backend", backend,
                 "auto|reference|cpu|cuda. auto: the best backend present, i.e. cuda when this "
                 "build has it, a GPU is visible and cuda runs the problem (fp16/bf16, head dims "
                 "multiples of 8 up to 256 with a kernel in this build, and a CUDA backward where "
                 "one is needed), else cpu (fp32 always runs on cpu). cuda copies the tensors to "
                 "GPU memory and the results back" + extra_help)
      ->capture_default_str();
}

Backend parse_backend(const std::string& name, const std::string& option) {
  Backend b{};
  try {
    b = flashattn::backend_from_string(name.c_str());
  } catch (const flashattn::Error& e) {
    rethrow_library_error(e, {{"backend", option}});
  }
  if (b == Backend::cuda && !flashattn::cuda_available()) {
#if defined(FLASHATTN_WITH_CUDA)
    throw CliError(option, "no CUDA device is visible (no GPU, or no driver); use --backend cpu");
#else
    throw CliError(option, "this build of flashattn has no CUDA support (configured with "
                           "FLASHATTN_WITH_CUDA=OFF, or nvcc was not found); use --backend cpu");
#endif
  }
  return b;
}

namespace {

// One call on [1, 1, 1, D] device tensors: refused before any work, or run.
bool library_accepts(DType dtype, int64_t dqk, int64_t dv, bool backward) {
  HostTensor q = HostTensor::zeros(dtype, {1, 1, 1, dqk}), k = q;
  HostTensor v = HostTensor::zeros(dtype, {1, 1, 1, dv}), out = v, dout = v, dq = q, dk = k, dvv = v;
  HostTensor lse = HostTensor::zeros(DType::f32, {1, 1, 1});
  flashattn::Options o;
  o.backend = Backend::cuda;
  try {
    Staging st(true);
    const flashattn::TensorView qv = st.in(q), kv = st.in(k), vv = st.in(v);
    const flashattn::TensorView ov = st.out(out), lv = st.out(lse);
    flashattn::forward(qv, kv, vv, ov, &lv, o);
    if (backward)
      flashattn::backward(st.in(dout), qv, kv, vv, ov, lv, st.out(dq), st.out(dk), st.out(dvv), o);
    st.finish();
    return true;
  } catch (const flashattn::Error& e) {
    if (e.kind() == flashattn::ErrorKind::runtime) rethrow_library_error(e, {});
    return false;
  }
}

}  // namespace

bool cuda_runs(DType dtype, int64_t dqk, int64_t dv, bool backward) {
  const auto fits = [](int64_t d) { return d > 0 && d % 8 == 0 && d <= 256; };
  if ((dtype != DType::f16 && dtype != DType::bf16) || !fits(dqk) || !fits(dv)) return false;
  if (!flashattn::cuda_available()) return false;
  static std::map<std::tuple<DType, int64_t, int64_t, bool>, bool> known;
  const auto key = std::make_tuple(dtype, dqk, dv, backward);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  const bool ok = library_accepts(dtype, dqk, dv, backward);
  known.emplace(key, ok);
  return ok;
}

Backend choose_backend(Backend requested, DType dtype, int64_t dqk, int64_t dv, bool backward) {
  if (requested != Backend::automatic) return requested;
  return cuda_runs(dtype, dqk, dv, backward) ? Backend::cuda : Backend::cpu;
}

}  // namespace facli
