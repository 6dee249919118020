// Host side of the Hopper forward: TMA descriptors for Q, K and V (built per call
// on the host: no device work, so a call stays capturable in a CUDA graph) and
// the launch on the caller's stream.
#pragma once

#include <cuda_runtime.h>

#include "kernels/sm90/fwd_kernel.cuh"
#include "kernels/sm90/launch.h"

namespace flashattn::sm90 {

template <int kHeadDim, typename Element>
cudaError_t run_fwd(const FwdKernelParams& p, cudaStream_t stream) {
  using Traits = FwdTraits<kHeadDim, Element>;
  using Shape4 = typename Traits::GmemShape;
  using Stride4 = typename Traits::GmemStride;
  auto gmem = [](const void* ptr, int64_t rows, int64_t heads, int64_t batch_stride, int64_t row_stride,
                 int64_t head_stride, int64_t batch) {
    return make_tensor(make_gmem_ptr(static_cast<const Element*>(ptr)),
                       Shape4(int32_t(rows), int32_t(kHeadDim), int32_t(heads), int32_t(batch)),
                       Stride4(row_stride, _1{}, head_stride, batch_stride));
  };
  // Packed batches: one "batch" of total rows (the kernel offsets each sequence);
  // its batch stride only has to be a valid one.
  const bool packed = p.is_varlen();
  const int64_t rows_q = packed ? p.total_q : p.seqlen_q, rows_k = packed ? p.total_k : p.seqlen_k;
  const int64_t batches = packed ? 1 : p.batch;
  auto batch_stride = [&](int64_t s, int64_t rows, int64_t row_stride) { return packed ? rows * row_stride : s; };
  FwdArgs<Traits> args{
      p,
      make_tma_copy(SM90_TMA_LOAD{},
                    gmem(p.q, rows_q, p.heads_q, batch_stride(p.q_batch_stride, rows_q, p.q_row_stride),
                         p.q_row_stride, p.q_head_stride, batches),
                    typename Traits::SmemLayoutQ{}, Shape<Int<Traits::kBlockM>, Int<kHeadDim>>{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{},
                    gmem(p.k, rows_k, p.heads_kv, batch_stride(p.k_batch_stride, rows_k, p.k_row_stride),
                         p.k_row_stride, p.k_head_stride, batches),
                    take<0, 2>(typename Traits::SmemLayoutKV{}), Shape<Int<Traits::kBlockN>, Int<kHeadDim>>{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{},
                    gmem(p.v, rows_k, p.heads_kv, batch_stride(p.v_batch_stride, rows_k, p.v_row_stride),
                         p.v_row_stride, p.v_head_stride, batches),
                    take<0, 2>(typename Traits::SmemLayoutKV{}), Shape<Int<Traits::kBlockN>, Int<kHeadDim>>{}, _1{})};

  auto kernel = fwd_kernel<Traits>;
  constexpr int smem = Traits::kSmemBytes;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>((p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM),
                  static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
  kernel<<<grid, Traits::kThreads, smem, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace flashattn::sm90
