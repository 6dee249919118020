// CPU forward for decoding shapes: few query rows per kv head (a token or a
// few per step against a long KV cache). The tiled forward (forward.cpp) packs
// all of K and V before its loops and runs one work item per query head; here
// that packing was 55% of a call and every kv head was read once per query
// head of its group (docs/cpu_notes.md, v11). Instead:
//   - the query rows of all heads that share a kv head are the columns of one
//     small B operand (Q^T, at most kMaxRows), so K and V are read once;
//   - scores are held transposed, S^T = K Q^T, with K read in place as the A
//     operand (its rows at their own stride: no packing); fp32 P V reads V in
//     place too; bf16 packs each V tile into VNNI pairs in cache;
//   - a work item covers several kv heads, inner per key tile: in [B, S, H, D]
//     each key row of a head is in its own page, which all the heads then share
//     (5.6 -> 11.6 GB/s of K and V read);
//   - keys are cut into splits (1024 keys, fewer for short caches) at fixed
//     positions, each a work item with its own running max, sum and output,
//     merged in split order at the end (split-KV), so a single sequence still
//     feeds every thread and the result does not depend on the thread count;
//   - V tiles are tested for NaN / inf (fp32) or packed and tested (bf16) in
//     one vectorised pass (the table's finite_f32 / bf16_vnni).
// Scores, mask, softcap and ALiBi follow the tiled forward's general path
// (scale, then ScoreContext on the transposed tile), so the two agree within
// fp32 rounding; dropout draws the same Philox bits. fp16 K and V tiles are
// widened to fp32 in cache (fp32 products, as in the tiled forward), and so are
// bf16 ones where bf16 products are absent or slow (cpu_forward_decode).
#include "backends/cpu/decode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/pack.h"
#include "backends/cpu/tile_io.h"
#include "backends/threads.h"

namespace flashattn::detail {
namespace cpu {
namespace {

constexpr int64_t kMaxRows = 64;           // query rows per kv head (columns of S^T)
constexpr int64_t kMaxRowsBesideAmx = 16;  // bf16 products beside AMX (more rows: widened)
constexpr int64_t kTileKeys = 64;          // keys per product
// Paged caches come in pages of a multiple of 64 keys (validate.cpp), so 64-aligned
// tiles never span two blocks.
static_assert(64 % kTileKeys == 0, "a paged tile must fit in one block");
// Keys per work item, at multiples of the split: 1024, halved (down to 256)
// while a call would have fewer than kMinItems items, so that short caches
// still feed every thread. A function of the shape alone: the result does not
// depend on the thread count.
constexpr int64_t kSplitKeys = 1024, kMinSplitKeys = 256, kMinItems = 64;

// One split of one (sequence, kv head): its keys and where its partial result goes.
struct Item {
  int64_t b, hk, k0, k1;  // keys [k0, k1) of sequence b, kv head hk
  int64_t part;           // first float of its partial result
};

// A work item: split s of sequence b for kv heads [hk0, hk1), the heads inner
// per key tile, so the rows of a tile (one page each in the [B, S, H, D]
// layout) serve every head of the group while they are in cache.
struct Work {
  int64_t b, s, hk0, hk1;
};

// kBf16Products: bf16 on AVX512-BF16 products; otherwise fp16 and bf16 take
// fp32 products on K and V tiles widened in cache (kWiden).
template <typename Elem, bool kBf16Products = std::is_same_v<Elem, BF16>>
struct Decode {
  static constexpr bool kBf16 = kBf16Products;
  static constexpr bool kWiden = !std::is_same_v<Elem, F32> && !kBf16;
  using Storage = typename Elem::storage;
  const HostFwdParams& p;
  const Kernels& k;  // row operations (the active level)
  const Kernels& g;  // products: AVX512-BF16 for bf16 (any M, K even), else the active level
  DropoutRng rng;
  int64_t G, dqk, dv, dv_ld, part_stride, rows_cap, heads_per_work = 1;
  std::vector<Item> items;                    // (sequence, kv head, split), splits innermost
  std::vector<int64_t> first_item, n_splits;  // per sequence
  std::vector<Work> works;
  Workspace parts_buf;  // per item: rows x (m, l, o[dv]), each written whole by its item
  float* parts = nullptr;
  int64_t split = kSplitKeys;

