#include "views.h"

#include <string>

namespace flashattn::python {
namespace {

namespace dl = nanobind::dlpack;

DType dtype_of(dl::dtype t, const char* name, bool u16_is_bf16) {
  if (t.lanes == 1) {
    const auto code = static_cast<dl::dtype_code>(t.code);
    if (code == dl::dtype_code::Float && t.bits == 32) return DType::f32;
    if (code == dl::dtype_code::Float && t.bits == 16) return DType::f16;
    if (code == dl::dtype_code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == dl::dtype_code::Int && t.bits == 32) return DType::i32;
    if (code == dl::dtype_code::UInt && t.bits == 16 && u16_is_bf16) return DType::bf16;
  }
  static const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string given = (t.code < 7 ? codes[t.code] : "code" + std::to_string(t.code)) +
                            std::to_string(t.bits) +
                            (t.lanes == 1 ? "" : "x" + std::to_string(t.lanes));
  throw Error(ErrorKind::type, name,
              "dtype " + given + " is not supported; use float32, float16 or bfloat16 "
              "(int32 for cu_seqlens)");
}

Device device_of(int type, int id, const char* name) {
  namespace nbd = nanobind::device;
  switch (type) {
    case nbd::cpu::value:
    case nbd::cuda_host::value:  // pinned host memory: the CPU reads it directly
      return Device{DeviceType::cpu, 0};
    case nbd::cuda::value:
      return Device{DeviceType::cuda, id};
    default:
      throw Error(ErrorKind::value, name,
                  "DLPack device type " + std::to_string(type) +
                      " is not supported; arrays must be in host or CUDA memory");
  }
}

}  // namespace

template <typename Array>
TensorView view(const Array& a, const char* name, bool u16_is_bf16) {
  if (a.ndim() > 4)
    throw Error(ErrorKind::value, name,
                "expected at most 4 dims, got " + std::to_string(a.ndim()));
  TensorView t;
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.dtype = dtype_of(a.dtype(), name, u16_is_bf16);
  t.device = device_of(a.device_type(), a.device_id(), name);
  t.ndim = static_cast<int>(a.ndim());
  for (int d = 0; d < t.ndim; ++d) {
    t.shape[d] = static_cast<int64_t>(a.shape(d));
    t.stride[d] = a.stride(d);  // elements, as DLPack gives them
  }
  return t;
}

template TensorView view(const InArray&, const char*, bool);
template TensorView view(const OutArray&, const char*, bool);

}  // namespace flashattn::python
