// Packed copies of whole heads, made once per call before the tile loops, in the
// layout the products read as their B operand (kernels.h). A tile of kPackRows
// rows of one (sequence, head) is one contiguous block, zero-padded past the
// sequence's end, so the loops never read outside a tensor, never meet its
// strides, and every work item reuses the same packed keys. Two kinds:
//   transposed (B = X^T, the k dimension is the head dim): S = Q K^T, dP = dO V^T;
//   natural    (B = X, the k dimension is the rows):       O += P V, dV += P^T dO...
// fp32 blocks are row-major ([D][64] transposed, [64][D] natural); bf16 blocks
// are VNNI panels of 16 columns with the head dim padded to a multiple of 32.
// The extra memory is one copy of each packed tensor: O(N) per head.
//
// NaN and inf: a natural pack is the second operand of a product whose A holds
// exact zeros for masked pairs (P, dS), and 0 * NaN would carry a poisoned row
// into rows that never see it. So natural packs store such elements as 0 and
// flag the tile; the loops then add back A[i][j] * x for the non-finite x and
// the nonzero A[i][j] (add_nonfinite), which reaches exactly the rows that
// see it, and leaves every other row bitwise what a clean input gives.
// Transposed packs keep NaN and inf: in S = Q K^T they must reach the scores,
// and masking then overwrites those of masked pairs.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/tile_io.h"
#include "backends/cpu/workspace.h"
#include "flashattn/numeric.h"

namespace flashattn::detail::cpu {

constexpr int64_t kPackRows = 64;  // rows per packed tile (the key and query tile)

// bf16 blocks pad their dimensions to the products' multiple; fp32 ones do not.
template <typename PT>
constexpr int64_t padded(int64_t n) {
  if constexpr (sizeof(PT) == 2) return ceil_div(n, kBf16Block) * kBf16Block;
  return n;
}

enum class PackKind { transposed, natural };

// One packed tensor: every head of every sequence, tile by tile.
template <typename PT>
struct Packed {
  Workspace buf;
  std::vector<uint8_t> finite;  // per tile: no NaN or inf among its rows
  std::vector<int64_t> tile0;   // per sequence: its first tile
  int64_t tiles = 0, heads = 0, dim = 0, tile_elems = 0;
  PackKind kind = PackKind::natural;
  int64_t segs = 1;  // row segments of padded(dim) columns: 1, or the fp16 split's 4 (K^T) / 2 (V)
  const Kernels* split_kernels = nullptr;  // the fp16 split's (segs > 1)

  // Columns stored per row.
  int64_t width() const { return padded<PT>(dim) * segs; }

