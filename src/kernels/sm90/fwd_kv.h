// The Hopper forward over a batched KV cache's used keys (seqused_k, device memory). Its
// own header, included by the forward instantiations, the forward launch and dispatch
// only: launch.h reaches every Hopper unit, and a change there recompiles all of them.
// The walk's first key tile, where it runs past a sequence's used keys, is loaded ending
// at the last used key (TMA zero-fills rows before key 0), its keys below its own start
// masked, so no unused row (which may hold NaN) meets P V (fwd_kernel.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/kernel_params.h"

namespace flashattn::sm90 {

// Defined beside run_fwd in instantiations/fwd_hdim{D}_{dtype}_sm90.cu.
template <int kHeadDim, typename Element>
cudaError_t run_fwd_used(const detail::FwdKernelParams& p, const int32_t* seqused_k, cudaStream_t stream);
// Dispatch as forward() (dispatch.cpp); p batched (no cu_seqlens), supports_forward(p).
cudaError_t forward_used(const detail::FwdKernelParams& p, const int32_t* seqused_k, cudaStream_t stream);

}  // namespace flashattn::sm90
