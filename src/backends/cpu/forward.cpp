// CPU flash forward, FlashAttention-2 loop order: each work item is one tile of
// query rows of one (sequence, head); key/value tiles stream through it with an
// online softmax (running max m, running sum l, rescaled output). K and V are
// packed once per call (pack.h) into the layout the products read; the rest of
// the extra memory is a few tiles per thread. Tiles entirely outside the mask
// are never visited.
//
// Two pipelines share this loop, chosen by dtype and CPU (kernels/isa.h):
//   PT = float:    fp32 products (fp32 inputs always; fp16, and bf16 without
//                  AVX512-BF16, widened to fp32 when packed);
//   PT = uint16_t: bf16 products on AMX or AVX512-BF16, probabilities rounded
//                  to bf16 for P V (as every bf16 flash kernel does), fp32
//                  accumulation and softmax statistics;
//   kSplit:        fp16 on the bf16 products (isa.h, f16_split): Q, K, V as
//                  exact bf16 pairs hi + lo and P as its 16-bit pair; S = Q K^T
//                  one product over 4 head-dim segments (pack.h, split_row),
//                  exact products as in fp32; O = Ph [Vh|Vl] + Pl Vh into a
//                  double-width O summed at the end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/decode.h"
#include "backends/cpu/pack.h"
#include "backends/cpu/tile_io.h"
#include "backends/cpu/tile_ops.h"
#include "backends/threads.h"

namespace flashattn::detail {
namespace cpu {
namespace {

// Query rows per work item: the most of 256 (bf16, no mask), 128 and 64 that leaves every
// thread kItemsPerThread items, so each pass over a head's packed K and V serves
// as many rows as it can (the stream from L3 that grows with the thread count).
// The last big item per thread is cut in halves (128 or 64 rows), so the
// threads end within a small item of each other. A row's result does not depend on its item
// (every product and row operation is row by row).
constexpr int64_t kBlockQBf16 = 256;
constexpr int64_t kBlockQ = 128;
constexpr int64_t kBlockQSmall = 64;
constexpr int64_t kItemsPerThread = 8;
template <typename PT>
constexpr int64_t max_block_q() {
  return sizeof(PT) == 2 ? kBlockQBf16 : kBlockQ;
}

// One work item: rows [t0 * 64, (t0 + n) * 64) of (sequence, head) bh.
struct FwdItem {
  int64_t bh;
  int32_t t0, n;
};
// Keys per inner step: two packed tiles, so the per-row work of a step (max,
// rescale of O, call overheads) is spread over 128 keys.
constexpr int64_t kBlockK = 2 * kPackRows;
// bf16 heads of at most 64 step over 256 keys: there the per-row work of a
// step (max, rescale, calls) weighs most beside AMX products half as long.
// (fp32 measured no better.)
constexpr int64_t kBlockKNarrow = 4 * kPackRows;
template <typename PT>
int64_t block_keys(int64_t dqk_p, int64_t dv_p) {
  return sizeof(PT) == 2 && std::max(dqk_p, dv_p) <= 64 ? kBlockKNarrow : kBlockK;
}

template <typename PT, bool kSplit>
struct FwdScratch {
  // The query tile (A of S); the probabilities (A of P V; bf16 only) and, split,
  // their low halves.
  std::vector<PT> q, p, pl;
  std::vector<float> s, o, m, l, m_new, alpha, row;
  static constexpr int64_t kRows = max_block_q<PT>();
  FwdScratch(int64_t dqk, int64_t dv)
      : q(kRows * padded<PT>(dqk) * kSegsQk<kSplit>), p(sizeof(PT) == 2 ? kRows * kBlockKNarrow : 0),
        pl(kSplit ? kRows * kBlockKNarrow : 0), s(kRows * kBlockKNarrow), o(kRows * padded<PT>(dv) * kSegsV<kSplit>),
        m(kRows), l(kRows), m_new(kRows), alpha(kRows),
        row(3 * std::max(padded<PT>(dqk), padded<PT>(dv))) {}  // pack_tile's row; split: 4 dp bf16 + dp floats
};

template <typename Elem, typename PT, bool kSplit = false>
struct Forward {
  static constexpr bool kBf16 = sizeof(PT) == 2;
  static_assert(!kSplit || (kBf16 && std::is_same_v<Elem, F16>), "the split pipeline is fp16 on bf16 products");
  const HostFwdParams& p;
  const Kernels& k;
  DropoutRng rng;
  HeadView qv, kv, vv;
  Packed<PT> kt, vn;  // K transposed (B of S = Q K^T), V natural (B of P V)
  std::vector<FwdItem> items;