  Decode(const HostFwdParams& params, const Kernels& kern, const Kernels& gemm, int64_t rows)
      : p(params),
        k(kern),
        g(gemm),
        rng(p.dropout_p > 0.f ? DropoutRng::make(p.seed, p.offset, p.dropout_p) : DropoutRng{}),
        G(p.group_size()),
        dqk(p.head_dim_qk),
        dv(p.head_dim_v) {
    dv_ld = kBf16 ? (dv + 15) / 16 * 16 : dv;
    rows_cap = std::max<int64_t>(16, (rows + 15) / 16 * 16);
    part_stride = 2 + dv;
  }

  // The splits of sequence b's keys [lo, hi): at least one, so rows that see
  // no key still get their zeros and -inf written by the merge.
  int64_t splits_of(int64_t lo, int64_t hi, int64_t size) const {
    return std::max<int64_t>(1, (std::max(hi, lo + 1) - 1) / size - lo / size + 1);
  }

  void plan(int nt) {
    std::vector<int64_t> lo(static_cast<size_t>(p.batch)), hi(static_cast<size_t>(p.batch));
    for (int64_t b = 0; b < p.batch; ++b) {
      const HostSeqLen sl(p, b);
      if (sl.seqlen_q == 0) continue;
      const Mask mask(sl.seqlen_q, sl.seqlen_k, p.window_left, p.window_right);
      lo[static_cast<size_t>(b)] = mask.col_begin(0);
      hi[static_cast<size_t>(b)] = mask.col_end(sl.seqlen_q - 1);
    }
    auto count = [&](int64_t size) {
      int64_t n = 0;
      for (int64_t b = 0; b < p.batch; ++b)
        if (HostSeqLen(p, b).seqlen_q > 0) n += splits_of(lo[static_cast<size_t>(b)], hi[static_cast<size_t>(b)], size);
      return n * p.heads_kv;
    };
    while (split > kMinSplitKeys && count(split) < kMinItems) split /= 2;

    int64_t off = 0, splits = 0;
    first_item.assign(static_cast<size_t>(p.batch), 0);
    n_splits.assign(static_cast<size_t>(p.batch), 0);
    for (int64_t b = 0; b < p.batch; ++b) {
      const HostSeqLen sl(p, b);
      first_item[static_cast<size_t>(b)] = static_cast<int64_t>(items.size());
      if (sl.seqlen_q == 0) continue;
      const int64_t rows = G * sl.seqlen_q, l = lo[static_cast<size_t>(b)], h = hi[static_cast<size_t>(b)];
      const int64_t n = splits_of(l, h, split);  // the same for every kv head
      n_splits[static_cast<size_t>(b)] = n;
      splits += n;
      for (int64_t hk = 0; hk < p.heads_kv; ++hk)
        for (int64_t i = 0, s0 = l / split * split; i < n; ++i, s0 += split) {
          const int64_t k0 = std::max(s0, l), k1 = std::min(s0 + split, h);
          items.push_back({b, hk, k0, std::max(k0, k1), off});
          off += rows * part_stride;
        }
    }
    parts_buf.acquire(static_cast<size_t>(std::max<int64_t>(off, 1)) * sizeof(float));
    parts = static_cast<float*>(parts_buf.data());
    // As many kv heads per work item as still leave every thread 4 items (a
    // head's result does not depend on its group: the thread count only
    // changes which heads share a pass over the pages).
    const int64_t groups = std::clamp<int64_t>((4 * nt + std::max<int64_t>(splits, 1) - 1) / std::max<int64_t>(splits, 1), 1,
                                               p.heads_kv);
    heads_per_work = (p.heads_kv + groups - 1) / groups;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t sp = 0; sp < n_splits[static_cast<size_t>(b)]; ++sp)
        for (int64_t h0 = 0; h0 < p.heads_kv; h0 += heads_per_work)
          works.push_back({b, sp, h0, std::min(p.heads_kv, h0 + heads_per_work)});
  }

  const Item& item_of(const Work& wk, int64_t hk) const {
    return items[static_cast<size_t>(first_item[static_cast<size_t>(wk.b)] + hk * n_splits[static_cast<size_t>(wk.b)] + wk.s)];
  }

