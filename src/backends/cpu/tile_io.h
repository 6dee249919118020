// Pieces shared by the CPU forward and backward: moving tiles between the
// tensors and float32 scratch, and applying the score modifiers, the mask and
// dropout to a tile of scores. Tiles are row-major with a leading dimension.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/host_rows.h"
#include "kernels/common/mask.h"
#include "kernels/common/philox.h"
#include "kernels/common/score_mod.h"
#include "backends/host_params.h"

namespace flashattn::detail::cpu {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A [B, S, H, D] / [total, H, D] tensor of one head of one sequence.
struct HeadView {
  const void* base;
  int64_t batch_stride, row_stride, head_stride;
};

// dst[r * ld + c] = scale * x[row0 + r][c] for r < rows, c < dim.
template <typename Elem>
void load_tile(const HeadView& t, const HostSeqLen& sl, bool q_side, int64_t b, int64_t h, int64_t row0,
               int64_t rows, int64_t dim, float* dst, int64_t ld, float scale = 1.f) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = q_side ? sl.q_row(b, t.batch_stride, t.row_stride, t.head_stride, h, row0 + r)
                               : sl.k_row(b, t.batch_stride, t.row_stride, t.head_stride, h, row0 + r);
    float* d = dst + r * ld;
    load_row<Elem>(t.base, off, dim, d);
    if (scale != 1.f)
      for (int64_t c = 0; c < dim; ++c) d[c] *= scale;
  }
}

// dst[c * ld + r] = x[row0 + r][c]: the tile transposed, so products over `dim`
// stream contiguous rows of it.
template <typename Elem>
void load_tile_t(const HeadView& t, const HostSeqLen& sl, bool q_side, int64_t b, int64_t h,
                 int64_t row0, int64_t rows, int64_t dim, float* dst, int64_t ld, float* tmp) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = q_side ? sl.q_row(b, t.batch_stride, t.row_stride, t.head_stride, h, row0 + r)
                               : sl.k_row(b, t.batch_stride, t.row_stride, t.head_stride, h, row0 + r);
    load_row<Elem>(t.base, off, dim, tmp);
    for (int64_t c = 0; c < dim; ++c) dst[c * ld + r] = tmp[c];
  }
}

template <typename Elem>
void store_tile(void* base, int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                const HostSeqLen& sl, bool q_side, int64_t b, int64_t h, int64_t row0, int64_t rows,
                int64_t dim, const float* src, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = q_side ? sl.q_row(b, batch_stride, row_stride, head_stride, h, row0 + r)
                               : sl.k_row(b, batch_stride, row_stride, head_stride, h, row0 + r);
    store_row<Elem>(base, off, dim, src + r * ld);
  }
}

// Everything that turns q.k into the final logits for one (sequence, head).
struct ScoreContext {
  Mask mask;
  float softcap = 0.f;
  bool alibi = false;
  float slope = 0.f;
  bool dropout = false;
  DropoutRng rng;
  int64_t b = 0, h = 0;

  ScoreContext(const FwdParams& p, const HostSeqLen& sl, int64_t b_, int64_t h_, const DropoutRng& r)
      : mask(sl.seqlen_q, sl.seqlen_k, p.window_left, p.window_right),
        softcap(p.softcap),
        alibi(p.alibi_slopes != nullptr),
        slope(alibi ? p.alibi_slopes[b_ * p.alibi_batch_stride + h_] : 0.f),
        dropout(p.dropout_p > 0.f),
        rng(r),
        b(b_),
        h(h_) {}

  // s holds scale * q.k for rows [r0, r0+nr) x keys [c0, c0+nc). Applies softcap
  // (storing tanh in `tanh_out` when given, for the backward), ALiBi, and sets
  // masked entries to -inf.
  void apply(float* s, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
             float* tanh_out) const {
    apply_lines<false>(s, ld, r0, nr, c0, nc, tanh_out);
  }

  // apply() on a transposed tile: s[j * ld + r] for keys c0 + j (j < nc) and
  // rows r0 + r (r < nr), as the backward's key-major pass holds it.
  void apply_t(float* s, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
               float* tanh_out) const {
    apply_lines<true>(s, ld, r0, nr, c0, nc, tanh_out);
  }

  // Both layouts, one contiguous line at a time: a line is one query row
  // (kKeyMajor false) or one key (true) of the tile.
  template <bool kKeyMajor>
  void apply_lines(float* s, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                   float* tanh_out) const {
    const int64_t lines = kKeyMajor ? nc : nr, len = kKeyMajor ? nr : nc;
    const bool masked = !mask.tile_full(r0, r0 + nr, c0, c0 + nc);
    const float inv = softcap > 0.f ? 1.f / softcap : 0.f;
    for (int64_t o = 0; o < lines; ++o) {
      float* x = s + o * ld;
      if (softcap > 0.f)
        for (int64_t e = 0; e < len; ++e) {
          const float t = std::tanh(x[e] * inv);
          x[e] = softcap * t;
          if (tanh_out) tanh_out[o * ld + e] = t;
        }
      if (alibi)
        for (int64_t e = 0; e < len; ++e)
          x[e] += kKeyMajor ? alibi_bias(slope, r0 + e, c0 + o, mask.seqlen_q, mask.seqlen_k)
                            : alibi_bias(slope, r0 + o, c0 + e, mask.seqlen_q, mask.seqlen_k);
      if (masked) {
        // Visible part of this line, in line coordinates.
        const int64_t lo = kKeyMajor ? mask.row_begin(c0 + o) - r0 : mask.col_begin(r0 + o) - c0;
        const int64_t hi = kKeyMajor ? mask.row_end(c0 + o) - r0 : mask.col_end(r0 + o) - c0;
        for (int64_t e = 0; e < len; ++e)
          if (e < lo || e >= hi) x[e] = kNegInf;
      }
    }
  }

  // dropout_row() on a transposed tile (x[j * ld + r]), one Philox call per
  // four keys of a row as in the row form.
  void dropout_t(float* x, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc) const {
    for (int64_t r = 0; r < nr; ++r) {
      int64_t j = 0;
      while (j < nc) {
        const int64_t col = c0 + j;
        const Philox4 w = rng.words(b, h, r0 + r, col >> 2);
        for (int64_t k = col & 3; k < 4 && j < nc; ++k, ++j)
          x[j * ld + r] = rng.keep_word(w.x[k]) ? x[j * ld + r] * rng.keep_scale : 0.f;
      }
    }
  }

  // x[j] = keep(i, c0 + j) ? x[j] / (1 - p) : 0 for one row.
  void dropout_row(float* x, int64_t i, int64_t c0, int64_t nc) const {
    int64_t j = 0;
    while (j < nc) {
      const int64_t col = c0 + j;
      const Philox4 w = rng.words(b, h, i, col >> 2);
      for (int64_t k = col & 3; k < 4 && j < nc; ++k, ++j)
        x[j] = rng.keep_word(w.x[k]) ? x[j] * rng.keep_scale : 0.f;
    }
  }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace flashattn::detail::cpu
