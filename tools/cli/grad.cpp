// `flashattn grad`: the backward on .npy files. The forward's out and LSE are
// read when given, otherwise computed first (in memory, not written). The cuda
// backend works on device copies, like `run`.
#include <memory>

#include "commands.h"
#include "errors.h"
#include "inputs.h"
#include "output_files.h"
#include "staged_inputs.h"

namespace facli {

namespace {

struct GradArgs {
  AttnFiles files;
  std::string dout, dq, dk, dv, out, lse;
  AttnArgs attn;
};

int run_backward_files(const GradArgs& a) {
  HostTensor dq, dk, dv;
  const std::vector<OutputFile> outputs{{"--dq", a.dq, &dq}, {"--dk", a.dk, &dk}, {"--dv", a.dv, &dv}};
  check_output_paths(outputs);
  if (a.out.empty() != a.lse.empty())
    throw CliError(a.out.empty() ? "--out" : "--lse",
                   "--out and --lse go together: give both forward results, or neither to "
                   "compute them");

  AttnInputs in;
  load_attn_inputs(a.files, a.attn, in);
  in.options.backend = choose_backend(in.options.backend, in.dtype, in.q.shape.back(),
                                      in.v.shape.back(), /*backward=*/true);
  HostTensor dout = load_like_input("--dout", a.dout, in);
  in.labels["dout"] = file_label("--dout", a.dout);
  in.labels["dq"] = file_label("--dq", a.dq);
  in.labels["dk"] = file_label("--dk", a.dk);
  in.labels["dv"] = file_label("--dv", a.dv);

  const bool given = !a.out.empty();
  HostTensor out, lse;
  if (given) {
    out = load_like_input("--out", a.out, in);
    lse = load_lse("--lse", a.lse, in);
    in.labels["out"] = file_label("--out", a.out);
    in.labels["lse"] = file_label("--lse", a.lse);
  } else {
    out = HostTensor::zeros(in.dtype, in.out_shape());
    lse = HostTensor::zeros(flashattn::DType::f32, in.lse_shape());
    in.labels["out"] = "the forward's out";
    in.labels["lse"] = "the forward's LSE";
  }
  dq = HostTensor::zeros(in.dtype, in.q.shape);
  dk = HostTensor::zeros(in.dtype, in.k.shape);
  dv = HostTensor::zeros(in.dtype, in.v.shape);

  // On the device, the forward's out and LSE stay there for the backward.
  Staging st(in.options.backend == flashattn::Backend::cuda);
  call_library(in.labels, [&] {
    const AttnViews x = stage_inputs(st, in);
    const flashattn::TensorView dov = st.in(dout);
    const flashattn::TensorView ov = given ? st.in(out) : st.out(out);
    const flashattn::TensorView lv = given ? st.in(lse) : st.out(lse);
    if (!given) {
      if (in.packed)
        flashattn::forward_varlen(x.q, x.k, x.v, ov, &lv, x.varlen, x.options);
      else
        flashattn::forward(x.q, x.k, x.v, ov, &lv, x.options);
    }
    const flashattn::TensorView dqv = st.out(dq), dkv = st.out(dk), dvv = st.out(dv);
    if (in.packed)
      flashattn::backward_varlen(dov, x.q, x.k, x.v, ov, lv, dqv, dkv, dvv, x.varlen, x.options);
    else
      flashattn::backward(dov, x.q, x.k, x.v, ov, lv, dqv, dkv, dvv, x.options);
  });
  st.finish();
  write_outputs(outputs);
  return 0;
}

}  // namespace

Command add_grad_command(CLI::App& root) {
  auto args = std::make_shared<GradArgs>();
  CLI::App* app = root.add_subcommand(
      "grad", "Backward attention on .npy files: dq, dk, dv from dout (runs the forward first "
              "unless --out and --lse are given)");
  app->add_option("--q", args->files.q, "queries [B, Sq, Hq, Dqk] (packed: [total_q, Hq, Dqk])")
      ->required();
  app->add_option("--k", args->files.k, "keys [B, Sk, Hkv, Dqk]")->required();
  app->add_option("--v", args->files.v, "values [B, Sk, Hkv, Dv]")->required();
  app->add_option("--dout", args->dout, "gradient of out [B, Sq, Hq, Dv]")->required();
  app->add_option("--dq", args->dq, "output: gradient of q")->required();
  app->add_option("--dk", args->dk, "output: gradient of k")->required();
  app->add_option("--dv", args->dv, "output: gradient of v")->required();
  app->add_option("--out", args->out, "input: the forward's out (with --lse)");
  app->add_option("--lse", args->lse, "input: the forward's float32 LSE (with --out)");
  add_attn_options(*app, args->attn);
  return {app, [args] { return run_backward_files(*args); }};
}

}  // namespace facli
