// The decoding path's kernels (decode.h): split-KV attention for the rows of a kv
// head, and the merge of the splits.
//   decode_kernel: block (split, kv head x row group, sequence), kWarps warps. The 16 rows
//     are (query head of the group, query token) pairs, row r = g x Sq + i, so the
//     group's query heads share each K / V tile. Tiles of 16 keys a warp stream through a
//     cp.async ring; warp w takes keys [16 w, 16 w + 16) of each stage, copies them itself
//     and waits for nothing else: S = Q K^T (mma.m16n8k16, Q and K by ldmatrix), mask and
//     online softmax in registers, O += P V (V by ldmatrix.trans). The warps' (max, sum,
//     O) merge through shared memory at the end; with one split the block writes O and
//     the LSE, otherwise its normalised O and LSE go to the split's slot.
//   decode_combine: a warp per output row weighs the splits by their LSE.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "kernels/common/cp_async.cuh"
#include "kernels/common/mask.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/seqlen.h"
#include "kernels/decode/decode.h"

namespace flashattn::decode {
namespace device {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// d += a b for one m16n8k16 tile, fp32 accumulators.
template <bool kBf16>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kBf16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one register of 16-bit values, x0 in the low half.
template <bool kBf16>
__device__ __forceinline__ uint32_t pack(float x0, float x1) {
  if constexpr (kBf16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(x0, x1);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
// All but the newest stages - 2 groups have landed (the ring's depth is a launch value).
__device__ __forceinline__ void cp_async_wait_ring(int stages) {
  switch (stages) {
    case 6: cp_async_wait<4>(); break;
    case 5: cp_async_wait<3>(); break;
    case 4: cp_async_wait<2>(); break;
    case 3: cp_async_wait<1>(); break;
    default: cp_async_wait<0>();
  }
}

// The kv head's keys the block reads: sequence b's used length and, paged, the block
// holding a warp's 16 keys (they never span two: pages are multiples of 64); packed
// keys start at the sequence's offset.
struct Keys {
  const DecodeArgs& a;
  int b, hk;
  int64_t k_offset;
  // Element offset of key `key0`'s row (the first of a warp's 16) of head hk.
  __device__ __forceinline__ int64_t tile_row(int key0, int64_t batch_stride, int64_t row_stride,
                                              int64_t head_stride) const {
    int64_t at;
    if (a.block_table != nullptr) {
      const int blk = min(max(a.block_table[b * a.block_table_stride + key0 / a.page_size], 0), a.num_blocks - 1);
      at = int64_t(blk) * batch_stride + int64_t(key0 % a.page_size) * row_stride;
    } else {
      at = int64_t(b) * batch_stride + (k_offset + key0) * row_stride;
    }
    return at + int64_t(hk) * head_stride;
  }
};

}  // namespace device

// Shared memory (decode.h, smem_bytes): Q's 16 rows, then the ring: stage s holds K and V,
// 16 rows a warp each. Rows are kHeadDim + 8 elements apart: 16-byte aligned for
// cp.async and ldmatrix, and the 8 rows one ldmatrix reads fall on distinct banks.
template <int kHeadDim, bool kBf16, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) decode_kernel(const __grid_constant__ DecodeArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kThreads = kWarps * 32, kTile = kWarps * 16;  // keys a stage
  constexpr int kStride = kHeadDim + 8;
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks of a row
  constexpr int kN8 = kHeadDim / 8;      // O's n8 tiles
  extern __shared__ __align__(128) uint16_t smem[];
  uint16_t* const s_q = smem;
  uint16_t* const s_ring = smem + kBlockRows * kStride;

  // The merge may be scheduled now; it waits for this grid's end before it reads.
  if (a.splits > 1) detail::pdl_trigger();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int split = blockIdx.x, hk = blockIdx.y / a.row_groups, rg = blockIdx.y % a.row_groups, b = blockIdx.z;
  // Sequence b's rows and lengths (packed batches: its own, from cu_seqlens).
  const detail::SeqLen sl(a, b);
  // Rows are (query head, token) pairs of at most max_seqlen_q tokens (a packed
  // sequence's cu_seqlens, unchecked on the device, may claim more: those rows are left,
  // as the tiled kernels leave them); the mask aligns with the sequence's own length.
  const int group = int(a.heads_q / a.heads_kv), sq_all = int(sl.seqlen_q);
  const int sq = min(sq_all, int(a.seqlen_q)), rows = sq * group;
  if (rg * kBlockRows >= rows) return;  // packed: a shorter sequence's unused row block, or none
  int used = int(sl.seqlen_k);
  if (a.seqused_k != nullptr) used = min(max(a.seqused_k[b], 0), used);
  const detail::Mask mask(sq_all, used, a.window_left, a.window_right);
  const device::Keys keys{a, b, hk, sl.k_offset};
  const int dqk = int(a.head_dim_qk), dv = int(a.head_dim_v);

  // The keys any query token sees, in ring stages of kTile keys, and this split's share.
  const int k_lo = int(mask.col_begin(0)), k_hi = max(k_lo, int(mask.col_end(sq - 1)));  // k_hi <= used
  const int t_lo = k_lo / kTile, t_hi = (k_hi + kTile - 1) / kTile;
  const int per = (t_hi - t_lo + a.splits - 1) / a.splits;
  const int t_begin = min(t_lo + split * per, t_hi), t_end = min(t_begin + per, t_hi);
  const int n_tiles = t_end - t_begin;

  // Q's rows (zeros past the group's rows and past dqk), in the first copy group.
  for (int c = tid; c < kBlockRows * kChunks; c += kThreads) {
    const int row = c / kChunks, ch = c % kChunks, r = rg * kBlockRows + row;
    const bool valid = r < rows && ch * 8 < dqk;
    const auto* src = static_cast<const uint16_t*>(a.q);
    if (valid)
      src += sl.q_row(b, a.q_batch_stride, a.q_row_stride, a.q_head_stride, hk * group + r / sq, r % sq) + ch * 8;
    detail::cp_async_zfill<16>(s_q + row * kStride + ch * 8, src, valid);
  }
  // This warp's 16 keys of tile t (K and V) into stage s; keys past the used ones are
  // zeros, never read. Each warp loads and reads only its own rows of the ring, so the
  // warps wait for nothing but their own copies (no block barrier a tile).
  auto load_tile = [&](int t, int s) {
    const int key0 = t * kTile + warp * 16;  // a warp's 16 keys lie in one page (pages: 64n keys)
    const int64_t k_at = keys.tile_row(key0, a.k_batch_stride, a.k_row_stride, a.k_head_stride);
    const int64_t v_at = keys.tile_row(key0, a.v_batch_stride, a.v_row_stride, a.v_head_stride);
    uint16_t* const s_k = s_ring + (s * 2 * kTile + warp * 16) * kStride;
    uint16_t* const s_v = s_k + kTile * kStride;
    const auto* k = static_cast<const uint16_t*>(a.k);
    const auto* v = static_cast<const uint16_t*>(a.v);
#pragma unroll
    for (int c = lane; c < 16 * kChunks; c += 32) {
      const int row = c / kChunks, ch = c % kChunks;
      // Keys no row sees are zeros too, so that a non-finite value there (a sliding
      // window's left, the unused rows) meets no row through P = 0.
      const bool in = key0 + row >= k_lo && key0 + row < k_hi;
      const bool k_ok = in && ch * 8 < dqk, v_ok = in && ch * 8 < dv;
      detail::cp_async_zfill<16>(s_k + row * kStride + ch * 8, k_ok ? k + k_at + row * a.k_row_stride + ch * 8 : k, k_ok);
      detail::cp_async_zfill<16>(s_v + row * kStride + ch * 8, v_ok ? v + v_at + row * a.v_row_stride + ch * 8 : v, v_ok);
    }
  };

  // This thread's two rows (lane / 4 and lane / 4 + 8 of the block's 16): visible keys,
  // query token, ALiBi slope. Rows past the group's see nothing.
  int lo[2], hi[2], qi[2];
  float slope[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int r = rg * kBlockRows + lane / 4 + 8 * rr;
    const bool valid = r < rows;
    qi[rr] = valid ? r % sq : 0;
    lo[rr] = valid ? int(mask.col_begin(qi[rr])) : 0;
    hi[rr] = valid ? int(mask.col_end(qi[rr])) : 0;
    slope[rr] = valid && a.alibi_slopes != nullptr
                    ? a.alibi_slopes[int64_t(b) * a.alibi_batch_stride + hk * group + r / sq]
                    : 0.f;
  }

  float o[kN8][4];
#pragma unroll
  for (int n = 0; n < kN8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int i = 0; i < a.stages - 1; ++i) {
    if (i < n_tiles) load_tile(t_begin + i, i);
    device::cp_async_commit();
  }
  for (int i = 0; i < n_tiles; ++i) {
    device::cp_async_wait_ring(a.stages);
    // The warp's rows of the tile are in for all its lanes, and the warp is done with the
    // stage it refills next; the first time, Q (every warp's copies) is in too.
    if (i == 0) __syncthreads();
    else __syncwarp();
    {
      const int next = i + a.stages - 1;
      if (next < n_tiles) load_tile(t_begin + next, next % a.stages);
      device::cp_async_commit();
    }
    const uint16_t* const s_k = s_ring + ((i % a.stages) * 2 * kTile + warp * 16) * kStride;
    const uint16_t* const s_v = s_k + kTile * kStride;

    // S = Q K^T for this warp's 16 keys: two n8 tiles.
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t qa[4], kb[4];
      device::ldmatrix_x4(qa, s_q + ((lane / 8) % 2 * 8 + lane % 8) * kStride + kk * 16 + lane / 16 * 8);
      device::ldmatrix_x4(kb, s_k + (lane / 16 * 8 + lane % 8) * kStride + kk * 16 + (lane / 8) % 2 * 8);
      device::mma<kBf16>(s[0], qa, kb[0], kb[1]);
      device::mma<kBf16>(s[1], qa, kb[2], kb[3]);
    }

    // Scores in log2 units: modifiers, mask (per row's bounds), online softmax.
    const int key_base = (t_begin + i) * kTile + warp * 16 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rr = e / 2, key = key_base + 8 * j + e % 2;
        float x = s[j][e];
        if (a.score_mods) {
          x *= a.softmax_scale;
          if (a.softcap > 0.f) x = a.softcap * tanhf(x / a.softcap);
          x -= slope[rr] * fabsf(float(qi[rr] + used - sq_all - key));
        }
        x *= a.scale_log2;
        s[j][e] = key < lo[rr] || key >= hi[rr] ? -INFINITY : x;
      }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float mx = fmaxf(fmaxf(s[0][2 * rr], s[0][2 * rr + 1]), fmaxf(s[1][2 * rr], s[1][2 * rr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[rr], mx);
      const float base = m_new == -INFINITY ? 0.f : m_new;  // a row that saw nothing: no -inf - -inf
      const float factor = exp2f(m[rr] - base);
      m[rr] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 2 * rr; e < 2 * rr + 2; ++e) {
          s[j][e] = exp2f(s[j][e] - base);
          sum += s[j][e];
        }
      l[rr] = l[rr] * factor + sum;
#pragma unroll
      for (int n = 0; n < kN8; ++n) {
        o[n][2 * rr] *= factor;
        o[n][2 * rr + 1] *= factor;
      }
    }