  Forward(const HostFwdParams& params, const Kernels& kern)
      : p(params),
        k(kern),
        rng(p.dropout_p > 0.f ? DropoutRng::make(p.seed, p.offset, p.dropout_p) : DropoutRng{}),
        qv{p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride},
        kv{p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride},
        vv{p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride} {}

  void run() {
    plan_pack(kt, p, false, p.heads_kv, p.head_dim_qk, PackKind::transposed, kSegsQk<kSplit>, &k);
    plan_pack(vn, p, false, p.heads_kv, p.head_dim_v, PackKind::natural, kSegsV<kSplit>, &k);
    const int nt = thread_count(p);
    plan_items(nt);
    const int64_t work = static_cast<int64_t>(items.size());
#pragma omp parallel num_threads(nt)
    {
      FwdScratch<PT, kSplit> w(p.head_dim_qk, p.head_dim_v);
      pack_all<Elem>(kt, p, kv, false, w.row.data());
      pack_all<Elem>(vn, p, vv, false, w.row.data());
      if (kBf16 && k.thread_begin) k.thread_begin();
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < work; ++i) {
        const FwdItem& it = items[i];
        tile(it.bh / p.heads_q, it.bh % p.heads_q, it.t0 * kBlockQSmall, it.n * kBlockQSmall, w);
      }
      if (kBf16 && k.thread_end) k.thread_end();
    }
  }

  // Items per (sequence, head), last query tiles first (under a causal mask
  // they are the longest); the last nt big items are cut in halves.
  void plan_items(int nt) {
    const int64_t bh_n = p.batch * p.heads_q;
    int64_t bq = kBlockQSmall;
    // 256 rows only without a mask: a diagonal tile's masked half grows with it.
    const bool banded = p.window_left >= 0 || p.window_right >= 0;
    for (const int64_t c : {max_block_q<PT>(), kBlockQ})
      if ((c == kBlockQ || !banded) && bh_n * ceil_div(p.seqlen_q, c) >= kItemsPerThread * nt) {
        bq = c;
        break;
      }
    const int32_t per = static_cast<int32_t>(bq / kBlockQSmall);
    const int64_t n_qt = ceil_div(p.seqlen_q, bq);
    items.clear();
    items.reserve(static_cast<size_t>(bh_n * n_qt + nt * per));
    for (int64_t bh = 0; bh < bh_n; ++bh)
      for (int64_t j = n_qt - 1; j >= 0; --j) items.push_back({bh, static_cast<int32_t>(j * per), per});
    if (per == 1) return;
    const size_t split = std::min(items.size(), static_cast<size_t>(nt));
    std::vector<FwdItem> tail(items.end() - static_cast<std::ptrdiff_t>(split), items.end());
    items.resize(items.size() - split);
    // Halves: a 64-row piece of a 256-row item would cost more per flop than
    // the finer end gains (bench/cpu/schedule_model.py).
    const int32_t piece = std::max<int32_t>(1, per / 2);
    for (const FwdItem& it : tail)
      for (int32_t j = it.n - piece; j >= 0; j -= piece) items.push_back({it.bh, it.t0 + j, piece});
  }

  void product(int64_t M, int64_t N, int64_t K, const PT* A, int64_t lda, const PT* B, int64_t ldb,
               float* C, int64_t ldc, bool acc) const {
    if constexpr (kBf16) k.gemm_bf16(M, N, K, A, lda, B, ldb, C, ldc, acc);
    else k.gemm_f32(M, N, K, A, lda, B, ldb, C, ldc, acc);
  }

