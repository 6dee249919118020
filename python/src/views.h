// DLPack arrays (as nanobind sees them) -> flashattn::TensorView, without copying.
#pragma once

#include <optional>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "flashattn/flashattn.h"

namespace flashattn::python {

// Inputs accept read-only arrays; outputs must be writable.
using InArray = nanobind::ndarray<nanobind::ro>;
using OutArray = nanobind::ndarray<>;

// Views the array's memory. `name` is the argument named in errors. With
// `u16_is_bf16`, uint16 elements are read as bfloat16 (NumPy has no bfloat16
// that DLPack can carry, so the Python layer passes ml_dtypes arrays as uint16).
template <typename Array>
TensorView view(const Array& a, const char* name, bool u16_is_bf16);

// The view of an optional array: nullopt when the caller passed None.
template <typename Array>
std::optional<TensorView> optional_view(const Array& a, const char* name, bool u16_is_bf16) {
  if (!a.is_valid()) return std::nullopt;
  return view(a, name, u16_is_bf16);
}

}  // namespace flashattn::python