  void run() {
    const int nt = thread_count(p);
    plan(nt);
    const int64_t n = static_cast<int64_t>(works.size());
    std::vector<int64_t> first;  // first item of each (sequence, kv head)
    for (size_t i = 0; i < items.size(); ++i)
      if (i == 0 || items[i].b != items[i - 1].b || items[i].hk != items[i - 1].hk)
        first.push_back(static_cast<int64_t>(i));
    first.push_back(static_cast<int64_t>(items.size()));
    const int64_t groups = static_cast<int64_t>(first.size()) - 1;
    // One parallel region: the splits, then (after the loop's barrier) their merge.
#pragma omp parallel num_threads(nt)
    {
      Scratch w(*this);
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < n; ++i) work(works[static_cast<size_t>(i)], w);
#pragma omp for schedule(dynamic, 1)
      for (int64_t gi = 0; gi < groups; ++gi) merge(first[gi], first[gi + 1], w.row.data());
    }
  }

  // One kv head's running state in a work item: its queries (Q^T) and, per
  // query row, the running max, sum and unnormalised output.
  struct Head {
    std::vector<float> qt, o, m, l;
    std::vector<uint16_t> qt16;
    explicit Head(const Decode& d)
        : qt(kBf16 ? 0 : d.dqk * d.rows_cap),
          o(d.rows_cap * d.dv_ld),
          m(d.rows_cap),
          l(d.rows_cap),
          qt16(kBf16 ? d.dqk * d.rows_cap : 0) {}
  };

  struct Scratch {
    std::vector<Head> heads;
    std::vector<float> s, pf, m_new, alpha, tmax, row;
    std::vector<int32_t> nan;
    std::vector<uint16_t> p16, v16;
    std::vector<float> kf, vf;
    explicit Scratch(const Decode& d)
        : heads(static_cast<size_t>(d.heads_per_work), Head(d)),
          s(kTileKeys * d.rows_cap),
          pf(d.rows_cap * kTileKeys),  // bf16: P as its product used it, for non-finite V only
          m_new(d.rows_cap),
          alpha(d.rows_cap),
          tmax(d.rows_cap),
          row(std::max(d.dqk, d.dv)),
          nan(d.rows_cap),
          p16(kBf16 ? d.rows_cap * kTileKeys : 0),
          v16(kBf16 ? kTileKeys * d.dv_ld : 0),
          kf(kWiden ? kTileKeys * d.dqk : 0),
          vf(kBf16 ? 0 : kTileKeys * d.dv) {}  // fp32: V's tile with non-finite values zeroed
  };

  // Query row c of the item: head hk * G + c / sq, row c % sq of the sequence.
  void load_queries(const HostSeqLen& sl, int64_t b, int64_t hk, int64_t rows, Head& w) const {
    const int64_t sq = sl.seqlen_q;
    if constexpr (kBf16) std::fill(w.qt16.begin(), w.qt16.end(), uint16_t{0});
    for (int64_t c = 0; c < rows; ++c) {
      const int64_t off = sl.q_row(b, p.q_batch_stride, p.q_row_stride, p.q_head_stride, hk * G + c / sq, c % sq);
      const auto* src = static_cast<const Storage*>(p.q) + off;
      for (int64_t d = 0; d < dqk; ++d) {
        if constexpr (kBf16) w.qt16[static_cast<size_t>((c / 16) * dqk * 16 + (d / 2) * 32 + (c % 16) * 2 + d % 2)] = src[d];
        else w.qt[static_cast<size_t>(d * rows + c)] = Elem::to_float(src[d]);
      }
    }
  }

