// Compile-time switches of the Hopper backward that host code (dispatch.cpp)
// must see as well as the kernels.
#pragma once

// dQ apart (kernel_notes, sm90 backward v34): at hd256 (and hd192, the other
// head dim whose blocks split the products, unmeasured) the plain key-block
// kernel computes dK and dV only and dQ comes from a kernel of its own
// (bwd_dq_kernel.cuh), with no atomics: 1.17-1.20x the fused form at hd256 and
// 1.32-1.47x at hd192 on an H100 (session 37). The CMake option
// FLASHATTN_SM90_BWD_DQ_APART=OFF defines it 0 (the fused form, for A/B runs).
#ifndef FLASHATTN_SM90_BWD_DQ_APART
#define FLASHATTN_SM90_BWD_DQ_APART 1
#endif

namespace flashattn::sm90 {

// Whether the plain backward at this head dim takes dQ apart. Nothing is added
// atomically there, so it is deterministic as it stands.
constexpr bool bwd_dq_apart(int head_dim) {
  return FLASHATTN_SM90_BWD_DQ_APART != 0 && (head_dim == 192 || head_dim == 256);
}

}  // namespace flashattn::sm90