    // O += P V: P's two n8 accumulator tiles are the A operand of one k16 step.
    const uint32_t pa[4] = {device::pack<kBf16>(s[0][0], s[0][1]), device::pack<kBf16>(s[0][2], s[0][3]),
                            device::pack<kBf16>(s[1][0], s[1][1]), device::pack<kBf16>(s[1][2], s[1][3])};
#pragma unroll
    for (int n2 = 0; n2 < kHeadDim / 16; ++n2) {
      uint32_t vb[4];
      device::ldmatrix_x4_trans(vb, s_v + ((lane / 8) % 2 * 8 + lane % 8) * kStride + n2 * 16 + lane / 16 * 8);
      device::mma<kBf16>(o[2 * n2], pa, vb[0], vb[1]);
      device::mma<kBf16>(o[2 * n2 + 1], pa, vb[2], vb[3]);
    }
  }
  device::cp_async_wait<0>();
  __syncthreads();  // the ring is free for the merge

  // The warps' (max, sum, O) through shared memory: [warp][row] and [warp][row][col].
  constexpr int kOStride = kHeadDim + 4;  // floats: the rows' float2 stores off each other's banks
  float* const s_o = reinterpret_cast<float*>(s_ring);
  float* const s_m = s_o + kWarps * kBlockRows * kOStride;
  float* const s_l = s_m + kWarps * kBlockRows;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
    const int row = warp * kBlockRows + lane / 4 + 8 * rr;
    if (lane % 4 == 0) {
      s_m[row] = m[rr];
      s_l[row] = l[rr];
    }
#pragma unroll
    for (int n = 0; n < kN8; ++n)
      *reinterpret_cast<float2*>(s_o + row * kOStride + n * 8 + 2 * (lane % 4)) = make_float2(o[n][2 * rr], o[n][2 * rr + 1]);
  }
  __syncthreads();

  // kThreads / 16 threads a row, an even number of columns each.
  constexpr int kPerRow = kThreads / kBlockRows, kCols = kHeadDim / kPerRow;
  static_assert(kCols % 2 == 0, "the merge writes column pairs");
  const int row = tid / kPerRow, c0 = tid % kPerRow * kCols, r = rg * kBlockRows + row;
  if (r >= rows) return;
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w * kBlockRows + row]);
  float weight[kWarps], sum = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float mw = s_m[w * kBlockRows + row];
    weight[w] = mw == -INFINITY ? 0.f : exp2f(mw - mx);
    sum += weight[w] * s_l[w * kBlockRows + row];
  }
  // A row with keys in range whose sum is 0 met -inf / NaN inputs: NaN, as the tiled
  // kernels give; one without keys: 0 and LSE -inf (the contract's empty row).
  const int q = r % sq, hq = hk * group + r / sq;
  // With splits, a split whose scores were all -inf (an infinite input) merges as one
  // without keys, and the merge decides between NaN and the empty row for the whole row.
  const bool sees = a.splits == 1 && mask.col_begin(q) < mask.col_end(q);
  const bool none = !(sum > 0.f) && !isnan(sum);
  const float inv = none ? (sees ? NAN : 0.f) : 1.f / sum;
  const float lse2 = none ? (sees ? NAN : -INFINITY) : mx + log2f(sum);
  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    float x = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)  // a warp without keys adds nothing, whatever its O holds
      if (weight[w] != 0.f) x += weight[w] * s_o[(w * kBlockRows + row) * kOStride + c0 + c];
    acc[c] = x * inv;
  }
  if (a.splits == 1) {
    auto* out = static_cast<uint16_t*>(a.out) + sl.q_row(b, a.o_batch_stride, a.o_row_stride, a.o_head_stride, hq, q);
#pragma unroll
    for (int c = 0; c < kCols; c += 2)
      if (c0 + c < dv) *reinterpret_cast<uint32_t*>(out + c0 + c) = device::pack<kBf16>(acc[c], acc[c + 1]);
    if (tid % kPerRow == 0 && a.lse != nullptr) a.lse[sl.lse_index(a, b, hq, q)] = lse2 * 0.6931471805599453f;
  } else {
    const int64_t slot = ((int64_t(split) * a.batch + b) * a.heads_kv + hk) * (a.row_groups * kBlockRows) + r;
    float* const part = a.o_part + slot * kHeadDim + c0;
#pragma unroll
    for (int c = 0; c < kCols; c += 2) *reinterpret_cast<float2*>(part + c) = make_float2(acc[c], acc[c + 1]);
    if (tid % kPerRow == 0) a.lse_part[slot] = lse2;
  }
