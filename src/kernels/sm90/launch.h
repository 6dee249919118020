// Entry points of the Hopper (sm90a) kernels, declared so host code needs no
// CUDA or CuTe headers. One explicit instantiation per generated file.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/kernel_params.h"

namespace flashattn::sm90 {

using detail::BwdKernelParams;
using detail::FwdKernelParams;

// Once per warp-specialised kernel: opt in to its dynamic shared memory, and
// refuse it (rather than hang) where the compiled register count cannot hold its
// setmaxnreg split (Traits::kBlockRegs; the consumers would wait forever in
// setmaxnreg.inc), e.g. a toolchain compiling below the launch bound's share.
template <typename Traits>
cudaError_t prepare_kernel(const void* kernel) {
  if (const cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
      e != cudaSuccess)
    return e;
  cudaFuncAttributes fa{};
  if (const cudaError_t e = cudaFuncGetAttributes(&fa, kernel); e != cudaSuccess) return e;
  return (fa.numRegs + 7) / 8 * 8 * Traits::kThreads >= Traits::kBlockRegs ? cudaSuccess
                                                                             : cudaErrorLaunchOutOfResources;
}

// Whether a kernel that needs nothing of the one before it may start while that
// one's last blocks run (programmatic dependent launch; the dQ kernel after the
// key-block kernel). On unless FLASHATTN_SM90_PDL=0; read once (dispatch.cpp).
bool programmatic_launch_enabled();

// Defined in instantiations/fwd_hdim{D}_{dtype}_sm90.cu.
template <int kHeadDim, typename Element>
cudaError_t run_fwd(const FwdKernelParams& p, cudaStream_t stream);

// True when this build has a Hopper forward kernel for p (dispatch.cpp): exact
// head dims 64/96/128/192/256 with Dqk == Dv, fp16/bf16, fixed-length or packed batches,
// softcap and ALiBi, no dropout. Everything else runs on the sm80 kernel.
bool supports_forward(const FwdParams& p);
cudaError_t forward(const FwdKernelParams& p, cudaStream_t stream);

// Defined in instantiations/bwd_hdim{D}_{dtype}_sm90.cu.
template <int kHeadDim, typename Element>
cudaError_t run_bwd(const BwdKernelParams& p, cudaStream_t stream);

// True when this build has a Hopper backward kernel for p: head dims 64/96/128/192/256
// with Dqk == Dv, fp16/bf16, fixed-length or packed batches, causal and window
// masks, GQA/MQA, softcap and ALiBi, the deterministic mode (ordered dQ
// reduce-adds), no dropout.
// Everything else runs on the sm80 kernels.
bool supports_backward(const BwdParams& p);
// With score modifiers; defined in instantiations/bwd_hdim{D}_{dtype}_sm90_mods.cu.
template <int kHeadDim, typename Element>
cudaError_t run_bwd_mods(const BwdKernelParams& p, cudaStream_t stream);
cudaError_t backward(const BwdKernelParams& p, cudaStream_t stream);
// Whether a Hopper backward of p needs the fp32 dQ accumulator in its scratch:
// not where the plain kernels take dQ apart (bwd_switches.h).
bool backward_needs_dq_accum(const BwdParams& p);

}  // namespace flashattn::sm90
