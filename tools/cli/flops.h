// Counting work the contract's way: forward FLOPs = 2 * B * Hq * visible (i, j)
// pairs * (Dqk + Dv); the backward counts 2.5x the forward.
#pragma once

#include <cstdint>

namespace facli {

// Visible keys [lo, hi) of query row i (hi <= lo: none), the contract's mask rule.
struct KeyRange {
  int64_t lo, hi;
};
KeyRange visible_keys(int64_t i, int64_t seqlen_q, int64_t seqlen_k, int64_t window_left,
                      int64_t window_right);

// Visible (i, j) pairs of one (sequence, head) under the mask: bottom-right
// aligned window (left, right), -1 unbounded, causal folded in as right <= 0.
int64_t visible_pairs(int64_t seqlen_q, int64_t seqlen_k, int64_t window_left, int64_t window_right);

double forward_flops(int64_t batch, int64_t heads_q, int64_t seqlen_q, int64_t seqlen_k,
                     int64_t dqk, int64_t dv, bool causal);

}  // namespace facli
