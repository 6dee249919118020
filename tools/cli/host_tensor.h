// An owning host tensor (C-contiguous) with the element types of the contract,
// plus the float conversions and random fills the commands need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <flashattn/types.h>

namespace facli {

struct HostTensor {
  flashattn::DType dtype = flashattn::DType::f32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;

  static HostTensor zeros(flashattn::DType dtype, std::vector<int64_t> shape);

  int64_t numel() const;
  int ndim() const { return static_cast<int>(shape.size()); }
  // A view for the library; shape must have at most 4 dims.
  flashattn::TensorView view();

  // Element i as float (fp16/bf16 decoded), and its store (rounded to the dtype).
  float get(int64_t i) const;
  void set(int64_t i, float x);
  // All elements as float, for comparisons.
  std::vector<float> to_float() const;
};

// Fills with normal(0, sigma) values rounded to the dtype.
void fill_normal(HostTensor& t, std::mt19937_64& rng, float sigma = 1.f);

// .npy type string of a dtype (bf16 is stored as uint16 "<u2").
std::string npy_descr(flashattn::DType dtype);

// "f32", "f16", "bf16" <-> DType.
flashattn::DType parse_dtype(const std::string& name);
const char* dtype_short_name(flashattn::DType dtype);

// Rounds a float to what `dtype` can hold (identity for f32).
float round_to(flashattn::DType dtype, float x);

// "[2, 3, 4]"
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace facli
