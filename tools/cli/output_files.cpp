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

namespace {

// Where an output goes. A regular file (or a new one) is replaced at once, through a
// temporary file beside it that is renamed over it; through a symbolic link, the
// file the link names. Anything else that exists (/dev/stdout, /dev/null, a pipe) is
// written directly: renaming over it would replace the device node or link itself
// (as root, /dev/full was replaced by a regular file).
struct Target {
  std::string path;
  bool direct;
};

Target target_of(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows links
  if (ec || !fs::exists(st)) return {path, false};
  if (!fs::is_regular_file(st)) return {path, true};
  const fs::path real = fs::canonical(path, ec);
  return {ec ? path : real.string(), false};
}

void write_one(const OutputFile& o, const std::string& path) {
  try {
    write_npy(path, npy_descr(o.tensor->dtype), o.tensor->shape, o.tensor->data.data(), o.tensor->data.size());
  } catch (const NpyError& e) {
    throw CliError(file_label(o.option, o.path), e.what());
  }
}

}  // namespace

void write_outputs(const std::vector<OutputFile>& outputs) {
  std::vector<Target> targets;
  std::vector<std::string> temps;
  const auto cleanup = [&]() {
    for (const std::string& t : temps)
      if (!t.empty()) std::remove(t.c_str());
  };
  try {
    for (const OutputFile& o : outputs) {
      targets.push_back(target_of(o.path));
      temps.emplace_back();
      if (targets.back().direct) continue;
      const fs::path p(targets.back().path);
      temps.back() =
          (p.parent_path() / fmt::format(".{}.flashattn-tmp-{}", p.filename().string(), getpid())).string();
      write_one(o, temps.back());
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (targets[i].direct) {
        write_one(outputs[i], targets[i].path);
        continue;
      }
      std::error_code ec;
      fs::rename(temps[i], targets[i].path, ec);
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