  void work(const Work& wk, Scratch& w) {
    const HostSeqLen sl(p, wk.b);
    const int64_t sq = sl.seqlen_q, rows = G * sq, ld = kBf16 ? (rows + 15) / 16 * 16 : rows;
    const int64_t nh = wk.hk1 - wk.hk0;
    const Item& first = item_of(wk, wk.hk0);  // every head of the work has its keys
    for (int64_t i = 0; i < nh; ++i) {
      Head& st = w.heads[static_cast<size_t>(i)];
      std::fill(st.o.begin(), st.o.end(), 0.f);
      std::fill(st.m.begin(), st.m.end(), kNegInf);
      std::fill(st.l.begin(), st.l.end(), 0.f);
      if (first.k1 > first.k0) load_queries(sl, wk.b, wk.hk0 + i, rows, st);
    }
    if (first.k1 > first.k0) {
      std::vector<ScoreContext> ctx;  // query head hk * G + gi at (hk - hk0) * G + gi
      ctx.reserve(static_cast<size_t>(nh * G));
      for (int64_t h = wk.hk0 * G; h < wk.hk1 * G; ++h) ctx.emplace_back(p, sl, wk.b, h, rng);
      const bool general = p.softcap > 0.f || p.alibi_slopes != nullptr;
      // Paged keys: tiles end at multiples of 64, so none spans two blocks (pages are
      // multiples of 64 keys); otherwise they start where the item does.
      const bool paged = p.kv.block_table != nullptr;
      for (int64_t j0 = first.k0, nk = 0; j0 < first.k1; j0 += nk) {
        nk = std::min(paged ? kTileKeys - j0 % kTileKeys : kTileKeys, first.k1 - j0);
        const bool full = ctx[0].mask.tile_full(0, sq, j0, j0 + nk);
        for (int64_t i = 0; i < nh; ++i)
          tile(sl, item_of(wk, wk.hk0 + i), j0, nk, rows, ld, general || !full, &ctx[static_cast<size_t>(i * G)], w,
               w.heads[static_cast<size_t>(i)]);
      }
    }
    for (int64_t i = 0; i < nh; ++i) {
      const Head& st = w.heads[static_cast<size_t>(i)];
      float* out = parts + item_of(wk, wk.hk0 + i).part;
      for (int64_t c = 0; c < rows; ++c) {
        float* pc = out + c * part_stride;
        pc[0] = st.m[static_cast<size_t>(c)];
        pc[1] = st.l[static_cast<size_t>(c)];
        std::memcpy(pc + 2, st.o.data() + c * dv_ld, static_cast<size_t>(dv) * sizeof(float));
      }
    }
  }

  // A 16-bit K or V tile widened to fp32 (exactly); whether it is finite.
  bool widen(const Storage* x, int64_t ldx, int64_t rows, int64_t cols, float* y, int64_t ldy) const {
    return (std::is_same_v<Elem, F16> ? k.f16_to_f32 : k.bf16_to_f32)(x, ldx, rows, cols, y, ldy);
  }

