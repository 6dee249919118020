// Writing the result files all or nothing: each goes to a temporary file next
// to its destination, and only when every one is written are they renamed into
// place. A failure removes the temporaries, so no partial output is left.
#pragma once

#include <string>
#include <vector>

#include "host_tensor.h"

namespace facli {

struct OutputFile {
  std::string option;  // "--out"
  std::string path;
  const HostTensor* tensor;
};

// Before any work: paths non-empty, pairwise distinct, in existing directories,
// not directories themselves. Throws CliError naming the option.
void check_output_paths(const std::vector<OutputFile>& outputs);

void write_outputs(const std::vector<OutputFile>& outputs);

}  // namespace facli
