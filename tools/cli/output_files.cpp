#include "output_files.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "errors.h"
#include "npy.h"

namespace facli {

namespace fs = std::filesystem;

void check_output_paths(const std::vector<OutputFile>& outputs) {
  std::vector<fs::path> seen;
  for (const OutputFile& o : outputs) {
    if (o.path.empty()) throw CliError(o.option, "the output path is empty");
    const std::string where = file_label(o.option, o.path);
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(fs::absolute(o.path, ec), ec);
    if (ec) throw CliError(where, fmt::format("invalid output path: {}", ec.message()));
    if (fs::is_directory(p, ec)) throw CliError(where, "is a directory");
    const fs::path dir = p.parent_path();
    if (!fs::is_directory(dir, ec))
      throw CliError(where, fmt::format("the directory '{}' does not exist", dir.string()));
    for (size_t i = 0; i < seen.size(); ++i)
      if (seen[i] == p)
        throw CliError(where, fmt::format("is also the path of {}", outputs[i].option));
    seen.push_back(p);
  }
}

void write_outputs(const std::vector<OutputFile>& outputs) {
  std::vector<std::string> temps;
  const auto cleanup = [&]() {
    for (const std::string& t : temps)
      if (!t.empty()) std::remove(t.c_str());
  };
  try {
    for (const OutputFile& o : outputs) {
      const fs::path p(o.path);
      const std::string tmp =
          (p.parent_path() / fmt::format(".{}.flashattn-tmp-{}", p.filename().string(), getpid()))
              .string();
      temps.push_back(tmp);
      try {
        write_npy(tmp, npy_descr(o.tensor->dtype), o.tensor->shape, o.tensor->data.data(),
                  o.tensor->data.size());
      } catch (const NpyError& e) {
        throw CliError(file_label(o.option, o.path), e.what());
      }
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::error_code ec;
      fs::rename(temps[i], outputs[i].path, ec);
      if (ec)
        throw CliError(file_label(outputs[i].option, outputs[i].path),
                       fmt::format("cannot move the result into place: {}", ec.message()));
      temps[i].clear();
    }
  } catch (...) {
    cleanup();
    throw;
  }
}

}  // namespace facli
