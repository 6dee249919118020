// The attention options shared by `run` and `grad` (and their conversion to
// flashattn::Options). Range checks are left to the library, which names the
// argument; errors() maps those names back to these options.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <flashattn/flashattn.h>

#include "backend_choice.h"

namespace facli {

struct AttnArgs {
  std::string backend = "auto";
  std::string dtype;  // empty: inferred from --q
  double scale = 0.0;
  bool causal = false;
  std::string window;  // "L,R"
  double softcap = 0.0;
  std::string alibi;   // path
  double dropout = 0.0;
  std::string seed = "0", offset = "0";  // uint64, parsed strictly (no sign)
  std::string cu_seqlens_q, cu_seqlens_k;  // paths
  int64_t max_seqlen_q = -1, max_seqlen_k = -1;  // -1: computed from cu_seqlens
  bool deterministic = false;
  int threads = 0;

  CLI::Option* scale_opt = nullptr;
  CLI::Option* max_q_opt = nullptr;
  CLI::Option* max_k_opt = nullptr;
};

void add_attn_options(CLI::App& app, AttnArgs& args);

// Everything but the ALiBi slopes (a tensor, loaded with the inputs). The
// backend may still be auto: the command resolves it once the inputs are known
// (choose_backend).
flashattn::Options make_options(const AttnArgs& args);

// "L,R" with -1 meaning unbounded, e.g. "-1,0"; throws CliError naming --window.
flashattn::Window parse_window(const std::string& text);

// A decimal uint64 without sign; throws CliError naming `option`.
uint64_t parse_uint64(const std::string& text, const std::string& option);

}  // namespace facli
