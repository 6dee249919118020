// How much shared memory one thread block may have sets the sm80 kernels' tile
// shapes, and it is what differs most between the GPUs they run on:
//   compact  - 99 KiB:  sm86 / sm89 / sm120 (RTX 30, 40 and 50 series, A10, A40,
//              L4, L40S, RTX 6000 Ada);
//   standard - 163 KiB: sm80 / sm87 (A100, A30, Jetson Orin), the tiles the
//              kernels were first tuned with;
//   large    - 227 KiB on sm90 (H100, H200), whose kernels are built for sm_90a
//              alone (B200 has as much memory and runs the standard tiles).
// Each kernel's tile table (traits.h, bwd_traits.h) has an entry per tier where
// the standard tiles do not fit it or where more memory pays; a tier without
// its own entry runs the standard kernel. Host and device code, no CUDA headers.
#pragma once

namespace flashattn::sm80 {

enum class SmemTier : int { compact = 0, standard = 1, large = 2 };

// The opt-in dynamic shared memory per block (cudaDevAttrMaxSharedMemoryPerBlockOptin)
// that each tier's tiles may use.
constexpr int smem_budget(SmemTier t) {
  return t == SmemTier::compact ? 101376 : t == SmemTier::standard ? 166912 : 232448;
}

// The largest tier whose budget the device's opt-in limit covers; `request`
// (FLASHATTN_SM80_TILES: "compact", "standard" or "large"; null or empty for
// none) can only lower it, so tests can run the smaller tiers' kernels on a
// bigger GPU. An unrecognised request is ignored.
SmemTier pick_smem_tier(int smem_optin_bytes, const char* request);

// pick_smem_tier for a device, its limit read once and cached; the request is
// read from the environment at each call.
SmemTier device_smem_tier(int device);

const char* to_string(SmemTier t);

}  // namespace flashattn::sm80
