// The tool's only contact with the CUDA runtime: device memory, copies, events,
// memory figures, all on cuda:0. Built against CUDA when the library has the
// CUDA backend (FLASHATTN_WITH_CUDA); without it every call refuses like
// `--backend cuda` does, though the commands never get here then.
// Failures: no usable GPU is a user error (CliError, exit 2); any other CUDA
// error, out of device memory included, is a RunFailure (exit 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace facli {

// Device memory, freed on destruction (so also when a command fails). At least
// 16 bytes, so that an empty tensor still has a valid, aligned pointer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

void device_upload(void* dst, const void* src, size_t bytes);
void device_zero(void* dst, size_t bytes);
// Waits for the device first, so errors of earlier kernels surface here.
void device_download(void* dst, const void* src, size_t bytes);
// Waits for all work; `after` names that work in an error message.
void device_synchronize(const char* after);
// Milliseconds the work `f` queues on the default stream takes (two events).
double device_time_ms(const std::function<void()>& f);
// Free device memory (cudaMemGetInfo) once the device is idle.
int64_t device_free_bytes();
// "NVIDIA H200 (sm_90)".
std::string device_name();

}  // namespace facli