  void tile(const HostSeqLen& sl, const Item& it, int64_t j0, int64_t nk, int64_t rows, int64_t ld, bool modify,
            const ScoreContext* ctx, Scratch& w, Head& st) const {
    const int64_t sq = sl.seqlen_q;
    float* s = w.s.data();
    // S^T = K Q^T, K read in place (kWiden: widened tile by tile; NaN and inf
    // stay, as the scores must see them).
    const int64_t koff = sl.k_row(it.b, p.k_batch_stride, p.k_row_stride, p.k_head_stride, it.hk, j0);
    if constexpr (kBf16) {
      g.gemm_bf16(nk, ld, dqk, static_cast<const uint16_t*>(p.k) + koff, p.k_row_stride, st.qt16.data(), dqk * 16,
                  s, ld, false);
    } else if constexpr (kWiden) {
      widen(static_cast<const uint16_t*>(p.k) + koff, p.k_row_stride, nk, dqk, w.kf.data(), dqk);
      g.gemm_f32(nk, rows, dqk, w.kf.data(), dqk, st.qt.data(), rows, s, ld, false);
    } else {
      g.gemm_f32(nk, rows, dqk, static_cast<const float*>(p.k) + koff, p.k_row_stride, st.qt.data(), rows, s, ld,
                 false);
    }
    k.scale_row(s, nk * ld, p.softmax_scale);  // one call; columns past `rows` (bf16 padding) go unread
    if (modify)
      for (int64_t gi = 0; gi < G; ++gi) ctx[static_cast<size_t>(gi)].apply_t(s + gi * sq, ld, 0, sq, j0, nk, nullptr);

    // Online softmax down the columns (one column per query row), each loop
    // over a key row's columns so it vectorises.
    float* tmax = w.tmax.data();
    int32_t* nan = w.nan.data();
    std::fill(tmax, tmax + rows, kNegInf);
    std::fill(nan, nan + rows, 0);
    for (int64_t j = 0; j < nk; ++j) {
      const float* x = s + j * ld;
      for (int64_t c = 0; c < rows; ++c) {
        nan[c] += x[c] != x[c];
        tmax[c] = x[c] > tmax[c] ? x[c] : tmax[c];
      }
    }
    for (int64_t c = 0; c < rows; ++c) {
      const float tile_max = nan[c] ? std::numeric_limits<float>::quiet_NaN() : tmax[c];
      w.m_new[c] = (tile_max > st.m[c] || tile_max != tile_max) ? tile_max : st.m[c];
      w.alpha[c] = st.m[c];
    }
    k.exp_sub_vec(w.alpha.data(), w.m_new.data(), rows);  // exp(m_old - m_new); 0 where m_old = -inf
    float* sum = tmax;                                     // reused: the column sums
    std::fill(sum, sum + rows, 0.f);
    for (int64_t j = 0; j < nk; ++j) {
      float* x = s + j * ld;
      k.exp_sub_vec(x, w.m_new.data(), rows);
      for (int64_t c = 0; c < rows; ++c) sum[c] += x[c];
    }
    for (int64_t c = 0; c < rows; ++c) {
      if (w.m_new[c] == kNegInf) {  // nothing visible in this row yet
        for (int64_t j = 0; j < nk; ++j) s[j * ld + c] = 0.f;
      } else {
        st.l[c] = st.l[c] * w.alpha[c] + sum[c];
        st.m[c] = w.m_new[c];
        if (w.alpha[c] != 1.f) k.scale_row(st.o.data() + c * dv_ld, dv, w.alpha[c]);
      }
    }
    // Dropout acts on the probabilities after the normaliser is taken.
    if (p.dropout_p > 0.f)
      for (int64_t gi = 0; gi < G; ++gi) ctx[static_cast<size_t>(gi)].dropout_t(s + gi * sq, ld, 0, sq, j0, nk);

    // O += P V. NaN / inf in V reach only the rows that see them: the product
    // reads the tile with its non-finite elements zeroed, so every row's sum runs
    // as for a finite tile (rows that do not see them keep their bits), and those
    // elements are then added alone where P is not an exact zero (a masked key
    // times NaN would otherwise be NaN), as the tiled forward's packs do.
    const int64_t voff = sl.k_row(it.b, p.v_batch_stride, p.v_row_stride, p.v_head_stride, it.hk, j0);
    const Storage* v = static_cast<const Storage*>(p.v) + voff;
    const int64_t nk_e = nk + (nk & 1);
    bool finite;
    if constexpr (kBf16) {
      for (int64_t c = 0; c < rows; ++c)
        for (int64_t j = 0; j < nk_e; ++j)
          w.p16[static_cast<size_t>(c * kTileKeys + j)] = float_to_bf16(j < nk ? s[j * ld + c] : 0.f);
      // V's tile as VNNI pairs, panels of 16 columns (nk_e * 16 apart), zero past nk and dv.
      finite = k.bf16_vnni(v, p.v_row_stride, nk, nk_e, dv, dv_ld, w.v16.data());
      if (!finite)
        for (int64_t e = 0; e < nk_e * dv_ld; ++e)  // the tile's panels
          if (!finite_bits<BF16>(w.v16[static_cast<size_t>(e)])) w.v16[static_cast<size_t>(e)] = 0;
      g.gemm_bf16(rows, dv_ld, nk_e, w.p16.data(), kTileKeys, w.v16.data(), nk_e * 16, st.o.data(), dv_ld, true);
    } else {
      for (int64_t c = 0; c < rows; ++c)
        for (int64_t j = 0; j < nk; ++j) w.pf[static_cast<size_t>(c * kTileKeys + j)] = s[j * ld + c];
      const float* vt;  // fp32: V in place; widened: the tile in cache
      int64_t ldv;
      if constexpr (kWiden) {
        finite = widen(v, p.v_row_stride, nk, dv, w.vf.data(), dv);
        vt = w.vf.data();
        ldv = dv;
      } else {
        finite = k.finite_f32(v, p.v_row_stride, nk, dv);
        vt = v;
        ldv = p.v_row_stride;
      }
      if (!finite) {
        float* z = w.vf.data();  // zeroed copy (in place where widened)
        for (int64_t j = 0; j < nk; ++j)
          for (int64_t d = 0; d < dv; ++d) {
            const float x = vt[j * ldv + d];
            z[j * dv + d] = x - x == 0.f ? x : 0.f;
          }
        vt = z;
        ldv = dv;
      }
      g.gemm_f32(rows, dv, nk, w.pf.data(), kTileKeys, vt, ldv, st.o.data(), dv_ld, true);
    }
    if (!finite) {
      if constexpr (kBf16)
        for (size_t e = 0; e < static_cast<size_t>(rows * kTileKeys); ++e) w.pf[e] = bf16_to_float(w.p16[e]);
      const HeadView vv{p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride};
      add_nonfinite<Elem>(vv, sl, false, it.b, it.hk, j0, nk, dv, w.pf.data(), kTileKeys, rows, st.o.data(), dv_ld,
                          w.row.data());
    }
  }