#endif
}

// One warp per output row (b, query head, token): the splits' LSE give each its weight.
// The weights go through shared memory, and the splits' O rows are read 8 at a time, so
// a row costs a few memory round trips, not one per split.
template <int kHeadDim, bool kBf16>
__global__ void __launch_bounds__(128) decode_combine(const __grid_constant__ DecodeArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  __shared__ float s_weight[4][kMaxSplits];
  detail::pdl_wait();  // launched early (run_decode): the splits' results are complete past here
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t id = int64_t(blockIdx.x) * 4 + warp;
  const int max_sq = int(a.seqlen_q), group = int(a.heads_q / a.heads_kv);  // packed: the longest
  if (id >= a.batch * a.heads_q * max_sq) return;
  const int q = int(id % max_sq), hq = int(id / max_sq % a.heads_q), b = int(id / max_sq / a.heads_q);
  const detail::SeqLen sl(a, b);
  const int sq_all = int(sl.seqlen_q), sq = min(sq_all, max_sq);  // as the main kernel's rows
  if (q >= sq) return;
  const int hk = hq / group, r = hq % group * sq + q;
  const int64_t rows = int64_t(a.row_groups) * kBlockRows;
  const int64_t slot0 = (int64_t(b) * a.heads_kv + hk) * rows + r, step = a.batch * a.heads_kv * rows;
  constexpr int kPerLane = kMaxSplits / 32;
  float lse[kPerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int s = lane + 32 * j;
    lse[j] = s < a.splits ? a.lse_part[s * step + slot0] : -INFINITY;
    mx = fmaxf(mx, lse[j]);
  }
#pragma unroll
  for (int d = 16; d > 0; d /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    lse[j] = lse[j] == -INFINITY ? 0.f : exp2f(lse[j] - mx);  // a split without keys weighs 0
    sum += lse[j];
  }
#pragma unroll
  for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
  // No split has weight: the empty row (O = 0, LSE = -inf), or NaN where the row sees
  // keys (their every score was -inf). NaN in a split's LSE reaches both.
  int used = int(sl.seqlen_k);
  if (a.seqused_k != nullptr) used = min(max(a.seqused_k[b], 0), used);
  const detail::Mask mask(sq_all, used, a.window_left, a.window_right);
  const bool sees = mask.col_begin(q) < mask.col_end(q);
  const float inv = sum == 0.f ? (sees ? NAN : 0.f) : 1.f / sum;
  const float lse2 = sum == 0.f ? (sees ? NAN : -INFINITY) : mx + log2f(sum);
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) s_weight[warp][lane + 32 * j] = lse[j] * inv;
  __syncwarp();
  auto* out = static_cast<uint16_t*>(a.out) + sl.q_row(b, a.o_batch_stride, a.o_row_stride, a.o_head_stride, hq, q);
  const int dv = int(a.head_dim_v);
  for (int c = lane * 4; c < dv; c += 128) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const float* part = a.o_part + slot0 * kHeadDim + c;
