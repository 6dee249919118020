// The Hopper forward's last round cut over keys. The persistent forward walks its
// query tiles in rounds of one tile per block; when they do not fill the last
// round (the contract's grid at hd128: 2048 tiles on 132 SMs, 15.5 rounds, so
// half the GPU idles for the last tile's time, ~3%), or there are fewer tiles
// than SMs, the last `cut` tiles are cut over their key tiles into `parts`
// pieces each. The blocks take the pieces after the whole tiles; a piece writes
// its rows' normalised O (fp32) and LSE to scratch, and a merge kernel weighs a
// row's pieces by their LSE (fwd_merge.cuh). Only where every tile sees the same
// keys: no mask, no packed batch, no KV cache.
// Host and device code include this; it needs no CUDA header.
#pragma once

#include <cstdint>

namespace flashattn::sm90 {

constexpr int kMaxSplitParts = 16;  // the merge holds a row's weights in registers

struct FwdSplit {
  int whole = 0;  // tiles walked whole, first
  int cut = 0;    // the tiles after them, each cut into `parts` pieces
  int parts = 1;
  bool on() const { return parts > 1; }
  int pieces() const { return cut * parts; }
};

// Costs in one block's key-tile times. A piece costs its key tiles plus `piece`
// (the walk's first S and last P V, which overlap nothing, and the fp32 store);
// the merge costs its launch and the pieces' fp32 rows, written and read again (8
// bytes per row element) at DRAM speed, spread over the GPU. Priced from L2 (4
// bytes at 5 TB/s) the plan cut hd256 16k into 5 pieces (65 MB of rows, more than
// L2 holds), measured 3% slower on an H100, and k = 5 at hd128 16k, where 3 pieces
// measured as well or better (kernel notes, sm90 forward v24).
struct FwdSplitCosts {
  double piece = 1.5;              // key tiles
  double flops_per_us_sm = 4.6e6;  // dense bf16 rate of one SM in the kernel (~610 TFLOP/s / 132)
  double bytes_per_us = 3.0e6;     // the pieces' rows
  double merge_launch_us = 3.0;
};

// tiles: query tiles of the call; key_tiles: key tiles each walks; sms: blocks of
// one round. force_parts > 1 cuts into that many pieces wherever it can (tests,
// sweeps); 0 plans by the costs. No cut unless it saves at least 20% of the last
// round and 1% of the whole walk: at 10% the plan cut hd128 8k (16% of its last
// round, 1.0% of the walk), measured 0.969x twice on an H100 (eight alternating
// rounds, session 47), where 16k (25%) and hd64 2k / 4k (27% / 47%) gained.
inline FwdSplit plan_fwd_split(int64_t tiles, int64_t key_tiles, int sms, int block_m, int block_n, int head_dim,
                               int force_parts = 0, const FwdSplitCosts& c = {}) {
  FwdSplit none;
  none.whole = int(tiles);
  if (tiles <= 0 || key_tiles < 2 || sms <= 0 || tiles > (int64_t(1) << 30)) return none;
  const int64_t rest = tiles % sms == 0 && tiles >= sms ? 0 : tiles % sms;
  if (rest == 0) return none;  // the rounds are full
  if (force_parts > kMaxSplitParts) force_parts = kMaxSplitParts;
  const int64_t max_parts = force_parts > 1 ? force_parts : kMaxSplitParts;
  const double kt_us = 4.0 * block_m * block_n * head_dim / c.flops_per_us_sm;  // one key tile's time
  auto merge = [&](int64_t k) {
    return (c.merge_launch_us + double(rest * k) * block_m * head_dim * 8.0 / c.bytes_per_us) / kt_us;
  };
  const double base = double(key_tiles) + c.piece;  // the last round as it is
  double best_cost = base;
  int64_t best = 1;
  for (int64_t k = 2; k <= max_parts && 2 * k <= key_tiles; ++k) {
    const int64_t rounds = (rest * k + sms - 1) / sms;
    const double cost = double(rounds) * (double((key_tiles + k - 1) / k) + c.piece) + merge(k);
    if (force_parts > 1 ? k == force_parts : cost < 0.98 * best_cost) {  // fewer pieces unless clearly better
      best_cost = cost;
      best = k;
    }
  }
  const double all = double((tiles + sms - 1) / sms) * base;
  if (best == 1 || (force_parts <= 1 && (base - best_cost < 0.2 * base || base - best_cost < 0.01 * all)))
    return none;
  FwdSplit s;
  s.whole = int(tiles - rest);
  s.cut = int(rest);
  s.parts = int(best);
  return s;
}

}  // namespace flashattn::sm90
