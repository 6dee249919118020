// Heap accounting for `bench`: this binary replaces the global operator new and
// delete with counting versions, so every C++ allocation of the process (the
// statically linked library's scratch included) is seen. Allocations made
// with malloc directly (e.g. by the OpenMP runtime) are not.
#pragma once

#include <cstdint>

namespace facli::memory {

// Bytes currently allocated through operator new (usable sizes).
int64_t current_bytes();
// The highest current_bytes() since the last reset_peak().
int64_t peak_bytes();
// Sets the peak to the current value, to measure what a call adds on top.
void reset_peak();

// Peak extra bytes of `f` over what was allocated before it.
template <typename F>
int64_t measure_peak_extra(F&& f) {
  const int64_t base = current_bytes();
  reset_peak();
  f();
  return peak_bytes() - base;
}

}  // namespace facli::memory