  void tile(int64_t b, int64_t h, int64_t r0, int64_t block_q, FwdScratch<PT, kSplit>& w) const {
    const HostSeqLen sl(p, b);
    if (r0 >= sl.seqlen_q) return;
    const int64_t nr = std::min(block_q, sl.seqlen_q - r0), mr = padded<PT>(nr);
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v, hk = h / p.group_size();
    const int64_t dqk_p = padded<PT>(dqk), dv_p = padded<PT>(dv);
    const int64_t qk_w = dqk_p * kSegsQk<kSplit>, o_w = dv_p * kSegsV<kSplit>;  // row widths of Q and O
    const ScoreContext ctx(p, sl, b, h, rng);

    // The query tile, zero-padded to the product's shape. The scale is applied
    // to the fp32 scores, so bf16 queries are multiplied as given.
    if constexpr (kSplit) load_split_rows(k, qv, sl, true, b, h, r0, nr, mr, dqk, dqk_p, w.q.data(), w.row.data());
    else load_a_tile<Elem>(qv, sl, true, b, h, r0, nr, mr, dqk, dqk_p, w.q.data(), w.row.data());
    std::fill(w.o.begin(), w.o.begin() + mr * o_w, 0.f);
    std::fill(w.m.begin(), w.m.end(), kNegInf);
    std::fill(w.l.begin(), w.l.end(), 0.f);

    const int64_t c_begin = ctx.mask.col_begin(r0), c_end = ctx.mask.col_end(r0 + nr - 1);
    const int64_t bk = block_keys<PT>(dqk_p, dv_p);
    for (int64_t c0 = c_begin / bk * bk; c0 < c_end; c0 += bk) {
      const int64_t nc = std::min(bk, c_end - c0), nc_p = padded<PT>(nc);
      float* s = w.s.data();
      for (int64_t j = 0; j < nc; j += kPackRows)  // one product per packed tile
        product(mr, padded<PT>(std::min(kPackRows, nc - j)), qk_w, w.q.data(), qk_w,
                kt.tile(b, hk, (c0 + j) / kPackRows), kt.ld(b), s + j, bk, false);
      // Softcap and ALiBi take the general path; otherwise the scale folds into
      // the max and exp passes, masked tiles included, so a row's arithmetic
      // does not depend on which tile it shares with other rows.
      const bool plain = ctx.softcap <= 0.f && !ctx.alibi && p.softmax_scale > 0.f;
      if (!plain) {
        for (int64_t r = 0; r < nr; ++r) k.scale_row(s + r * bk, nc, p.softmax_scale);
        ctx.apply(s, bk, r0, nr, c0, nc, nullptr);
      } else if (!ctx.mask.tile_full(r0, r0 + nr, c0, c0 + nc)) {
        ctx.apply(s, bk, r0, nr, c0, nc, nullptr);  // the mask alone: -inf
      }
      const float exp_scale = plain ? p.softmax_scale : 1.f;
      for (int64_t r = 0; r < nr; ++r) {
        const float tile_max = k.row_max(s + r * bk, nc) * exp_scale;  // NaN when the row met a NaN
        w.m_new[r] = (tile_max > w.m[r] || tile_max != tile_max) ? tile_max : w.m[r];
        w.alpha[r] = w.m[r];
      }
      k.exp_sub_vec(w.alpha.data(), w.m_new.data(), nr);  // exp(m_old - m_new); 0 where m_old = -inf
      // bf16 (and the split's pair): exp, sum and rounding in one pass, unless
      // dropout must act on fp32 probabilities before they are rounded. A
      // non-finite V (add_nonfinite) takes the same pass and keeps its fp32
      // values too, so the step's P is the same bits either way.
      bool fused = false, keep = false;
      if constexpr (kBf16) {
        fused = (kSplit ? k.exp_sum_split != nullptr : k.exp_sum_bf16 != nullptr) && !ctx.dropout;
        for (int64_t j = 0; j < nc && fused && !keep; j += kPackRows) keep = !vn.tile_finite(b, hk, (c0 + j) / kPackRows);
      }
      for (int64_t r = 0; r < nr; ++r) {
        float* sr = s + r * bk;
        PT* pr = kBf16 ? w.p.data() + r * bk : nullptr;
        PT* plr = kSplit ? w.pl.data() + r * bk : nullptr;
        if (w.m_new[r] == kNegInf) {  // nothing visible in this row yet
          std::fill(sr, sr + nc, 0.f);
          if (fused) std::fill(pr, pr + nc_p, PT{});
          if (fused && kSplit) std::fill(plr, plr + nc_p, PT{});
        } else {
          const float alpha = w.alpha[r];
          float sum;
          if (!fused) sum = k.exp_sum(sr, nc, exp_scale, w.m_new[r]);
          else if constexpr (kSplit) sum = k.exp_sum_split(sr, nc, exp_scale, w.m_new[r], pr, plr, nc_p, keep);
          else sum = k.exp_sum_bf16(sr, nc, exp_scale, w.m_new[r], reinterpret_cast<uint16_t*>(pr), nc_p, keep);
          w.l[r] = w.l[r] * alpha + sum;
          w.m[r] = w.m_new[r];
          if (alpha != 1.f) k.scale_row(w.o.data() + r * o_w, kSplit ? o_w : dv, alpha);
          // Dropout acts on the probabilities after the normaliser is taken.
          if (ctx.dropout) ctx.dropout_row(sr, r0 + r, c0, nc);
        }
        if constexpr (kSplit) {
          if (!fused) k.to_bf16_split(sr, pr, plr, nc, nc_p);
        } else if constexpr (kBf16) {
          if (!fused) k.to_bf16(sr, pr, nc, nc_p);
        }
      }
      // One product over the whole step: natural packs run on across tiles.
      const PT* pa;
      if constexpr (kBf16) pa = w.p.data();
      else pa = s;
      const PT* vt = vn.tile(b, hk, c0 / kPackRows);
      product(mr, o_w, nc_p, pa, bk, vt, vn.ld(b), w.o.data(), o_w, true);  // split: Ph [Vh | Vl]
      if constexpr (kSplit) product(mr, dv_p, nc_p, w.pl.data(), bk, vt, vn.ld(b), w.o.data(), o_w, true);
      for (int64_t j = 0; j < nc; j += kPackRows) {
        const int64_t t = (c0 + j) / kPackRows, n = std::min(kPackRows, nc - j);
        // NaN/inf in V reach only the rows that see them (pack.h).
        if (!vn.tile_finite(b, hk, t))
          add_nonfinite<Elem>(vv, sl, false, b, hk, c0 + j, n, dv, s + j, bk, nr, w.o.data(), o_w,
                              w.row.data());
      }
    }

    // Rows that saw no key: out 0, lse -inf (the identity of log-sum-exp merging).
    // A row whose visible scores were all -inf (an inf input) is NaN, as exp(-inf - -inf).
    for (int64_t r = 0; r < nr; ++r) {
      float* o = w.o.data() + r * o_w;
      if constexpr (kSplit)
        for (int64_t c = 0; c < dv; ++c) o[c] += o[dv_p + c];  // Ph Vh + Pl Vh, plus Ph Vl
      float lse = w.m[r] + std::log(w.l[r]);
      if (w.l[r] == 0.f) {
        const bool sees_keys = ctx.mask.col_begin(r0 + r) < ctx.mask.col_end(r0 + r);
        const float fill = sees_keys ? std::numeric_limits<float>::quiet_NaN() : 0.f;
        std::fill(o, o + dv, fill);
        lse = sees_keys ? fill : kNegInf;
      } else {
        k.scale_row(o, dv, 1.f / w.l[r]);
      }
      if (p.lse) p.lse[sl.lse_index(p, b, h, r0 + r)] = lse;
    }
    store_tile<Elem>(p.out, p.o_batch_stride, p.o_row_stride, p.o_head_stride, sl, true, b, h, r0, nr,
                     dv, w.o.data(), o_w);
  }
};

}  // namespace
}  // namespace cpu

void cpu_forward(const HostFwdParams& p) {
  if (cpu_forward_decode(p)) return;  // few query rows per kv head (decode.h)
  const cpu::Kernels& k = cpu::active_kernels();
  with_elem(p.dtype, [&](auto e) {
    using Elem = decltype(e);
    if constexpr (std::is_same_v<Elem, F16>) {
      if (k.gemm_bf16 != nullptr && k.to_bf16_split != nullptr && cpu::f16_split(k.isa, /*backward=*/false)) {
        cpu::Forward<Elem, uint16_t, true>(p, k).run();
        return;
      }
    }
    if (std::is_same_v<Elem, BF16> && k.gemm_bf16 != nullptr)
      cpu::Forward<Elem, uint16_t>(p, k).run();
    else
      cpu::Forward<Elem, float>(p, k).run();
  });
}

}  // namespace flashattn::detail
