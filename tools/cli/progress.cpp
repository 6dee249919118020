#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace facli {

Progress::Progress(int total, bool force)
    : total_(total > 0 ? total : 1), enabled_(force || isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { finish(); }

void Progress::update(int done, const std::string& what) {
  if (!enabled_) return;
  constexpr int kWidth = 30;
  const int filled = done * kWidth / total_;
  std::string line = fmt::format("[{}{}] {}/{} {}", std::string(filled, '#'),
                                 std::string(kWidth - filled, '.'), done, total_, what);
  const size_t width = line.size();
  if (width < last_width_) line.append(last_width_ - width, ' ');  // erase the old tail
  last_width_ = width;
  std::fprintf(stderr, "\r%s", line.c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_ || last_width_ == 0) return;
  std::fprintf(stderr, "\r%s\r", std::string(last_width_, ' ').c_str());
  std::fflush(stderr);
  last_width_ = 0;
}

}  // namespace facli
