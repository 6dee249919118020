#include "kernels/sm80/smem_tier.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace flashattn::sm80 {

const char* to_string(SmemTier t) {
  return t == SmemTier::compact ? "compact" : t == SmemTier::standard ? "standard" : "large";
}

SmemTier pick_smem_tier(int smem_optin_bytes, const char* request) {
  SmemTier tier = smem_optin_bytes >= smem_budget(SmemTier::large)      ? SmemTier::large
                  : smem_optin_bytes >= smem_budget(SmemTier::standard) ? SmemTier::standard
                                                                        : SmemTier::compact;
  if (request != nullptr)
    for (SmemTier t : {SmemTier::compact, SmemTier::standard, SmemTier::large})
      if (std::strcmp(request, to_string(t)) == 0 && static_cast<int>(t) < static_cast<int>(tier)) tier = t;
  return tier;
}

SmemTier device_smem_tier(int device) {
  // The limit per device, read once (0: not read yet); a call per launch
  // otherwise. Devices past the table are read at each call.
  constexpr int kCached = 64;
  static std::atomic<int> optin[kCached] = {};
  int bytes = device >= 0 && device < kCached ? optin[device].load(std::memory_order_relaxed) : 0;
  if (bytes == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      bytes = smem_budget(SmemTier::compact);  // the launch reports what is wrong with the device
    }
    // The large tier's kernels are built for sm_90a alone (src/CMakeLists.txt):
    // other GPUs with as much memory (B200) run the standard ones.
    if (major != 9 && bytes > smem_budget(SmemTier::standard)) bytes = smem_budget(SmemTier::standard);
    if (device >= 0 && device < kCached) optin[device].store(bytes, std::memory_order_relaxed);
  }
  return pick_smem_tier(bytes, std::getenv("FLASHATTN_SM80_TILES"));
}

}  // namespace flashattn::sm80
