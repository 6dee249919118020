// OpenMP thread count for a call: the caller's choice, or OpenMP's default.
#pragma once

#include <omp.h>

#include <algorithm>

#include "flashattn/flashattn.h"

namespace flashattn::detail {

inline int thread_count(const FwdParams& p) {
  // Capped here too: run_forward / run_backward take filled parameter blocks.
  return p.num_threads > 0 ? std::min(p.num_threads, kMaxThreads) : omp_get_max_threads();
}

}  // namespace flashattn::detail