  // The splits' (m, l, o) of one (sequence, kv head), items [i0, i1), merged in
  // split order; o is a scratch row of dv floats.
  void merge(int64_t i0, int64_t i1, float* o) const {
    const Item& head = items[static_cast<size_t>(i0)];
    const HostSeqLen sl(p, head.b);
    const Mask mask(sl.seqlen_q, sl.seqlen_k, p.window_left, p.window_right);
    const int64_t sq = sl.seqlen_q;
    for (int64_t c = 0; c < G * sq; ++c) {
      float mx = kNegInf;
      bool nan = false;
      for (int64_t i = i0; i < i1; ++i) {
        const float m = parts[items[static_cast<size_t>(i)].part + c * part_stride];
        if (m != m) nan = true;
        else mx = std::max(mx, m);
      }
      if (nan) mx = std::numeric_limits<float>::quiet_NaN();
      float l = 0.f;
      std::fill(o, o + dv, 0.f);
      if (mx != kNegInf)
        for (int64_t i = i0; i < i1; ++i) {
          const float* pc = parts + items[static_cast<size_t>(i)].part + c * part_stride;
          if (pc[0] == kNegInf) continue;  // this split saw nothing of the row
          const float a = std::exp(pc[0] - mx);
          l += pc[1] * a;
          for (int64_t d = 0; d < dv; ++d) o[d] += pc[2 + d] * a;
        }
      const int64_t h = head.hk * G + c / sq, r = c % sq;
      float lse = mx + std::log(l);
      // Rows that saw no key: out 0, lse -inf; a row whose visible scores
      // were all -inf (an inf input) is NaN (as in forward.cpp).
      if (l == 0.f) {
        const bool sees_keys = mask.col_begin(r) < mask.col_end(r);
        const float fill = sees_keys ? std::numeric_limits<float>::quiet_NaN() : 0.f;
        std::fill(o, o + dv, fill);
        lse = sees_keys ? fill : kNegInf;
      } else {
        const float inv = 1.f / l;
        for (int64_t d = 0; d < dv; ++d) o[d] *= inv;
      }
      if (p.lse) p.lse[sl.lse_index(p, head.b, h, r)] = lse;
      store_row<Elem>(p.out, sl.q_row(head.b, p.o_batch_stride, p.o_row_stride, p.o_head_stride, h, r), dv, o);
    }
  }
};

}  // namespace
}  // namespace cpu

bool cpu_forward_decode(const HostFwdParams& p) {
  if (p.heads_kv <= 0) return false;
  // The longest sequence's own length, not max_seqlen_q: a filled parameter
  // block (run_forward) is not validated, and the scratch holds kMaxRows.
  int64_t sq = 0;
  for (int64_t b = 0; b < p.batch; ++b) sq = std::max(sq, HostSeqLen(p, b).seqlen_q);
  const int64_t rows = p.group_size() * sq;
  if (rows > cpu::kMaxRows) return false;
  const cpu::Kernels& k = cpu::active_kernels();
  if (p.dtype == DType::f32) {
    cpu::Decode<F32>(p, k, k, rows).run();
    return true;
  }
  if (p.dtype == DType::f16) {  // fp32 products, as the tiled forward's
    cpu::Decode<F16>(p, k, k, rows).run();
    return true;
  }
  // bf16 on AVX512-BF16's products (any number of keys per tile, K read in
  // place) where that level is the best, and on AMX CPUs for the memory-bound
  // shapes, 16 rows or fewer: there vdpbf16ps runs at 0.6-0.8x fp32 FMA
  // (Sapphire Rapids, session 32), so 17-64 rows, compute-bound, take the fp32
  // form instead, K and V widened tile by tile (it ran at 0.59-1.16x the tiled
  // AMX forward's time on the host in its fp32 input form). Without bf16
  // products (avx512, portable) the fp32 form too, where the tiled forward
  // would pack all of K and V (3-4x slower; docs/cpu_notes.md, v17).
  const int isa = static_cast<int>(k.isa);
  const bool products = p.head_dim_qk % 2 == 0 && isa >= static_cast<int>(cpu::Isa::avx512_bf16) &&
                        (isa < static_cast<int>(cpu::Isa::amx) || rows <= cpu::kMaxRowsBesideAmx);
  if (products) cpu::Decode<BF16>(p, k, cpu::kernels(cpu::Isa::avx512_bf16), rows).run();
  else cpu::Decode<BF16, false>(p, k, k, rows).run();
  return true;
}

}  // namespace flashattn::detail
