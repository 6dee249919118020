#include "staging.h"

namespace facli {

flashattn::TensorView Staging::stage(HostTensor& t, bool upload) {
  flashattn::TensorView v = t.view();
  if (!on_device_) return v;
  DeviceBuffer& b = buffers_.emplace_back(t.data.size());
  if (upload) device_upload(b.data(), t.data.data(), t.data.size());
  else device_zero(b.data(), t.data.size());
  v.data = b.data();
  v.device = {flashattn::DeviceType::cuda, 0};
  return v;
}

flashattn::TensorView Staging::in(HostTensor& t) { return stage(t, true); }

flashattn::TensorView Staging::out(HostTensor& t) {
  flashattn::TensorView v = stage(t, false);
  if (on_device_) outputs_.emplace_back(&t, v.data);
  return v;
}

void Staging::finish() {
  if (!on_device_) return;
  device_synchronize("the attention call");
  for (auto& [host, dev] : outputs_) device_download(host->data.data(), dev, host->data.size());
}

}  // namespace facli
