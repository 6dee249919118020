// Which tiles a persistent block of the Hopper forward computes, and what one
// tile covers. Every role of the block (producer, each consumer group) walks the
// same list and derives the same tile facts, so their barrier counts agree.
#pragma once

#include <cutlass/fast_math.h>

#include "kernels/common/kernel_params.h"
#include "kernels/common/mask.h"
#include "kernels/common/seqlen.h"
#include "kernels/sm90/fwd_split.h"

namespace flashattn::sm90 {

using detail::FwdKernelParams;

// Static persistent schedule: gridDim.x blocks (one per SM) walk the tile list
// in rounds; in round r a block takes tile r * gridDim.x + c. Causal-like masks
// (a right window bound) order the list heaviest first: the last query tiles,
// which see the most keys, of every head, then the next ones; each round also
// reverses the direction in which blocks take tiles (snake), so that the sums of
// work per block even out. The list runs over sections of as many heads as
// have their K and V fit in L2 together (kL2Bytes), so that the blocks of a
// round share few K/V streams (N = 128k, hd128, 16 heads: 522 -> 593 TFLOP/s
// with one head per section). Sections alternate between heaviest-first and
// lightest-first, the last one heaviest first: all heaviest first made the
// work a sawtooth that the static snake cannot balance (618 -> 499 TFLOP/s at
// hd128 N = 16k causal, 626 -> 407 at hd256); alternating, it measured +2-7% at
// hd128 causal N = 2k-16k against one list over all heads (kernel notes, v5).
// Other masks keep the query tiles of one head together (their K and V stay in
// L2). No counter to reset or read: replays in a CUDA graph as is, and needs no
// host synchronisation. Built on the host per call and passed to the kernel,
// whose roles read it from the parameter space: its divisions are
// multiply-shifts (cutlass::FastDivmod) set up there. Divided in every consumer
// warp at every tile, they were ~1M of the instructions of hd64 causal N = 512
// (integer-division sequences, ncu; kernel notes, sm90 forward v10).
// With a cut last round (fwd_split.h) the list ends with the cut tiles' pieces:
// item whole + j * parts + i is piece i of tile whole + j.
struct TileCoord {
  int m_block, h, b;
  int part = 0, parts = 1;  // a piece: part of parts (1: the whole tile)
};

// Key tiles [lo, hi) that query rows [m0, m_end) see under `mask` (m0 < m_end);
// the tiles' widths are block_n. The kernel's tiles and the host's balance model
// (fwd_sections.h) count them here alike.
template <typename Int>
__host__ __device__ __forceinline__ void visible_key_tiles(const detail::Mask& mask, Int m0, Int m_end, Int block_n,
                                                           Int& lo, Int& hi) {
  const Int c_begin = Int(mask.col_begin(m0)), c_end = Int(mask.col_end(m_end - 1));
  lo = c_begin / block_n;
  hi = c_end > c_begin ? (c_end + block_n - 1) / block_n : lo;
}

struct TileScheduler {
  static constexpr int64_t kL2Bytes = 32ll << 20;  // of the H100/H200's 50 MiB
  int num_m, heads, batch, total;
  int whole;  // items below are whole tiles; from here on, pieces (fwd_split.h)
  int parts;
  int section_heads;  // heavy first: (head, batch) pairs walked together
  int sections;
  bool heavy_first;
  // By num_m, heads, section_heads * num_m (a section's tiles), section_heads,
  // and the last section's (head, batch) pairs.
  cutlass::FastDivmod by_m, by_heads, by_section, by_section_heads, by_last_heads, by_parts;

  // split: planned for masks without a right bound only (not heavy first).
  TileScheduler(const FwdKernelParams& p, int block_m, FwdSplit split = {})
      : num_m(int((p.seqlen_q + block_m - 1) / block_m)),
        heads(int(p.heads_q)),
        batch(int(p.batch)),
        total(num_m * int(p.heads_q) * int(p.batch)),
        whole(total),
        parts(1),
        heavy_first(p.window_right >= 0) {
    if (split.on() && !heavy_first && split.whole + split.cut == total) {
      whole = split.whole;
      parts = split.parts;
      total = whole + split.pieces();
    }
    // Divisors of 0 (an empty problem: no tile is ever decoded) as 1.
    by_m = divmod(num_m);
    by_heads = divmod(heads);
    by_parts = divmod(parts);
    set_sections(pairs_fitting(p, kL2Bytes));
  }

  // (head, batch) pairs whose K and V (fp16/bf16; a GQA group shares them) fit
  // `bytes` together: at least one, at most every pair.
  int pairs_fitting(const FwdKernelParams& p, int64_t bytes) const {
    const int pairs = heads * batch;
    const int64_t kv = p.seqlen_k * (p.head_dim_qk + p.head_dim_v) * 2 * p.heads_kv / p.heads_q;
    const int64_t fit = kv > 0 ? bytes / kv : pairs;
    return int(fit < 1 ? 1 : fit > pairs ? pairs : fit);
  }

