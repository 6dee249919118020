#include "device.h"

#include <utility>

#include <fmt/format.h>

#include "errors.h"

#if defined(FLASHATTN_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace facli {

#if defined(FLASHATTN_WITH_CUDA)

namespace {

std::string human(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b < 1024.0 * 1024) return fmt::format("{:.1f} KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", b / (1024 * 1024));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}

void check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear the error unless it is sticky
  switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      throw CliError("--backend", fmt::format("cannot use the GPU ({}): {}", what,
                                              cudaGetErrorString(e)));
    case cudaErrorMemoryAllocation:
      throw RunFailure(fmt::format("CUDA: out of device memory ({})", what));
    default:
      throw RunFailure(fmt::format("CUDA error {} ({}): {}", cudaGetErrorName(e), what,
                                   cudaGetErrorString(e)));
  }
}

// Owns a pair of events, so that a failing call leaks none.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~EventPair() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) {
  const size_t n = bytes < 16 ? 16 : bytes;
  void* p = nullptr;
  check(cudaMalloc(&p, n), fmt::format("cudaMalloc of {}", human(n)));
  data_ = p;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

void device_upload(void* dst, const void* src, size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to the GPU");
}

void device_zero(void* dst, size_t bytes) {
  if (bytes) check(cudaMemset(dst, 0, bytes), "cudaMemset");
}

void device_download(void* dst, const void* src, size_t bytes) {
  device_synchronize("the attention call");
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy from the GPU");
}

void device_synchronize(const char* after) {
  check(cudaDeviceSynchronize(), fmt::format("after {}", after));
}

double device_time_ms(const std::function<void()>& f) {
  EventPair ev;
  check(cudaEventRecord(ev.start, nullptr), "cudaEventRecord");
  f();
  check(cudaEventRecord(ev.stop, nullptr), "cudaEventRecord");
  check(cudaEventSynchronize(ev.stop), "after the timed call");
  float ms = 0.f;
  check(cudaEventElapsedTime(&ms, ev.start, ev.stop), "cudaEventElapsedTime");
  return ms;
}

int64_t device_free_bytes() {
  device_synchronize("the timed calls");
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return static_cast<int64_t>(free);
}

std::string device_name() {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  return fmt::format("{} (sm_{}{})", p.name, p.major, p.minor);
}

#else  // no CUDA in this build: nothing can be staged

namespace {
[[noreturn]] void no_cuda() {
  throw CliError("--backend", "this build of flashattn has no CUDA support");
}
}  // namespace

DeviceBuffer::DeviceBuffer(size_t) { no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  data_ = std::exchange(other.data_, nullptr);
  return *this;
}
void device_upload(void*, const void*, size_t) { no_cuda(); }
void device_zero(void*, size_t) { no_cuda(); }
void device_download(void*, const void*, size_t) { no_cuda(); }
void device_synchronize(const char*) { no_cuda(); }
double device_time_ms(const std::function<void()>&) { no_cuda(); }
int64_t device_free_bytes() { no_cuda(); }
std::string device_name() { no_cuda(); }

#endif

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)) {}

}  // namespace facli
