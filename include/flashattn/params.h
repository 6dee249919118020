// The parameter block every backend consumes. Interfaces (C++ API, CLI, Python)
// fill it through flashattn::forward/backward, which validate first; backends
// read it and nothing else. Plain data: pointers, int64 sizes and strides, flags.
#pragma once

#include <cstdint>

#include "flashattn/types.h"

namespace flashattn {

struct FwdParams {
  // Inputs [B, S, H, D] (batched) or [total, H, D] (packed); the last dim is contiguous.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;  // [B, Hq, Sq] or [Hq, total_q]; may be null in forward

  DType dtype = DType::f32;
  Device device{};

  int64_t batch = 0;
  int64_t seqlen_q = 0;  // packed: max_seqlen_q
  int64_t seqlen_k = 0;  // packed: max_seqlen_k
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t head_dim_qk = 0;
  int64_t head_dim_v = 0;

  // Element strides. For packed input the batch strides are 0 and rows are global.
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;  // row stride is 1

  // Packed variable length: both null for batched input.
  const int32_t* cu_seqlens_q = nullptr;  // [B+1]
  const int32_t* cu_seqlens_k = nullptr;  // [B+1]
  int64_t total_q = 0, total_k = 0;

  float softmax_scale = 0.f;
  float softcap = 0.f;  // 0: off
  bool causal = false;  // informational: already folded into window_right
  // Visible keys of query row i: i + Sk - Sq - window_left <= j <= i + Sk - Sq + window_right;
  // -1 means unbounded on that side. Causal is folded in as window_right = min(window_right, 0).
  int64_t window_left = -1, window_right = -1;

  const float* alibi_slopes = nullptr;  // [Hq] or [B, Hq]
  int64_t alibi_batch_stride = 0;       // 0 when the slopes are shared by the batch

  float dropout_p = 0.f;
  uint64_t seed = 0, offset = 0;

  bool deterministic = false;
  Backend backend = Backend::automatic;  // resolved (never automatic) by the time a backend sees it
  void* stream = nullptr;                // cudaStream_t for CUDA backends
  int num_threads = 0;                   // CPU: 0 means the OpenMP default

  bool is_varlen() const { return cu_seqlens_q != nullptr; }
  bool is_local() const { return window_left >= 0 || window_right >= 0; }
  int64_t group_size() const { return heads_q / heads_kv; }
};

struct BwdParams : FwdParams {
  const void* dout = nullptr;  // like out
  void* dq = nullptr;          // like q
  void* dk = nullptr;          // like k
  void* dv = nullptr;          // like v
  int64_t do_batch_stride = 0, do_row_stride = 0, do_head_stride = 0;
  int64_t dq_batch_stride = 0, dq_row_stride = 0, dq_head_stride = 0;
  int64_t dk_batch_stride = 0, dk_row_stride = 0, dk_head_stride = 0;
  int64_t dv_batch_stride = 0, dv_row_stride = 0, dv_head_stride = 0;
};

}  // namespace flashattn
