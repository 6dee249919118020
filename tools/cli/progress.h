// A one-line progress bar on stderr for sweeps: redrawn with '\r', shown only
// when stderr is a terminal (or when forced), erased when done.
#pragma once

#include <string>

namespace facli {

class Progress {
 public:
  Progress(int total, bool force);
  ~Progress();
  // Shows `done` of total steps and what is running now.
  void update(int done, const std::string& what);
  void finish();

 private:
  int total_;
  bool enabled_;
  size_t last_width_ = 0;
};

}  // namespace facli
