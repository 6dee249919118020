// Entry points of the sm80 kernels, one explicit instantiation per generated
// file (instantiations/), declared here so host code needs no CUDA headers.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/kernel_params.h"
#include "kernels/sm80/smem_tier.h"

namespace flashattn::sm80 {

using detail::BwdKernelParams;
using detail::FwdKernelParams;

// Defined in instantiations/{fwd,bwd}_hdim{D}_{dtype}_sm80.cu (the standard
// tier) and ..._sm80_{tier}.cu (the tiers with tiles of their own).
template <int kHeadDim, typename Element, SmemTier kTier>
cudaError_t run_fwd(const FwdKernelParams& p, cudaStream_t stream);
template <int kHeadDim, typename Element, SmemTier kTier>
cudaError_t run_bwd(const BwdKernelParams& p, cudaStream_t stream);

// Head dims with an instantiated kernel; others run on the next larger one.
constexpr int kHeadDims[] = {64, 96, 128, 192, 256};

// The compiled head dim that runs p (its larger head dim rounded up), or 0 when
// this build has none for it.
int forward_head_dim(const FwdParams& p);
// Dispatch on (head dim, dtype) to the instantiated kernels (dispatch.cpp).
cudaError_t forward(const FwdKernelParams& p, cudaStream_t stream);
cudaError_t backward(const BwdKernelParams& p, cudaStream_t stream);

}  // namespace flashattn::sm80
