// Host tensors as the views of one library call. On the host (the CPU
// backends) they are the tensors' own views; on the device (the CUDA backend)
// views of device copies: in() uploads, out() allocates zeroed memory, and
// finish() copies every out() back into its host tensor. The device memory
// lives exactly as long as the Staging, so an error anywhere frees it.
#pragma once

#include <utility>
#include <vector>

#include <flashattn/types.h>

#include "device.h"
#include "host_tensor.h"

namespace facli {

class Staging {
 public:
  explicit Staging(bool on_device) : on_device_(on_device) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  bool on_device() const { return on_device_; }
  // A tensor the call reads.
  flashattn::TensorView in(HostTensor& t);
  // A tensor the call writes (the call may also read it back, as grad does).
  flashattn::TensorView out(HostTensor& t);
  // Waits for the device and downloads the outputs; nothing to do on the host.
  void finish();

 private:
  flashattn::TensorView stage(HostTensor& t, bool upload);

  bool on_device_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<std::pair<HostTensor*, const void*>> outputs_;  // host tensor, device copy
};

}  // namespace facli
