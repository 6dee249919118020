// The subcommands. Each adds itself to the root app and returns the function to
// run when it was chosen on the command line; it returns the exit code and
// throws CliError (exit 2) for user errors.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace facli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_run_command(CLI::App& root);
Command add_grad_command(CLI::App& root);
Command add_bench_command(CLI::App& root);
Command add_check_command(CLI::App& root);
Command add_info_command(CLI::App& root);

}  // namespace facli
