// How the tool reports a refusal: one line on stderr starting with "flashattn: "
// that names the file, option or argument at fault, and exit code 2.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include <flashattn/error.h>

namespace facli {

// A user error (bad file, bad option, bad shape). `where` names what is at fault,
// e.g. "--q 'q.npy'" or "--window"; the message says what was given and allowed.
class CliError : public std::runtime_error {
 public:
  CliError(const std::string& where, const std::string& message)
      : std::runtime_error(where.empty() ? message : where + ": " + message) {}
};

// A failure while running, not the user's fault (a CUDA error, device memory
// exhausted): reported as one line like a CliError, but with exit code 1.
class RunFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Names under which the library's argument names are shown to the user:
// "q" -> "--q 'q.npy'", "dropout_p" -> "--dropout", ...
using ArgLabels = std::map<std::string, std::string>;

// Labels for the option-only arguments (window, dropout_p, backend, ...).
ArgLabels option_labels();

// "--q 'path'" for an option naming a file.
std::string file_label(const std::string& option, const std::string& path);

// Turns a library refusal into a CliError that names the option or file instead
// of the library's argument name; a runtime failure (ErrorKind::runtime) into a
// RunFailure.
[[noreturn]] void rethrow_library_error(const flashattn::Error& e, const ArgLabels& labels);

// Runs `f`, turning a flashattn::Error into a CliError naming the option or file.
template <typename F>
void call_library(const ArgLabels& labels, F&& f) {
  try {
    f();
  } catch (const flashattn::Error& e) {
    rethrow_library_error(e, labels);
  }
}

}  // namespace facli
