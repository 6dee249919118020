// A decoding step's new rows (Options::k_new / v_new) written into a KV cache on the
// GPU, on the call's stream before the attention kernel, which then sees them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace flashattn::detail {

struct KvAppend {
  struct Side {
    void* cache;      // k or v: [B, S_cache, Hkv, D], or a pool [num_blocks, page_size, Hkv, D]
    const void* rows; // k_new or v_new: [B, new_rows, Hkv, D]
    int64_t cache_batch_stride, cache_row_stride, cache_head_stride;  // elements
    int64_t rows_batch_stride, rows_row_stride, rows_head_stride;
    int row_bytes;  // D times the element size: a multiple of 16, at most 512
  } side[2];
  int element_bytes;
  int batch, new_rows, heads_kv;
  int seqlen_k;                 // key rows a sequence can hold
  const int32_t* seqused_k;     // [B]: row i goes to key seqused_k[b] - new_rows + i
  const int32_t* block_table;   // paged, or null
  int64_t block_table_stride;
  int page_size, num_blocks;
};

// Every row of both sides, 16 bytes per thread; rows whose destination falls before
// key 0 (seqused_k[b] below new_rows, which the host cannot check in device memory)
// are skipped, and table entries are clamped into the pool, as the forward does.
cudaError_t kv_append(const KvAppend& a, cudaStream_t stream);

}  // namespace flashattn::detail
