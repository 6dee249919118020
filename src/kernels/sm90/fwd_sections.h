// Heavy-first section size for short calls of the Hopper forward (host side; kernel
// notes, sm90 forward v30). The scheduler walks a causal-like list in sections of
// (head, batch) pairs whose K and V fit kL2Bytes (32 MiB) together. At short
// lengths such a section spans several rounds of blocks, so a head's query tiles
// run rounds apart while the section's other K/V and every tile's Q and O pass
// through L2, and K/V come from DRAM again: ncu (session 53, H100) put the forward's
// DRAM bytes at 1.28x cuDNN's at hd128 N = 512 causal and 1.47x at 1024, at the same
// ~74% of DRAM bandwidth, and its time at 0.78x / 0.89x cuDNN's kernel. Sections of
// kL2Local bytes of K/V run a head's tiles within about one round. Smaller sections
// can unbalance the static snake (a section of 32 heads at N = 512 left the heaviest
// block 1.44x the mean in the schedule model, bench/gpu/schedule_model.py), so the
// size is the largest of kL2Local's fit, halved up to three times, whose modelled
// balance is within 1% of the constructor's; otherwise the constructor's stands.
// The model walks every tile once per candidate, so choices are cached per shape.
// Measured (session 54, H100, forward A/B six rounds, causal): N = 512 +4% / +13% /
// +6% at hd64 / 128 / 256, N = 1024 +2% / +6% / +6%; kernel DRAM reads at hd128
// 512 from 281 to 232 MB. At N = 2048 and 4096 the narrower sections were level or
// up to 2.5% slower (those calls are bound by the products), so only calls with
// seqlen_k <= 1024 narrow.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"
#include "kernels/sm90/fwd_scheduler.cuh"

namespace flashattn::sm90 {

// The heaviest block's work over the mean when `blocks` blocks walk the heavy-first
// list of `pairs` pairs in sections of `section` (TileScheduler::decode_tile's
// order, the kernel's snake over rounds); cost[m] is query tile m's work.
inline double section_imbalance(const std::vector<int>& cost, int pairs, int section, int blocks) {
  const int num_m = int(cost.size()), sections = (pairs + section - 1) / section;
  std::vector<int64_t> load(size_t(blocks), 0);
  int64_t sum = 0;
  for (int t = 0; t < num_m * pairs; ++t) {
    const int s = t / (section * num_m), rest = t % (section * num_m);
    const int step = rest / std::min(section, pairs - s * section);
    const int m = ((sections - 1 - s) & 1) == 0 ? num_m - 1 - step : step;
    const int r = t / blocks, c = t % blocks;
    load[size_t((r & 1) ? blocks - 1 - c : c)] += cost[size_t(m)];
    sum += cost[size_t(m)];
  }
  const int64_t heaviest = *std::max_element(load.begin(), load.end());
  return sum > 0 ? double(heaviest) * blocks / double(sum) : 1.0;
}

// Narrows sched's sections for a short batched heavy-first call (see above).
inline void fit_sections(TileScheduler& sched, const FwdKernelParams& p, int blocks, int block_m, int block_n) {
  constexpr int64_t kL2Local = 8ll << 20;
  constexpr int64_t kMaxKeys = 1024;   // longer calls are bound by the products, not DRAM
                                       // (session 54 A/B: N = 2048 / 4096 level or lower)
  constexpr int kMaxTiles = 1 << 14;   // the model's host work: a few candidates over
                                       // at most this many tiles, once per shape
  if (!sched.heavy_first || sched.whole != sched.total || p.is_varlen() || p.seqlen_k > kMaxKeys ||
      sched.total > kMaxTiles || blocks < 2)
    return;
  const int pairs = sched.heads * sched.batch;
  const int local = sched.pairs_fitting(p, kL2Local);
  if (local >= sched.section_heads) return;
  // Everything the choice depends on: the candidates (local), the balance's inputs.
  using Key = std::tuple<int, int, int, int, int, int64_t, int64_t, int64_t, int64_t, int, int>;
  const Key key{local, sched.num_m, pairs, sched.section_heads, blocks, p.seqlen_q, p.seqlen_k,
                p.window_left, p.window_right, block_m, block_n};
  static std::mutex mutex;
  static std::map<Key, int> chosen;
  int cached = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = chosen.find(key); it != chosen.end()) cached = it->second;
  }
  if (cached > 0) {
    sched.set_sections(cached);
    return;
  }
  // Query tile m's work: its key tiles (as FwdTile counts them) and one for its
  // fixed cost (Q, epilogue).
  const detail::Mask mask(p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
  std::vector<int> cost(size_t(sched.num_m));
  for (int m = 0; m < sched.num_m; ++m) {
    const int64_t m0 = int64_t(m) * block_m, m_end = std::min<int64_t>(m0 + block_m, p.seqlen_q);
    int64_t lo, hi;
    visible_key_tiles(mask, m0, m_end, int64_t(block_n), lo, hi);
    cost[size_t(m)] = int(hi - lo) + 1;
  }
  const double base = section_imbalance(cost, pairs, sched.section_heads, blocks);
  int pick = sched.section_heads;
  // Four candidates at most (local, its half, quarter, eighth): past those the
  // sections are far below what L2 holds.
  for (int s = local, tries = 0; s >= 1 && tries < 4; s /= 2, ++tries)
    if (section_imbalance(cost, pairs, s, blocks) <= base + 0.01) {
      pick = s;
      break;
    }
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (chosen.size() >= 1024) chosen.clear();  // a bound on memory; refilled as shapes recur
    chosen.emplace(key, pick);
  }
  sched.set_sections(pick);
}

}  // namespace flashattn::sm90
