// `flashattn run`: the forward on .npy files, on the host or, for the cuda
// backend, on device copies.
#include <memory>

#include "commands.h"
#include "inputs.h"
#include "output_files.h"
#include "staged_inputs.h"

namespace facli {

namespace {

struct RunArgs {
  AttnFiles files;
  std::string out, lse;
  AttnArgs attn;
};

int run_forward_files(const RunArgs& a) {
  HostTensor out, lse;
  std::vector<OutputFile> outputs{{"--out", a.out, &out}};
  if (!a.lse.empty()) outputs.push_back({"--lse", a.lse, &lse});
  check_output_paths(outputs);

  AttnInputs in;
  load_attn_inputs(a.files, a.attn, in);
  in.options.backend = choose_backend(in.options.backend, in.dtype, in.q.shape.back(),
                                      in.v.shape.back(), /*backward=*/false);
  out = HostTensor::zeros(in.dtype, in.out_shape());
  lse = HostTensor::zeros(flashattn::DType::f32, in.lse_shape());
  in.labels["out"] = file_label("--out", a.out);
  in.labels["lse"] = a.lse.empty() ? "the LSE" : file_label("--lse", a.lse);
  Staging st(in.options.backend == flashattn::Backend::cuda);
  call_library(in.labels, [&] {
    const AttnViews x = stage_inputs(st, in);
    const flashattn::TensorView ov = st.out(out), lv = st.out(lse);
    if (in.packed)
      flashattn::forward_varlen(x.q, x.k, x.v, ov, &lv, x.varlen, x.options);
    else
      flashattn::forward(x.q, x.k, x.v, ov, &lv, x.options);
  });
  st.finish();
  write_outputs(outputs);
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* app = root.add_subcommand(
      "run", "Forward attention on .npy files: out = softmax(scale q k^T) v (and its LSE)");
  app->add_option("--q", args->files.q, "queries [B, Sq, Hq, Dqk] (packed: [total_q, Hq, Dqk])")
      ->required();
  app->add_option("--k", args->files.k, "keys [B, Sk, Hkv, Dqk] (packed: [total_k, Hkv, Dqk])")
      ->required();
  app->add_option("--v", args->files.v, "values [B, Sk, Hkv, Dv] (packed: [total_k, Hkv, Dv])")
      ->required();
  app->add_option("--out", args->out, "output file, dtype of the inputs [B, Sq, Hq, Dv]")
      ->required();
  app->add_option("--lse", args->lse, "optional output: float32 LSE [B, Hq, Sq] (packed: [Hq, total_q])");
  add_attn_options(*app, args->attn);
  return {app, [args] { return run_forward_files(*args); }};
}

}  // namespace facli
