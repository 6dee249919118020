#include "host_tensor.h"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <flashattn/numeric.h>

#include "errors.h"

namespace facli {

using flashattn::DType;

HostTensor HostTensor::zeros(DType dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(static_cast<size_t>(t.numel() * flashattn::dtype_size(dtype)), std::byte{0});
  return t;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

flashattn::TensorView HostTensor::view() {
  flashattn::TensorView v;
  if (shape.size() > 4) throw CliError("", "internal: a tensor of more than 4 dims");
  v.data = data.empty() ? nullptr : data.data();
  v.dtype = dtype;
  v.ndim = ndim();
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = shape[d];
    v.stride[d] = stride;
    stride *= shape[d];
  }
  return v;
}

float HostTensor::get(int64_t i) const {
  const std::byte* p = data.data();
  switch (dtype) {
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return flashattn::fp16_to_float(h);
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return flashattn::bf16_to_float(h);
    }
    case DType::i32: {
      int32_t x;
      std::memcpy(&x, p + 4 * i, 4);
      return static_cast<float>(x);
    }
    default: {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      return x;
    }
  }
}

void HostTensor::set(int64_t i, float x) {
  std::byte* p = data.data();
  switch (dtype) {
    case DType::f16: {
      const uint16_t h = flashattn::float_to_fp16(x);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case DType::bf16: {
      const uint16_t h = flashattn::float_to_bf16(x);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case DType::i32: {
      const int32_t v = static_cast<int32_t>(x);
      std::memcpy(p + 4 * i, &v, 4);
      break;
    }
    default:
      std::memcpy(p + 4 * i, &x, 4);
  }
}

std::vector<float> HostTensor::to_float() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[i] = get(i);
  return out;
}

void fill_normal(HostTensor& t, std::mt19937_64& rng, float sigma) {
  std::normal_distribution<float> dist(0.f, sigma);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, dist(rng));
}

std::string npy_descr(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<u2";
    case DType::i32: return "<i4";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  if (name == "f32") return DType::f32;
  if (name == "f16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  throw CliError("--dtype", fmt::format("unknown dtype '{}'; choose f32, f16 or bf16", name));
}

const char* dtype_short_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
  }
  return "?";
}

float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::f16: return flashattn::fp16_to_float(flashattn::float_to_fp16(x));
    case DType::bf16: return flashattn::bf16_to_float(flashattn::float_to_bf16(x));
    default: return x;
  }
}

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace facli
