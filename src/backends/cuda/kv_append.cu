#include "backends/cuda/kv_append.h"

namespace flashattn::detail {
namespace {

constexpr int kThreads = 128;  // a warp per row: at most 32 chunks of 16 bytes (D 256, 2 bytes)

__global__ void __launch_bounds__(kThreads) kv_append_kernel(const __grid_constant__ KvAppend a) {
  const int64_t row = int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t per_side = int64_t(a.batch) * a.new_rows * a.heads_kv;
  if (row >= 2 * per_side) return;
  const KvAppend::Side& s = a.side[row >= per_side];
  const int64_t r = row % per_side;
  const int h = int(r % a.heads_kv), i = int(r / a.heads_kv % a.new_rows), b = int(r / a.heads_kv / a.new_rows);
  const int used = min(max(a.seqused_k[b], 0), a.seqlen_k);
  const int j = used - a.new_rows + i;
  if (j < 0 || lane * 16 >= s.row_bytes) return;
  int64_t dst;
  if (a.block_table != nullptr) {
    const int block = min(max(a.block_table[b * a.block_table_stride + j / a.page_size], 0), a.num_blocks - 1);
    dst = int64_t(block) * s.cache_batch_stride + int64_t(j % a.page_size) * s.cache_row_stride;
  } else {
    dst = int64_t(b) * s.cache_batch_stride + int64_t(j) * s.cache_row_stride;
  }
  dst += int64_t(h) * s.cache_head_stride;
  const int64_t src = int64_t(b) * s.rows_batch_stride + int64_t(i) * s.rows_row_stride + int64_t(h) * s.rows_head_stride;
  const auto* from = reinterpret_cast<const uint4*>(static_cast<const char*>(s.rows) + src * a.element_bytes);
  auto* to = reinterpret_cast<uint4*>(static_cast<char*>(s.cache) + dst * a.element_bytes);
  to[lane] = from[lane];
}

}  // namespace

cudaError_t kv_append(const KvAppend& a, cudaStream_t stream) {
  const int64_t rows = 2 * int64_t(a.batch) * a.new_rows * a.heads_kv;
  if (rows == 0) return cudaSuccess;
  const int64_t blocks = (rows + kThreads / 32 - 1) / (kThreads / 32);
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  kv_append_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace flashattn::detail
