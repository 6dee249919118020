// The CUDA decoding path (sm80 and newer, Hopper included): forward calls with few
// query rows per kv head (Sq x group <= 64; a token or a few per sequence against a
// long KV cache). The tiled kernels give such a call one block per (128-row query
// tile, head, sequence), most of whose rows are empty, and a one-token step at small
// batch then fills a few SMs while reading each kv head's keys once per query head.
// Here one block takes the 16 rows (query heads of a group x query tokens) of a kv
// head, so K and V are read once per group, and the keys are split over blocks
// (split-KV) until the GPU is full; a second kernel merges the splits by their
// log-sum-exp. Plain CUDA (mma.sync, ldmatrix, cp.async), no CuTe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/kernel_params.h"

namespace flashattn::decode {

using detail::FwdKernelParams;

constexpr int kBlockRows = 16;  // rows of one block: one mma.m16n8k16 M
constexpr int kMaxRows = 64;    // rows per kv head (Sq x group) the path takes: four blocks' worth
constexpr int kWarpKeys = 16;   // keys a warp takes of each ring stage (a page holds whole ones)
constexpr int kDecodeWarps = 4; // a block's warps (the kernel takes 4 or 8)
constexpr int kMaxSplits = 128;
constexpr int kMaxDevices = 64;  // devices whose shared-memory setting is remembered (others: set per call)

struct DecodeArgs : FwdKernelParams {
  // The KV cache (backends/host_params.h, KvCache), read on the device and clamped.
  const int32_t* seqused_k = nullptr;
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0;
  int page_size = 0, num_blocks = 0;
  // From plan():
  int row_groups = 1;  // blocks per kv head along rows: ceil(Sq x group / 16)
  int splits = 1;      // blocks per (kv head, row group, sequence) along keys
  int stages = 2;      // cp.async ring depth, 2-6 (K and V of 16 keys a warp a stage)
  bool score_mods = false;  // detail::needs_score_mods: scores scaled, capped and biased one by one
  // splits > 1: each split's normalised O and its LSE (log2 units), merged by the
  // second kernel: [splits, B, Hkv, row_groups x 16, head dim] and [splits, B, Hkv,
  // row_groups x 16], fp32.
  float* o_part = nullptr;
  float* lse_part = nullptr;
};

struct Plan {
  bool ok = false;  // the path takes the call
  int head_dim = 0, row_groups = 1, splits = 1, stages = 2;
  bool early_merge = false;  // the merge by programmatic launch (sm90; FLASHATTN_SM90_PDL)
  int device = 0;
  size_t smem_bytes = 0;     // dynamic shared memory of the main kernel
  size_t scratch_bytes = 0;  // o_part + lse_part (0 when splits == 1)
  size_t lse_offset = 0;     // bytes from o_part to lse_part
};

// Whether the decoding path takes p on `device`, and its launch shape. Off with
// FLASHATTN_CUDA_DECODE=0; FLASHATTN_CUDA_DECODE_SPLITS=n and FLASHATTN_CUDA_DECODE_STAGES=2..6
// force the split count and the ring's depth (benchmarks). Not taken: dropout, more than
// kMaxRows rows per kv head (packed batches: max_seqlen_q x group).
Plan plan(const FwdParams& p, int device);
// The same from the device's figures (tests; env switches other than the path's off one apply).
struct DeviceLimits {
  int sms = 0, major = 0, smem_block = 0, smem_sm = 0;  // shared memory in bytes (opt-in per block)
};
Plan plan_for(const FwdParams& p, const DeviceLimits& d);
// Runs the planned kernels on `stream` (o_part / lse_part set when splits > 1).
cudaError_t run(const DecodeArgs& a, const Plan& plan, cudaStream_t stream);

// Defined in instantiations/decode_hdim{D}_{dtype}.cu.
template <int kHeadDim, bool kBf16>
cudaError_t run_decode(const DecodeArgs& a, const Plan& plan, cudaStream_t stream);

}  // namespace flashattn::decode