#pragma unroll 8
    for (int s = 0; s < a.splits; ++s) {  // a split without weight wrote zeros (its warps' O skipped)
      const float w = s_weight[warp][s];
      const float4 v = *reinterpret_cast<const float4*>(part + s * step * kHeadDim);
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
    *reinterpret_cast<uint2*>(out + c) = make_uint2(device::pack<kBf16>(acc.x, acc.y), device::pack<kBf16>(acc.z, acc.w));
  }
  if (lane == 0 && a.lse != nullptr) a.lse[sl.lse_index(a, b, hq, q)] = lse2 * 0.6931471805599453f;
#endif
}

template <int kHeadDim, bool kBf16, int kWarps>
cudaError_t launch_decode(const DecodeArgs& a, const Plan& plan, cudaStream_t stream) {
  const auto kernel = decode_kernel<kHeadDim, kBf16, kWarps>;
  // The shared-memory limit set so far, per device (a driver call saved on most calls).
  static std::atomic<int> allowed[kMaxDevices] = {};
  std::atomic<int>* const set = plan.device < kMaxDevices ? &allowed[plan.device] : nullptr;
  if (set == nullptr || set->load(std::memory_order_relaxed) < int(plan.smem_bytes)) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.smem_bytes));
    if (err != cudaSuccess) return err;
    if (set != nullptr) set->store(int(plan.smem_bytes), std::memory_order_relaxed);
  }
  const dim3 grid(unsigned(a.splits), unsigned(a.heads_kv * a.row_groups), unsigned(a.batch));
  kernel<<<grid, kWarps * 32, plan.smem_bytes, stream>>>(a);
  return cudaGetLastError();
}

template <int kHeadDim, bool kBf16>
cudaError_t run_decode(const DecodeArgs& a, const Plan& plan, cudaStream_t stream) {
  static_assert(kHeadDim % 32 == 0, "head dim: the merge's float4s");
  // Four warps: eight measured the same on the H100 (kernel notes, decoding path v4).
  cudaError_t err = launch_decode<kHeadDim, kBf16, kDecodeWarps>(a, plan, stream);
  if (err != cudaSuccess || a.splits == 1) return err;
  // Programmatic launch (sm90): the merge's blocks start as the splits' blocks leave, not
  // a launch later.
  const int64_t rows = a.batch * a.heads_q * a.seqlen_q;
  return detail::launch_early(plan.early_merge, decode_combine<kHeadDim, kBf16>, dim3(unsigned((rows + 3) / 4)),
                              dim3(128), 0, stream, a);
}

}  // namespace flashattn::decode
