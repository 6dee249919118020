// The sm80 forward's entry over a KV cache: seqused_k, the keys each sequence uses, and
// a paged cache's block table, both read on the device. Its own header, included by the
// forward instantiations, the forward kernel and dispatch only: FwdParams, SeqLen and
// launch.h reach every CUDA unit, and a change there recompiles all of them
// (docs/kernel_notes.md, session 38).
#pragma once

#include <cstdint>

#include "kernels/sm80/launch.h"

namespace flashattn::sm80 {

struct FwdKvArgs : FwdKernelParams {
  const int32_t* seqused_k = nullptr;  // [B], device memory; null: every key
  // Paged: k and v are pools [num_blocks, page_size, Hkv, D] whose batch strides step
  // blocks; key j of sequence b is row j % page_size of block
  // block_table[b * block_table_stride + j / page_size]. page_size is a multiple of 64,
  // so a key tile (at most 64 rows) lies in one block. Null: batched or packed keys.
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0;
  int page_size = 0;
  int num_blocks = 0;

  FwdKvArgs() = default;
  FwdKvArgs(const FwdKernelParams& p, const int32_t* used) : FwdKernelParams(p), seqused_k(used) {}
};

// Defined beside run_fwd in instantiations/fwd_hdim{D}_{dtype}_sm80*.cu.
template <int kHeadDim, typename Element, SmemTier kTier>
cudaError_t run_fwd_kv(const FwdKvArgs& p, cudaStream_t stream);
// Dispatch on (head dim, dtype, tier), as forward() (dispatch.cpp).
cudaError_t forward_kv(const FwdKvArgs& p, cudaStream_t stream);

}  // namespace flashattn::sm80