  // Heavy first: the list in sections of s (head, batch) pairs (the host's
  // choice; fwd_sections.h may narrow the constructor's for short calls).
  void set_sections(int s) {
    const int pairs = heads * batch;
    section_heads = s > pairs ? pairs : s;
    if (section_heads < 1) section_heads = 1;  // an empty problem too
    sections = (pairs + section_heads - 1) / section_heads;
    by_section = divmod(section_heads * num_m);
    by_section_heads = divmod(section_heads);
    by_last_heads = divmod(pairs - (sections - 1) * section_heads);
  }

  static cutlass::FastDivmod divmod(int d) { return cutlass::FastDivmod(d > 0 ? d : 1); }

  // Tile of round r for this block; >= total once the block is done.
  __device__ int tile(int r) const {
    const int c = heavy_first && (r & 1) ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
    return r * int(gridDim.x) + c;
  }
  __device__ bool valid(int t) const { return t < total; }

  // Item t of the list: a whole tile, or a piece of one of the last tiles.
  __device__ TileCoord decode(int t) const {
    if (t < whole) return decode_tile(t);
    int j, i;
    by_parts(j, i, t - whole);
    TileCoord c = decode_tile(whole + j);
    c.part = i;
    c.parts = parts;
    return c;
  }

  // Query tile t (of num_m * heads * batch).
  __device__ TileCoord decode_tile(int t) const {
    int bh, b, h;
    if (heavy_first) {
      // Sections of section_heads (head, batch) pairs (fewer in the last), each
      // walked one query tile row at a time across its heads.
      int section, in_section, step, pair;
      by_section(section, in_section, t);
      (section == sections - 1 ? by_last_heads : by_section_heads)(step, pair, in_section);
      bh = section * section_heads + pair;
      by_heads(b, h, bh);
      // Sections alternate direction, the last one heaviest first, so the work
      // per tile is a triangle wave (which the snake balances) ending on the
      // lightest tiles, not a sawtooth.
      const bool descending = ((sections - 1 - section) & 1) == 0;
      return {descending ? num_m - 1 - step : step, h, b, 0, 1};
    }
    int m;
    by_m(bh, m, t);
    by_heads(b, h, bh);
    return {m, h, b, 0, 1};
  }
};

// One tile: kBlockM query rows of head h in sequence b, and the key tiles
// [n_block_max - n_tiles, n_block_max) its rows see (walked from the last).
template <int kBlockM, int kBlockN>
struct FwdTile {
  int m_block, h, b;
  int seqlen_q, seqlen_k;
  int q_offset, k_offset;  // first packed row of the sequence (0 when batched); < 2^31
  int m0, m_end;
  int n_block_max, n_tiles;

  // Plain ints, few registers: the consumers keep a tile live across their
  // main loop (where index rules are needed again, detail::SeqLen is rebuilt).
  // seqused_k (a KV cache, batched; null otherwise): the keys in use, clamped into
  // [0, Sk]; masks align at their end.
  __device__ FwdTile(const FwdKernelParams& p, TileCoord c, const int32_t* seqused_k = nullptr)
      : m_block(c.m_block), h(c.h), b(c.b) {
    const detail::SeqLen sl(p, c.b);
    seqlen_q = int(sl.seqlen_q);
    seqlen_k = int(sl.seqlen_k);
    if (seqused_k != nullptr) seqlen_k = min(max(seqused_k[c.b], 0), seqlen_k);
    q_offset = int(sl.q_offset);
    k_offset = int(sl.k_offset);
    m0 = m_block * kBlockM;
    m_end = min(m0 + kBlockM, seqlen_q);
    n_block_max = n_tiles = 0;
    if (m0 >= seqlen_q) return;  // packed: a sequence shorter than the longest
    int n_block_min;
    visible_key_tiles(this->mask(p), m0, m_end, kBlockN, n_block_min, n_block_max);
    n_tiles = n_block_max - n_block_min;
    if (c.parts > 1) {  // a piece: its share of the key tiles (the plan leaves each at least two)
      const int lo = n_block_min + n_tiles * c.part / c.parts;
      n_block_max = n_block_min + n_tiles * (c.part + 1) / c.parts;
      n_tiles = n_block_max - lo;
    }
  }

  __device__ detail::Mask mask(const FwdKernelParams& p) const {
    return detail::Mask(seqlen_q, seqlen_k, p.window_left, p.window_right);
  }
  __device__ bool has_rows() const { return m0 < seqlen_q; }
  // Rows that see at least one key: the producer loads for these tiles only.
  __device__ bool has_work() const { return n_tiles > 0; }
};

}  // namespace flashattn::sm90
