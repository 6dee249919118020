// Where sequence b of a batch lives: its row offsets in the packed tensors and
// its lengths. One rule for batched and packed input, shared by every backend.
#pragma once

#include <cstdint>

#include "flashattn/params.h"
#include "kernels/common/host_device.h"

namespace flashattn::detail {

struct SeqLen {
  int64_t q_offset = 0;  // first row of the sequence (packed), 0 when batched
  int64_t k_offset = 0;
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;

  FA_HD SeqLen(const FwdParams& p, int64_t b) {
    if (p.cu_seqlens_q != nullptr) {
      q_offset = p.cu_seqlens_q[b];
      k_offset = p.cu_seqlens_k[b];
      seqlen_q = p.cu_seqlens_q[b + 1] - q_offset;
      seqlen_k = p.cu_seqlens_k[b + 1] - k_offset;
    } else {
      seqlen_q = p.seqlen_q;
      seqlen_k = p.seqlen_k;
    }
  }

  // Element offsets of row `i` (sequence-relative) of head h in sequence b.
  FA_HD int64_t q_row(int64_t b, int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                      int64_t h, int64_t i) const {
    return b * batch_stride + (q_offset + i) * row_stride + h * head_stride;
  }
  FA_HD int64_t k_row(int64_t b, int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                      int64_t h, int64_t j) const {
    return b * batch_stride + (k_offset + j) * row_stride + h * head_stride;
  }
  FA_HD int64_t lse_index(const FwdParams& p, int64_t b, int64_t h, int64_t i) const {
    return b * p.lse_batch_stride + h * p.lse_head_stride + q_offset + i;
  }
};

}  // namespace flashattn::detail
