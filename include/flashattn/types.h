// Basic vocabulary of the public API: element types, devices, backends and a
// framework-free tensor view. Nothing here allocates. Public headers are C++17.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "flashattn/error.h"

namespace flashattn {

enum class DType : uint8_t {
  f32,   // CPU backends only
  f16,
  bf16,
  i32,   // cu_seqlens
};

// Size in bytes of one element.
constexpr int64_t dtype_size(DType t) { return t == DType::f16 || t == DType::bf16 ? 2 : 4; }
const char* to_string(DType t);

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // CUDA ordinal; ignored for the CPU
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.index == b.index;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

// Which implementation runs a call. `automatic` picks CUDA for CUDA tensors and
// the CPU flash backend for host tensors.
enum class Backend : uint8_t { automatic, reference, cpu, cuda };
const char* to_string(Backend b);
// Parses "auto", "reference", "cpu", "cuda"; throws flashattn::Error otherwise.
Backend backend_from_string(const char* name);

// A strided view of memory owned by someone else. Strides are in elements.
// Rank is at most 4 (every tensor of the contract fits).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device{};
  int ndim = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};

  bool defined() const { return data != nullptr || ndim > 0; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  // A row-major (C-contiguous) view of `data` with the given shape.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               Device device = {}) {
    if (shape.size() > 4) throw Error(ErrorKind::value, "shape", "at most 4 dimensions are supported");
    TensorView t;
    t.data = data;
    t.dtype = dtype;
    t.device = device;
    t.ndim = static_cast<int>(shape.size());
    int i = 0;
    for (int64_t s : shape) t.shape[i++] = s;
    int64_t st = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      t.stride[d] = st;
      st *= t.shape[d];
    }
    return t;
  }
};

}  // namespace flashattn
