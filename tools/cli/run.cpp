// `flashattn run`: the forward on .npy files.
#include <memory>

#include "commands.h"
#include "inputs.h"
#include "output_files.h"

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
  out = HostTensor::zeros(in.dtype, in.out_shape());
  lse = HostTensor::zeros(flashattn::DType::f32, in.lse_shape());
  in.labels["out"] = file_label("--out", a.out);
  in.labels["lse"] = a.lse.empty() ? "the LSE" : file_label("--lse", a.lse);
  call_library(in.labels, [&] {
    const flashattn::TensorView lv = lse.view();
    if (in.packed)
      flashattn::forward_varlen(in.q.view(), in.k.view(), in.v.view(), out.view(), &lv, in.varlen,
                                in.options);
    else
      flashattn::forward(in.q.view(), in.k.view(), in.v.view(), out.view(), &lv, in.options);
  });
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
