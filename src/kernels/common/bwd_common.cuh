// Pieces of the backward shared by the sm80 and sm90 kernels: where a query
// row's d_i and fp32 dQ accumulator live, the row-dot pre-pass, the dQ
// conversion post-pass, and the per-score gradient.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/kernel_params.h"
#include "kernels/common/seqlen.h"

namespace flashattn::detail {

// Row slot of query row i of head h in sequence b, in LSE order ([B, Hq, Sq] or
// [Hq, total_q], contiguous): where d_i lives.
__device__ __forceinline__ int64_t row_slot(const BwdKernelParams& p, const detail::SeqLen& sl,
                                            int b, int h, int i) {
  return p.cu_seqlens_q != nullptr ? int64_t(h) * p.total_q + sl.q_offset + i
                                   : (int64_t(b) * p.heads_q + h) * p.seqlen_q + i;
}

// The row-wise passes (row dot, dQ conversion) give each row a group of lanes,
// 8 columns (16-byte loads) per lane: a power of two, so that narrow heads put
// several rows in one warp (hd64: 4 rows of 8 lanes, where one row per warp left
// 24 lanes idle and took twice cuDNN's time). Blocks of kRowThreads threads.
constexpr int kRowThreads = 256;
__host__ __device__ inline int row_lanes(int64_t cols) {
  int lanes = 1;
  while (lanes < 32 && lanes * 8 < cols) lanes *= 2;
  return lanes;
}
// Blocks along x for `rows` rows of `cols` columns.
inline unsigned row_blocks(int64_t rows, int64_t cols) {
  const int64_t per_block = kRowThreads / row_lanes(cols);
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

// LSE in log2 units for exp2; a row that saw no key (-inf) becomes
// +inf so all of its probabilities are 0.
__device__ __forceinline__ float lse_log2_of(float lse) {
  return lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
}

// d_i = dO_i . O_i, a lane group per row (row_lanes of head_dim_v); also zeroes
// the row's fp32 dQ accumulator and, where asked, writes its LSE in log2 units.
template <typename Element>
__global__ void row_dot_kernel(const __grid_constant__ BwdKernelParams p) {
  const int lanes = row_lanes(p.head_dim_v);
  const int t = blockIdx.x * blockDim.x + threadIdx.x, sub = threadIdx.x % lanes;
  const int h = blockIdx.y, b = blockIdx.z;
  const detail::SeqLen sl(p, b);
  const int i = t / lanes;
  // Rows past the sequence still take part in the shuffles (whole warps only).
  const bool valid = i < sl.seqlen_q;
  float acc = 0.f;
  if (valid) {
    const auto* o = static_cast<const Element*>(p.out) + sl.q_row(b, p.o_batch_stride, p.o_row_stride, p.o_head_stride, h, i);
    const auto* d = static_cast<const Element*>(p.dout) + sl.q_row(b, p.do_batch_stride, p.do_row_stride, p.do_head_stride, h, i);
    for (int c = sub * 8; c < p.head_dim_v; c += lanes * 8) {
      const uint4 ov = *reinterpret_cast<const uint4*>(o + c);
      const uint4 dv = *reinterpret_cast<const uint4*>(d + c);
      const Element* oe = reinterpret_cast<const Element*>(&ov);
      const Element* de = reinterpret_cast<const Element*>(&dv);
      #pragma unroll
      for (int e = 0; e < 8; ++e) acc += float(oe[e]) * float(de[e]);
    }
  }
  for (int off = lanes / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffff, acc, off);
  if (!valid) return;
  const int64_t slot = row_slot(p, sl, b, h, i);
  if (sub == 0) p.row_dot[slot] = acc;
  if (sub == 0 && p.lse_log2 != nullptr) p.lse_log2[slot] = lse_log2_of(p.lse[sl.lse_index(p, b, h, i)]);
  if (p.dq_accum != nullptr)
    for (int c = sub * 4; c < p.head_dim_qk; c += lanes * 4)
      *reinterpret_cast<float4*>(p.dq_accum + slot * p.head_dim_qk + c) = make_float4(0.f, 0.f, 0.f, 0.f);
}

// Where the accumulator keeps dQ's columns c..c+3 and c+4..c+7 (c % 8 == 0):
// in order here; the Hopper backward's permuted order is sm90::DqPermCols.
struct DqPlainCols {
  __host__ __device__ static int at(int c) { return c; }
  static constexpr int kHalf = 4;  // c+4..c+7, from at(c)
};

// dQ = the fp32 accumulator in dQ's dtype, times the softmax scale where the
// kernel that summed it left the scale out of dS (kScale: the sm80 backward), a
// lane group per row (row_lanes of head_dim_qk), 8 columns per lane and step;
// Cols: the accumulator's column order.
template <typename Element, bool kScale = false, typename Cols = DqPlainCols>
__global__ void dq_convert_kernel(const __grid_constant__ BwdKernelParams p) {
  const int lanes = row_lanes(p.head_dim_qk);
  const int t = blockIdx.x * blockDim.x + threadIdx.x, sub = threadIdx.x % lanes;
  const int h = blockIdx.y, b = blockIdx.z;
  const detail::SeqLen sl(p, b);
  const int i = t / lanes;
  if (i >= sl.seqlen_q) return;
  const float* acc = p.dq_accum + row_slot(p, sl, b, h, i) * p.head_dim_qk;
  auto* dq = static_cast<Element*>(p.dq) + sl.q_row(b, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, h, i);
  for (int c = sub * 8; c < p.head_dim_qk; c += lanes * 8) {
    const int at = Cols::at(c);
    const float4 lo = *reinterpret_cast<const float4*>(acc + at);
    const float4 hi = *reinterpret_cast<const float4*>(acc + at + Cols::kHalf);
    const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    uint4 out;
    Element* oe = reinterpret_cast<Element*>(&out);
    #pragma unroll
    for (int e = 0; e < 8; ++e) oe[e] = Element(kScale ? v[e] * p.softmax_scale : v[e]);
    *reinterpret_cast<uint4*>(dq + c) = out;
  }
}

// The score gradient of one (query i, key j): from the raw q.k and dO.v
// accumulators to the dropped-out probability (for dV) and dS without the
// softmax scale (for dQ and dK, whose sums the kernels scale once at the end:
// one multiply per output element instead of one per score). Without score
// modifiers the caller masks by passing qk = -inf (exp2 gives exactly 0, and
// `visible` is not read); with them, masked scores pass visible = false, since
// softcap and ALiBi would turn -inf into a finite score. With finite inputs
// p = 0 gives dS = 0 exactly (rows and keys past the sequence read zeros, so
// their dp and d are finite too). A NaN or inf input is not kept to the rows
// that touch it here, nor in the tile products (0 * NaN): see the README's
// "Non-finite inputs on the GPU".
template <bool kMods>
__device__ __forceinline__ void score_grad(const BwdKernelParams& p, float qk, float dp,
                                           float lse_log2, float d, float slope, int i, int j,
                                           int diag_offset, bool visible, bool keep, float& p_out,
                                           float& ds_out) {
  constexpr float kLog2e = 1.4426950408889634f;
  if constexpr (!kMods) {
    // x * scale - lse in log2 units, as one fma.
    const float prob = exp2f(fmaf(qk, p.scale_log2, -lse_log2));
    p_out = prob;
    ds_out = prob * (dp - d);
  } else {
    float x = qk * p.softmax_scale, dtanh = 1.f;
    if (p.softcap > 0.f) {
      const float t = tanhf(x / p.softcap);
      x = p.softcap * t;
      dtanh = 1.f - t * t;
    }
    if (p.alibi_slopes) x -= slope * float(abs(i + diag_offset - j));
    const float prob = visible ? exp2f(fmaf(x, kLog2e, -lse_log2)) : 0.f;
    float pd = prob;
    if (p.dropout_p > 0.f) {
      pd = keep ? prob * p.rng.keep_scale : 0.f;
      dp = keep ? dp * p.rng.keep_scale : 0.f;
    }
    p_out = pd;
    ds_out = prob * (dp - d) * dtanh;
  }
}


}  // namespace flashattn::detail
