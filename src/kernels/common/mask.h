// The attention mask of the contract as one object: which keys a query row sees.
// Rows and keys are aligned at the bottom right (query i sits at key i + Sk - Sq).
// Causal is window (-1, 0). Every backend uses this object, so the mask rule lives
// here and nowhere else.
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"

namespace flashattn::detail {

FA_HD int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : (x > hi ? hi : x); }

struct Mask {
  int64_t seqlen_q = 0, seqlen_k = 0;
  int64_t left = -1, right = -1;  // -1: unbounded

  FA_HD Mask(int64_t sq, int64_t sk, int64_t window_left, int64_t window_right)
      : seqlen_q(sq), seqlen_k(sk), left(window_left), right(window_right) {}

  // Key position of query row i.
  FA_HD int64_t diagonal(int64_t i) const { return i + seqlen_k - seqlen_q; }

  // Visible keys of row i are [col_begin(i), col_end(i)); both are non-decreasing
  // in i. An empty range means a fully masked row.
  FA_HD int64_t col_begin(int64_t i) const {
    return left < 0 ? 0 : clamp64(diagonal(i) - left, 0, seqlen_k);
  }
  FA_HD int64_t col_end(int64_t i) const {
    return right < 0 ? seqlen_k : clamp64(diagonal(i) + right + 1, 0, seqlen_k);
  }
  FA_HD bool visible(int64_t i, int64_t j) const { return j >= col_begin(i) && j < col_end(i); }

  // Rows that see key j are [row_begin(j), row_end(j)).
  FA_HD int64_t row_begin(int64_t j) const {
    return right < 0 ? 0 : clamp64(j - (seqlen_k - seqlen_q) - right, 0, seqlen_q);
  }
  FA_HD int64_t row_end(int64_t j) const {
    return left < 0 ? seqlen_q : clamp64(j - (seqlen_k - seqlen_q) + left + 1, 0, seqlen_q);
  }

  // Tile [r0, r1) x [c0, c1), both non-empty: every element visible?
  FA_HD bool tile_full(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    return c0 >= col_begin(r1 - 1) && c1 <= col_end(r0);
  }
};

}  // namespace flashattn::detail