  // bf16 natural packs are panel-major over a whole (sequence, head): each
  // 16-column panel holds every row of the sequence, so one product can run
  // over several consecutive tiles (P V over 128 keys).
  bool panel_major() const { return sizeof(PT) == 2 && kind == PackKind::natural; }
  // B operand's leading dimension (fp32) or panel stride (bf16) of sequence b's tiles.
  int64_t ld(int64_t b) const {
    if (panel_major()) return (tile0[b + 1] - tile0[b]) * kPackRows * 16;
    if constexpr (sizeof(PT) == 2) return width() * 16;
    return kind == PackKind::transposed ? kPackRows : dim;
  }
  int64_t index(int64_t b, int64_t h, int64_t t) const { return h * tiles + tile0[b] + t; }
  PT* base() const { return static_cast<PT*>(buf.data()); }
  // Tile t of head h of sequence b (its first panel, when panel-major). Tiles
  // t and t + 1 are consecutive in k for natural packs.
  PT* tile(int64_t b, int64_t h, int64_t t) const {
    if (panel_major()) return base() + index(b, h, 0) * tile_elems + t * kPackRows * 16;
    return base() + index(b, h, t) * tile_elems;
  }
  bool tile_finite(int64_t b, int64_t h, int64_t t) const { return finite[index(b, h, t)] != 0; }
};

template <typename PT>
inline PT to_packed(float x) {
  if constexpr (sizeof(PT) == 2) return float_to_bf16(x);
  else return x;
}

// The fp16 split forward's rows (isa.h): each element as bf16 hi and lo (lo = 0
// unless the element is finite), in segments of dp columns, zero-padded:
//   key   (K^T, 4 segments): [hi | lo | hf | lo]   hf: hi, 0 where not finite
//   query (Q, 4 segments):   [hi | hf | lo | lo]
//   value (V, 2 segments):   [hi | lo], both 0 where not finite (natural packs)
// so S = Q K^T over 4 dp columns sums qh kh + qh kl + ql kh + ql kl: every
// product exact, S as accurate as the fp32 pipeline's (the backward recomputes
// it in fp32 against this LSE, so large scores allow no less); and no inf or NaN
// meets one of the zeros a finite element's lo or the padding holds (inf * 0
// would be NaN where fp32 gives inf).
enum class SplitRow { key, query, value };
// Row segments of a pipeline (kSplit: fp16 as bf16 pairs, else 1): the `query`
// and `key` forms (Q K^T's operands), and the `value` form (natural packs, and
// the double-width accumulators of products with the pairs).
template <bool kSplit>
constexpr int64_t kSegsQk = kSplit ? 4 : 1;
template <bool kSplit>
constexpr int64_t kSegsV = kSplit ? 2 : 1;
// One fp16 row in that form, with the table's vector kernels (the split runs
// only at levels that have to_bf16_split); tmp holds dim floats.
inline void split_row(const Kernels& k, const uint16_t* x, int64_t dim, int64_t dp, SplitRow kind, uint16_t* out,
                      float* tmp) {
  k.f16_to_f32(x, dim, 1, dim, tmp, dim);  // exact
  uint16_t* hi = out;
  uint16_t* lo = out + (kind == SplitRow::query ? 2 : 1) * dp;
  k.to_bf16_split(tmp, hi, lo, dim, dp);  // zero from dim to dp; lo 0 where not finite
  const auto finite_hi = [&](uint16_t* dst) {
    for (int64_t d = 0; d < dp; ++d) dst[d] = (hi[d] & 0x7F80) == 0x7F80 ? uint16_t{0} : hi[d];
  };
  switch (kind) {
    case SplitRow::key:
      finite_hi(out + 2 * dp);
      std::memcpy(out + 3 * dp, lo, static_cast<size_t>(dp) * sizeof(uint16_t));
      break;
    case SplitRow::query:
      finite_hi(out + dp);
      std::memcpy(out + 3 * dp, lo, static_cast<size_t>(dp) * sizeof(uint16_t));
      break;
    case SplitRow::value: finite_hi(out); break;
  }
}

// Sizes the pack for the q side (queries) or k side (keys) of p (FwdParams, or
// HostFwdParams with a KV cache). Call before the parallel region; fill it with
// pack_tile from inside.
template <typename PT, typename P>
void plan_pack(Packed<PT>& pk, const P& p, bool q_side, int64_t heads, int64_t dim,
               PackKind kind, int64_t segs = 1, const Kernels* split_kernels = nullptr) {
  pk.kind = kind;
  pk.heads = heads;
  pk.dim = dim;
  pk.segs = segs;
  pk.split_kernels = split_kernels;
  pk.tile_elems = kPackRows * pk.width();
  pk.tile0.assign(static_cast<size_t>(p.batch + 1), 0);
  for (int64_t b = 0; b < p.batch; ++b) {
    const HostSeqLen sl(p, b);
    pk.tile0[b + 1] = pk.tile0[b] + ceil_div(q_side ? sl.seqlen_q : sl.seqlen_k, kPackRows);
  }
  pk.tiles = pk.tile0[p.batch];
  pk.buf.acquire(static_cast<size_t>(pk.tiles * heads * pk.tile_elems) * sizeof(PT));
  pk.finite.assign(static_cast<size_t>(std::max<int64_t>(1, pk.tiles * heads)), 1);
}

// Packs tile t of head h of sequence b; `row` is a scratch row of max(dim,
// (segs / 2 + 1) * padded(dim)) floats. Rows are read in their stored type; a bf16
// row packed as bf16 is only moved.
template <typename Elem, typename PT>
void pack_tile(Packed<PT>& pk, const HeadView& src, const HostSeqLen& sl, bool q_side, int64_t b,
               int64_t h, int64_t t, float* row) {
  using S = typename Elem::storage;
  constexpr bool kRaw = sizeof(PT) == 2 && std::is_same_v<Elem, BF16>;  // bf16 -> bf16: no conversion
  const int64_t dim = pk.dim, dp = padded<PT>(dim), width = pk.width();
  const bool split = sizeof(PT) == 2 && pk.segs > 1;
  const int64_t n_store = split ? width : dim;  // split rows come padded
  const int64_t r0 = t * kPackRows;
  const int64_t rows = std::min(kPackRows, (q_side ? sl.seqlen_q : sl.seqlen_k) - r0);
  PT* dst = pk.tile(b, h, t);
  const int64_t ld = pk.ld(b);
  // Zero only what the rows below leave: padded rows and padded columns.
  if (rows < kPackRows || n_store != width) {
    if (pk.panel_major())
      for (int64_t p0 = 0; p0 < width; p0 += 16)
        std::memset(static_cast<void*>(dst + (p0 / 16) * ld), 0, kPackRows * 16 * sizeof(PT));
    else
      std::memset(static_cast<void*>(dst), 0, static_cast<size_t>(pk.tile_elems) * sizeof(PT));
  }
  bool finite = true;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = q_side ? sl.q_row(b, src.batch_stride, src.row_stride, src.head_stride, h, r0 + r)
                               : sl.k_row(b, src.batch_stride, src.row_stride, src.head_stride, h, r0 + r);
    const S* x = static_cast<const S*>(src.base) + off;
    unsigned bad = 0;  // an OR over the row, so the loop vectorises
    for (int64_t d = 0; d < dim; ++d) bad |= finite_bits<Elem>(x[d]) ? 0u : 1u;
    const bool row_finite = bad == 0;
    finite = finite && row_finite;
    // The row in the pack's type, non-finite elements zeroed for natural packs.
    PT* conv = reinterpret_cast<PT*>(row);
    const PT* v = conv;
    if constexpr (sizeof(PT) == 2 && std::is_same_v<Elem, F16>) {
      if (split)
        split_row(*pk.split_kernels, x, dim, dp, pk.kind == PackKind::transposed ? SplitRow::key : SplitRow::value,
                  conv, row + pk.segs * dp / 2);
    }
    if (!split) {
      if constexpr (kRaw) {
        v = x;
        if (!row_finite && pk.kind == PackKind::natural) {
          for (int64_t d = 0; d < dim; ++d) conv[d] = finite_bits<Elem>(x[d]) ? x[d] : PT{};
          v = conv;
        }
      } else {
        for (int64_t d = 0; d < dim; ++d) {
          const bool ok = row_finite || pk.kind == PackKind::transposed || finite_bits<Elem>(x[d]);
          conv[d] = ok ? to_packed<PT>(Elem::to_float(x[d])) : PT{};
        }
      }
    }
    if constexpr (sizeof(PT) == 2) {
      if (pk.kind == PackKind::transposed) {  // panel r/16, pair d/2, column r%16
        PT* base = dst + (r / 16) * (width * 16) + (r % 16) * 2;
        uint32_t* pairs = reinterpret_cast<uint32_t*>(base);  // one 32-bit store per pair
        for (int64_t d = 0; d + 1 < n_store; d += 2) {
          uint32_t two;
          std::memcpy(&two, v + d, sizeof(two));
          pairs[d * 8] = two;
        }
        if (n_store % 2) base[(n_store - 1) * 16] = v[n_store - 1];
      } else {  // panel d/16, pair r/2, column d%16
        PT* base = dst + (r / 2) * 32 + (r % 2);
        for (int64_t d0 = 0; d0 < n_store; d0 += 16) {
          PT* panel = base + (d0 / 16) * ld;
          const int64_t n = std::min<int64_t>(16, n_store - d0);
          for (int64_t c = 0; c < n; ++c) panel[c * 2] = v[d0 + c];
        }
      }
    } else {
      if (pk.kind == PackKind::transposed)
        for (int64_t d = 0; d < dim; ++d) dst[d * kPackRows + r] = v[d];
      else
        std::memcpy(dst + r * dim, v, static_cast<size_t>(dim) * sizeof(float));
    }
  }
  pk.finite[pk.index(b, h, t)] = finite ? 1 : 0;
}

