// Which backend a command runs. `auto` means the best backend present: cuda
// when this build has the CUDA backend, a GPU is visible and cuda runs the
// problem (fp16/bf16, head dims multiples of 8 up to 256 with a kernel in this
// build, and a CUDA backward when the command needs one); cpu otherwise, so
// fp32 always stays on the CPU. The cuda backend gets device copies of the
// tensors (staging.h).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <flashattn/flashattn.h>

namespace facli {

// --backend with the help text that says what auto picks.
void add_backend_option(CLI::App& app, std::string& backend, const std::string& extra_help = "");

// Parses a backend name, naming `option` on error. cuda is refused here, with
// the reason, when this build has no CUDA backend or no GPU is visible.
flashattn::Backend parse_backend(const std::string& name, const std::string& option = "--backend");

// Whether the cuda backend runs (dtype, Dqk, Dv), the backward too when asked:
// the contract's limits first, then one tiny call on the GPU that the library
// accepts or refuses (a kernel missing from this build, no backward yet).
// Answers are remembered per question.
bool cuda_runs(flashattn::DType dtype, int64_t dqk, int64_t dv, bool backward);

// `requested` itself unless it is auto; auto as described above.
flashattn::Backend choose_backend(flashattn::Backend requested, flashattn::DType dtype,
                                  int64_t dqk, int64_t dv, bool backward);

}  // namespace facli
