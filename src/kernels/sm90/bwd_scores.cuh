// The score side of the Hopper backward kernel (bwd_kernel.cuh), per thread of
// a consumer group: which query rows see its keys (the mask as row ranges), the
// probabilities P^T recomputed from the LSE, and the contract's score
// modifiers with softcap's gradient.
#pragma once

#include <cmath>
#include <type_traits>

#include <cute/tensor.hpp>

#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"

namespace flashattn::sm90 {

using namespace cute;
using detail::BwdKernelParams;

// The query rows that see each of this thread's two keys, [lo, hi) from the
// mask, empty for keys past the sequence: a row sees key j iff it lies in
// row_begin(j)..row_end(j), the same test as col_begin(i) <= j < col_end(i),
// with two ranges per thread instead of two per query column.
// A per-row vector of the step (LSE or d_i in shared memory, indexed by query row)
// at this thread's columns ni, read into registers ahead of their use.
template <int N, typename Coord>
__device__ __forceinline__ void read_row_vals(float (&vals)[N], const float* rows, const Coord& coord) {
  CUTE_UNROLL
  for (int ni = 0; ni < N; ++ni) vals[ni] = rows[get<1>(coord(0, ni))];
}

struct KeyRows {
  int lo[2], hi[2];
  template <typename Coord>
  __device__ __forceinline__ KeyRows(const Coord& coord, const detail::Mask& mask, int c0, int seqlen_k) {
    CUTE_UNROLL
    for (int mi = 0; mi < 2; ++mi) {
      const int j = c0 + get<0>(coord(mi, 0));
      lo[mi] = j < seqlen_k ? int(mask.row_begin(j)) : 0;
      hi[mi] = j < seqlen_k ? int(mask.row_end(j)) : 0;
    }
  }
  // S^T -> P^T in place (x and coord: this thread's (key, query row) view):
  // exp2 against the rows' LSE in log2 units, masked when the tile is not
  // whole. Query columns are taken relative to the thread's first one
  // (constants once unrolled) against the key rows' ranges shifted to match.
  // lse_log2: the tile's row LSEs (indexed by query row) or, where the caller
  // has read this thread's into registers first, a callable of ni (LseOf).
  template <typename X, typename Coord, typename Lse>
  __device__ __forceinline__ void probs(X& x, const Coord& coord, const Lse& lse_log2, bool need_mask, int m0,
                                        float scale_log2) const {
    auto lse_of = [&](int ni) {
      if constexpr (std::is_pointer_v<Lse> || std::is_array_v<Lse>) return lse_log2[get<1>(coord(0, ni))];
      else return lse_log2(ni);
    };
    const int q0 = get<1>(coord(0, 0));
    if (need_mask) {
      int l[2], h[2];
      CUTE_UNROLL
      for (int mi = 0; mi < 2; ++mi) {
        l[mi] = lo[mi] - m0 - q0;
        h[mi] = hi[mi] - m0 - q0;
      }
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(x); ++ni) {
        const int il = get<1>(coord(0, ni)), q = il - q0;
        const float lse2 = lse_of(ni);
        CUTE_UNROLL
        for (int mi = 0; mi < 2; ++mi)
          x(mi, ni) = q >= l[mi] && q < h[mi] ? exp2f(fmaf(x(mi, ni), scale_log2, -lse2)) : 0.f;
      }
    } else {
      CUTE_UNROLL
      for (int ni = 0; ni < size<1>(x); ++ni) {
        const float lse2 = lse_of(ni);
        CUTE_UNROLL
        for (int mi = 0; mi < 2; ++mi) x(mi, ni) = exp2f(fmaf(x(mi, ni), scale_log2, -lse2));
      }
    }
  }
  // The same with the score modifiers (ScoreMods), the forward's formula per
  // score, the mask always tested (rows past the sequence see no key).
  template <typename X, typename Coord, typename Mods>
  __device__ __forceinline__ void probs_mods(X& x, const Coord& coord, const float* lse_log2, int m0,
                                             const Mods& mods) const {
    CUTE_UNROLL
    for (int ni = 0; ni < size<1>(x); ++ni) {
      const int il = get<1>(coord(0, ni)), i = m0 + il;
      const float lse2 = lse_log2[il];
      CUTE_UNROLL
      for (int mi = 0; mi < 2; ++mi) {
        const float z = mods.score(x(mi, ni), i, mods.c0 + get<0>(coord(mi, 0)));
        x(mi, ni) = i >= lo[mi] && i < hi[mi] ? exp2f(fmaf(z, Mods::kLog2e, -lse2)) : 0.f;
      }
    }
  }
};

