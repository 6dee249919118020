// flashattn: the command-line face of the library.
//
// Usage:
//   flashattn run  --q Q.npy --k K.npy --v V.npy --out O.npy [--lse LSE.npy] [options]
//   flashattn grad --q Q.npy --k K.npy --v V.npy --dout DO.npy --dq DQ.npy --dk DK.npy --dv DV.npy
//                  [--out O.npy --lse LSE.npy] [options]
//   flashattn bench [--backend B] [--dtype T] [--hdim 64,128] [--seqlens 512,1024] [--causal]
//                   [--both-masks] [--mode fwd|bwd|fwdbwd] [--batch-tokens N] [--model-dim N]
//                   [--repeats N] [--warmup N] [--threads N] [--no-reference] [--json FILE]
//   flashattn check [--backend B] [--trials 200] [--seed S] [--max-seqlen 300]
//   flashattn info
//   flashattn --version
//
// Files (.npy, little-endian, C order) follow the contract's layout: batched q/k/v/out
// [B, S, H, D] and LSE [B, Hq, Sq]; packed (with --cu-seqlens-q/k, int32 or int64 [B+1])
// [total, H, D] and LSE [Hq, total_q]. float32 '<f4' and float16 '<f2' are recognised;
// bf16 is stored as uint16 '<u2' and needs --dtype bf16. Outputs have the input dtype,
// LSE is float32.
//
// Options of run/grad: --backend auto|reference|cpu|cuda, --dtype f32|f16|bf16, --scale F,
// --causal, --window=L,R (-1: unbounded), --softcap F, --alibi SLOPES.npy (float32 [Hq] or
// [B, Hq]), --dropout P, --seed S, --offset O, --cu-seqlens-q/k CU.npy,
// --max-seqlen-q/k N, --deterministic, --threads N.
//
// Backends: cuda (and auto, where the GPU runs the problem: fp16/bf16, head dims
// multiples of 8 up to 256) copies the tensors to GPU memory and the results
// back (staging.h); the CPU backends work on the host tensors themselves.
//
// Every input is read and the whole computation done in memory before any output
// is written (through temporary files renamed at the end). Exit codes: 0 success;
// 2 a user error (bad file, dtype, shape or option; a flashattn::Error), reported
// as one line "flashattn: <what is at fault>: <why>" with no output written;
// 1 a failure while running (a CUDA error, out of memory; one line too), an
// unexpected failure, or `check` found a mismatch.
#include <cstdio>
#include <exception>
#include <new>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <flashattn/flashattn.h>

#include "bench.h"
#include "commands.h"
#include "errors.h"

namespace {

void report(const std::string& message) { std::fprintf(stderr, "flashattn: %s\n", message.c_str()); }

int run_cli(int argc, char** argv) {
  CLI::App app{"flashattn: exact attention computed the FlashAttention way", "flashattn"};
  app.set_version_flag("--version", std::string("flashattn ") + flashattn::version());
  app.require_subcommand(1);
  app.fallthrough(false);
  const facli::Command commands[] = {
      facli::add_run_command(app),   facli::add_grad_command(app), facli::add_bench_command(app),
      facli::add_check_command(app), facli::add_info_command(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    report(fmt::format("{} (see flashattn --help)", e.what()));
    return 2;
  }
  facli::set_command_line(argc, argv);
  for (const facli::Command& c : commands)
    if (c.app->parsed()) return c.run();
  return 2;  // unreachable: one subcommand is required
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_cli(argc, argv);
  } catch (const facli::CliError& e) {
    report(e.what());
    return 2;
  } catch (const facli::RunFailure& e) {
    report(e.what());
    return 1;
  } catch (const flashattn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());  // already starts with "flashattn: "
    return e.kind() == flashattn::ErrorKind::runtime ? 1 : 2;
  } catch (const std::bad_alloc&) {
    report("out of memory");
    return 1;
  } catch (const std::exception& e) {
    report(fmt::format("unexpected error: {}", e.what()));
    return 1;
  } catch (...) {
    report("unexpected error");
    return 1;
  }
}
