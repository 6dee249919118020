// What the backends take beyond FwdParams: a KV cache's used lengths, paged blocks and
// new rows (flashattn::forward validates them; on CUDA only the sm80 forward reads them,
// src/kernels/sm80/fwd_kv.h, and kv_append.cu writes the new rows). Kept out of
// FwdParams and SeqLen, which every CUDA kernel includes: a change there recompiles all
// of them, about 40 minutes on CI's two cores.
#pragma once

#include <cstdint>

#include "flashattn/params.h"
#include "kernels/common/seqlen.h"

namespace flashattn::detail {

struct KvCache {
  // Keys in use: sequence b reads only its first seqused_k[b] key rows. Null: all.
  const int32_t* seqused_k = nullptr;  // [B]
  // Paged (batched input): k and v are pools [num_blocks, page_size, Hkv, D], and key j
  // of sequence b sits in block block_table[b * block_table_stride + j / page_size],
  // row j % page_size (the batch strides of k and v step blocks); seqlen_k is
  // max_blocks * page_size. Null: not paged.
  const int32_t* block_table = nullptr;  // [B, max_blocks]
  int64_t block_table_stride = 0;
  int64_t page_size = 0;
  int64_t num_blocks = 0;
  // New rows written into the caches before the attention (Options::k_new / v_new): row i
  // of sequence b becomes its key seqused_k[b] - new_rows + i. new_rows 0: none.
  struct NewRows {
    const void* data = nullptr;
    int64_t batch_stride = 0, row_stride = 0, head_stride = 0;  // elements
  } k_new, v_new;
  int64_t new_rows = 0;
};

struct HostFwdParams : FwdParams {
  KvCache kv;
};

// SeqLen with a KV cache: the used length, and key rows through the block table.
struct HostSeqLen : SeqLen {
  const int32_t* blocks = nullptr;  // paged: this sequence's row of the block table
  int64_t page = 0;

  HostSeqLen(const FwdParams& p, int64_t b) : SeqLen(p, b) {}  // no cache (the backward)
  HostSeqLen(const HostFwdParams& p, int64_t b) : SeqLen(p, b) {
    if (p.kv.seqused_k != nullptr) {  // validated; clamped all the same
      const int64_t used = p.kv.seqused_k[b];
      seqlen_k = used < 0 ? 0 : (used < seqlen_k ? used : seqlen_k);
    }
    if (p.kv.block_table != nullptr) {
      blocks = p.kv.block_table + b * p.kv.block_table_stride;
      page = p.kv.page_size;
    }
  }

  int64_t k_row(int64_t b, int64_t batch_stride, int64_t row_stride, int64_t head_stride, int64_t h,
                int64_t j) const {
    if (blocks != nullptr)  // paged: batch_stride steps blocks of the pool
      return int64_t(blocks[j / page]) * batch_stride + (j % page) * row_stride + h * head_stride;
    return SeqLen::k_row(b, batch_stride, row_stride, head_stride, h, j);
  }
};

// Writes kv.k_new / kv.v_new into the caches (host memory, validated; a no-op without
// new rows). The rows are read in full before the first write, so new rows that are
// views of the cache (of the rows being written, too) give the values they held.
void write_new_kv(const HostFwdParams& p);

}  // namespace flashattn::detail