// An A operand: rows [row0, row0 + rows) of one head copied to dst
// ([padded(rows)][ld], row-major), zero-padded to `rows_p` rows and `ld` columns.
template <typename Elem, typename PT>
void load_a_tile(const HeadView& src, const HostSeqLen& sl, bool q_side, int64_t b, int64_t h,
                 int64_t row0, int64_t rows, int64_t rows_p, int64_t dim, int64_t ld, PT* dst,
                 float* row) {
  for (int64_t r = 0; r < rows_p; ++r) {
    PT* d = dst + r * ld;
    if (r < rows) {
      const int64_t off = q_side ? sl.q_row(b, src.batch_stride, src.row_stride, src.head_stride, h, row0 + r)
                                 : sl.k_row(b, src.batch_stride, src.row_stride, src.head_stride, h, row0 + r);
      load_row<Elem>(src.base, off, dim, row);
      for (int64_t c = 0; c < dim; ++c) d[c] = to_packed<PT>(row[c]);
      std::fill(d + dim, d + ld, PT{});
    } else {
      std::fill(d, d + ld, PT{});
    }
  }
}

// An A operand of the fp16 split's Q K^T (the forward's query tile; the
// backward's K and V tiles): rows as split_row's `query` form ([rows_p][4 dp],
// zero-padded); tmp holds dim floats.
inline void load_split_rows(const Kernels& k, const HeadView& src, const HostSeqLen& sl, bool q_side, int64_t b,
                            int64_t h, int64_t row0, int64_t rows, int64_t rows_p, int64_t dim, int64_t dp,
                            uint16_t* dst, float* tmp) {
  for (int64_t r = 0; r < rows_p; ++r) {
    uint16_t* d = dst + r * 4 * dp;
    if (r < rows) {
      const int64_t off = q_side ? sl.q_row(b, src.batch_stride, src.row_stride, src.head_stride, h, row0 + r)
                                 : sl.k_row(b, src.batch_stride, src.row_stride, src.head_stride, h, row0 + r);
      split_row(k, static_cast<const uint16_t*>(src.base) + off, dim, dp, SplitRow::query, d, tmp);
    } else {
      std::fill(d, d + 4 * dp, uint16_t{0});
    }
  }
}

