// OpenMP thread count for a call: the caller's choice, or OpenMP's default.
#pragma once

#include <omp.h>

#include "flashattn/params.h"

namespace flashattn::detail {

inline int thread_count(const FwdParams& p) {
  return p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
}

}  // namespace flashattn::detail