// The contract's score modifiers in the backward (softcap, ALiBi, and a
// non-positive scale, which the plain path's folded scale cannot take). Only
// the elementwise code differs from the plain kernel (bwd_kernel's kMods): each
// score is scaled, capped, biased as in the forward, then exp2 takes log2(e)
// (kLog2e, not p.scale_log2: the deterministic mode runs here without
// modifiers, where the host folds the scale into scale_log2).
// dS needs softcap's derivative 1 - t^2 (t = tanh(s / cap)); rather than hold t
// beside S^T, dP^T, dK and dV, it is recovered from P when dS is formed:
// log2 P = (cap t - bias) log2(e) - lse2, so t = (log2 P + lse2 + bias log2(e))
// / (cap log2(e)); where P is 0 the score does not count (dS = 0).
struct ScoreMods {
  static constexpr float kLog2e = 1.4426950408889634f;  // scores are scaled here, not in exp2
  float scale, cap, inv_cap, slope, inv_cap_log2e;
  int c0, diag_offset;  // first key of the block; key position of query row 0
  bool alibi;
  // Built where it is used, from the parameters (constant memory), so that the
  // plain path holds none of it across the loop; slope: the step's head's.
  __device__ ScoreMods(const BwdKernelParams& p, int c0_, int seqlen_q, int seqlen_k, float slope_)
      : scale(p.softmax_scale), cap(p.softcap), inv_cap(p.softcap > 0.f ? 1.f / p.softcap : 0.f), slope(slope_),
        inv_cap_log2e(p.softcap > 0.f ? 1.f / (p.softcap * kLog2e) : 0.f),
        c0(c0_), diag_offset(seqlen_k - seqlen_q), alibi(p.alibi_slopes != nullptr) {}
  __device__ __forceinline__ float bias(int i, int j) const { return slope * float(abs(i + diag_offset - j)); }
  __device__ __forceinline__ float score(float qk, int i, int j) const {
    float z = qk * scale;
    if (cap > 0.f) z = cap * tanhf(z * inv_cap);
    if (alibi) z -= bias(i, j);
    return z;
  }
  // 1 - t^2 from the probability (see above); 0 where prob is 0.
  __device__ __forceinline__ float cap_grad(float prob, float lse2, int i, int j) const {
    const float t = (log2f(prob) + lse2 + (alibi ? bias(i, j) * kLog2e : 0.f)) * inv_cap_log2e;
    return prob > 0.f ? 1.f - t * t : 0.f;
  }
  // ds *= 1 - t^2 for each score of a thread's (key, query row) tile view, with
  // prob its probabilities, lse_log2 the step's rows' LSE and m0 its first row.
  template <typename DS, typename P, typename Coord>
  __device__ __forceinline__ void apply_cap_grad(DS& ds, const P& prob, const Coord& coord, const float* lse_log2,
                                                 int m0) const {
    CUTE_UNROLL
    for (int ni = 0; ni < size<1>(ds); ++ni) {
      const int il = get<1>(coord(0, ni));
      const float lse2 = lse_log2[il];
      CUTE_UNROLL
      for (int mi = 0; mi < size<0>(ds); ++mi) ds(mi, ni) *= cap_grad(prob(mi, ni), lse2, m0 + il, c0 + get<0>(coord(mi, 0)));
    }
  }
};

}  // namespace flashattn::sm90