// C[i][c] += A[i][j] * x[j][c] for the non-finite elements x[j][c] of rows
// [row0, row0 + rows) of one head and every i < m with A[i][j] != 0: the part of
// C += A X that a natural pack leaves out (see the top of this file).
template <typename Elem>
void add_nonfinite(const HeadView& src, const HostSeqLen& sl, bool q_side, int64_t b, int64_t h,
                   int64_t row0, int64_t rows, int64_t dim, const float* A, int64_t lda, int64_t m,
                   float* C, int64_t ldc, float* row) {
  for (int64_t j = 0; j < rows; ++j) {
    const int64_t off = q_side ? sl.q_row(b, src.batch_stride, src.row_stride, src.head_stride, h, row0 + j)
                               : sl.k_row(b, src.batch_stride, src.row_stride, src.head_stride, h, row0 + j);
    load_row<Elem>(src.base, off, dim, row);
    for (int64_t c = 0; c < dim; ++c) {
      if (row[c] - row[c] == 0.f) continue;
      for (int64_t i = 0; i < m; ++i)
        if (A[i * lda + j] != 0.f) C[i * ldc + c] += A[i * lda + j] * row[c];
    }
  }
}

// Fills the pack from inside an OpenMP parallel region (work shared, ends
// with the implied barrier).
template <typename Elem, typename PT, typename P>
void pack_all(Packed<PT>& pk, const P& p, const HeadView& src, bool q_side, float* row) {
  const int64_t max_tiles = ceil_div(q_side ? p.seqlen_q : p.seqlen_k, kPackRows);
  const int64_t work = p.batch * pk.heads * max_tiles;
#pragma omp for schedule(dynamic, 4)
  for (int64_t w = 0; w < work; ++w) {
    const int64_t t = w % max_tiles, h = w / max_tiles % pk.heads, b = w / max_tiles / pk.heads;
    if (t >= pk.tile0[b + 1] - pk.tile0[b]) continue;
    pack_tile<Elem, PT>(pk, src, HostSeqLen(p, b), q_side, b, h, t, row);
  }
}

}  // namespace flashattn::detail::cpu
