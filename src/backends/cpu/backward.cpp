// CPU flash backward. The probabilities are recomputed from the saved LSE, never
// stored. Three passes, each writing every output element from exactly one work
// item, so the result is bitwise reproducible for any thread count (the
// `deterministic` flag costs nothing here):
//   0. d_i = dO_i . O_i for every query row (fp32, O(Sq) per head);
//   1. per (sequence, kv head, key tile): dV and dK, summed over the query heads
//      of the group and over the visible query tiles. This pass holds its tiles
//      transposed (keys x queries): S^T = K Q^T and dP^T = V dO^T, so P^T and dS^T
//      come out in the row-major layout dV += P^T dO and dK += dS^T Q read as A,
//      and the per-query statistics (lse, d) become vectors along each row;
//   2. per (sequence, query head, query tile): dQ += dS K over the visible key tiles.
// Pass 2 recomputes S and dP once more: 7 tile products instead of 5, in
// exchange for no atomics and no O(N) dq scratch per thread. Every B operand is
// packed once per call (pack.h); the two pipelines (fp32, bf16) are the
// forward's (forward.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/pack.h"
#include "backends/cpu/tile_io.h"
#include "backends/cpu/tile_ops.h"
#include "backends/threads.h"

namespace flashattn::detail {
namespace cpu {
namespace {

constexpr int64_t kBlockQ = kPackRows;  // query rows per tile (one packed tile)
constexpr int64_t kBlockK = kPackRows;  // keys per tile
constexpr int64_t kLd = 64;             // leading dimension of the score tiles
static_assert(kBlockQ <= kLd && kBlockK <= kLd);

// Row index into the per-row vector d (same layout as a contiguous LSE).
inline int64_t row_slot(const FwdParams& p, const SeqLen& sl, int64_t b, int64_t h, int64_t i) {
  return p.is_varlen() ? h * p.total_q + sl.q_offset + i : (b * p.heads_q + h) * p.seqlen_q + i;
}

template <typename PT>
struct BwdScratch {
  std::vector<PT> a1, a2;  // A operands: K and V (pass 1), Q and dO (pass 2)
  std::vector<PT> pa, da;  // P and dS rounded to bf16 (bf16 pipeline only)
  std::vector<float> s, dp, tanh, acc1, acc2, lse, d, row, f;  // f: an fp32 tile of dO (pass 0)
  BwdScratch(int64_t dqk, int64_t dv)
      : a1(kLd * padded<PT>(dqk)), a2(kLd * padded<PT>(dv)),
        pa(sizeof(PT) == 2 ? kLd * kLd : 0), da(sizeof(PT) == 2 ? kLd * kLd : 0),
        s(kLd * kLd), dp(kLd * kLd), tanh(kLd * kLd), acc1(kLd * padded<PT>(dqk)),
        acc2(kLd * padded<PT>(dv)), lse(kLd), d(kLd), row(std::max(dqk, dv)),
        f(kLd * std::max(dqk, dv)) {}
};

template <typename Elem, typename PT>
struct Backward {
  static constexpr bool kBf16 = sizeof(PT) == 2;
  const BwdParams& p;
  const Kernels& k;
  DropoutRng rng;
  std::vector<float> dvec;
  HeadView qv, kv, vv, ov, dov;
  // B operands: Q and dO both ways (pass 1), K and V transposed and K natural (pass 2).
  Packed<PT> q_t, do_t, q_n, do_n, k_t, v_t, k_n;

  Backward(const BwdParams& params, const Kernels& kern)
      : p(params),
        k(kern),
        rng(p.dropout_p > 0.f ? DropoutRng::make(p.seed, p.offset, p.dropout_p) : DropoutRng{}),
        qv{p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride},
        kv{p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride},
        vv{p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride},
        ov{p.out, p.o_batch_stride, p.o_row_stride, p.o_head_stride},
        dov{p.dout, p.do_batch_stride, p.do_row_stride, p.do_head_stride} {}

  void run() {
    const int64_t rows = p.is_varlen() ? p.total_q : p.batch * p.seqlen_q;
    dvec.assign(static_cast<size_t>(p.heads_q * rows), 0.f);
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v, hq = p.heads_q, hkv = p.heads_kv;
    plan_pack(q_t, p, true, hq, dqk, PackKind::transposed);
    plan_pack(do_t, p, true, hq, dv, PackKind::transposed);
    plan_pack(q_n, p, true, hq, dqk, PackKind::natural);
    plan_pack(do_n, p, true, hq, dv, PackKind::natural);
    plan_pack(k_t, p, false, hkv, dqk, PackKind::transposed);
    plan_pack(v_t, p, false, hkv, dv, PackKind::transposed);
    plan_pack(k_n, p, false, hkv, dqk, PackKind::natural);
    const int64_t n_qt = ceil_div(p.seqlen_q, kBlockQ), n_kt = ceil_div(p.seqlen_k, kBlockK);
#pragma omp parallel num_threads(thread_count(p))
    {
      BwdScratch<PT> w(dqk, dv);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < p.batch * hq * n_qt; ++t)
        row_dots(t / n_qt / hq, t / n_qt % hq, t % n_qt, w);
      pack_all<Elem>(q_t, p, qv, true, w.row.data());
      pack_all<Elem>(do_t, p, dov, true, w.row.data());
      pack_all<Elem>(q_n, p, qv, true, w.row.data());
      pack_all<Elem>(do_n, p, dov, true, w.row.data());
      pack_all<Elem>(k_t, p, kv, false, w.row.data());
      pack_all<Elem>(v_t, p, vv, false, w.row.data());
      pack_all<Elem>(k_n, p, kv, false, w.row.data());
      if (kBf16 && k.thread_begin) k.thread_begin();
      // Under a causal mask the first key tiles and the last query tiles are
      // the longest: those go first.
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < p.batch * hkv * n_kt; ++t)
        dkdv_tile(t / n_kt / hkv, t / n_kt % hkv, t % n_kt, w);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < p.batch * hq * n_qt; ++t)
        dq_tile(t / n_qt / hq, t / n_qt % hq, n_qt - 1 - t % n_qt, w);
      if (kBf16 && k.thread_end) k.thread_end();
    }
  }

  void product(int64_t M, int64_t N, int64_t K, const PT* A, int64_t lda, const PT* B, int64_t ldb,
               float* C, int64_t ldc, bool acc) const {
    if constexpr (kBf16) k.gemm_bf16(M, N, K, A, lda, B, ldb, C, ldc, acc);
    else k.gemm_f32(M, N, K, A, lda, B, ldb, C, ldc, acc);
  }

  // The A operand of a probability-like tile (rows x cols of x, ld kLd): x itself
  // in fp32, its bf16 rounding (columns zero-padded to cols_p) otherwise.
  const PT* as_operand(float* x, PT* buf, int64_t rows, int64_t cols, int64_t cols_p) const {
    if constexpr (kBf16) {
      for (int64_t r = 0; r < rows; ++r) k.to_bf16(x + r * kLd, buf + r * kLd, cols, cols_p);
      return buf;
    } else {
      (void)buf, (void)rows, (void)cols, (void)cols_p;
      return x;
    }
  }

  // Loads lse and d for rows [r0, r0+nr). A row that saw no key has lse = -inf;
  // +inf makes every p of it exp(-inf) = 0 instead of exp(-inf - -inf) = NaN.
  void load_row_stats(const SeqLen& sl, int64_t b, int64_t h, int64_t r0, int64_t nr,
                      BwdScratch<PT>& w) const {
    for (int64_t r = 0; r < nr; ++r) {
      const float l = p.lse[sl.lse_index(p, b, h, r0 + r)];
      w.lse[r] = l == kNegInf ? -kNegInf : l;
      w.d[r] = dvec[row_slot(p, sl, b, h, r0 + r)];
    }
  }

  // Pass 0: d_i = dO_i . O_i.
  void row_dots(int64_t b, int64_t h, int64_t qt, BwdScratch<PT>& w) {
    const SeqLen sl(p, b);
    const int64_t r0 = qt * kBlockQ;
    if (r0 >= sl.seqlen_q) return;
    const int64_t nr = std::min(kBlockQ, sl.seqlen_q - r0), dv = p.head_dim_v;
    load_tile<Elem>(dov, sl, true, b, h, r0, nr, dv, w.f.data(), dv);
    for (int64_t r = 0; r < nr; ++r) {
      load_row<Elem>(p.out, sl.q_row(b, p.o_batch_stride, p.o_row_stride, p.o_head_stride, h, r0 + r),
                     dv, w.row.data());
      dvec[row_slot(p, sl, b, h, r0 + r)] = k.dot(w.f.data() + r * dv, w.row.data(), dv);
    }
  }

  // Pass 1: dK, dV of keys [c0, c0+nc) of kv head hk.
  void dkdv_tile(int64_t b, int64_t hk, int64_t kt, BwdScratch<PT>& w) const {
    const SeqLen sl(p, b);
    const int64_t c0 = kt * kBlockK;
    if (c0 >= sl.seqlen_k) return;
    const int64_t nc = std::min(kBlockK, sl.seqlen_k - c0), mc = padded<PT>(nc);
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
    const int64_t dqk_p = padded<PT>(dqk), dv_p = padded<PT>(dv);
    float* dk = w.acc1.data();
    float* dvv = w.acc2.data();
    std::fill(dk, dk + mc * dqk_p, 0.f);
    std::fill(dvv, dvv + mc * dv_p, 0.f);
    load_a_tile<Elem>(kv, sl, false, b, hk, c0, nc, mc, dqk, dqk_p, w.a1.data(), w.row.data());
    load_a_tile<Elem>(vv, sl, false, b, hk, c0, nc, mc, dv, dv_p, w.a2.data(), w.row.data());
    const Mask mask(sl.seqlen_q, sl.seqlen_k, p.window_left, p.window_right);
    const int64_t r_begin = mask.row_begin(c0), r_end = mask.row_end(c0 + nc - 1);
    float* st = w.s.data();
    float* dpt = w.dp.data();
    for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
      const ScoreContext ctx(p, sl, b, h, rng);
      for (int64_t qt = r_begin / kBlockQ; qt * kBlockQ < r_end; ++qt) {
        const int64_t r0 = qt * kBlockQ, nr = std::min(kBlockQ, r_end - r0), nr_p = padded<PT>(nr);
        load_row_stats(sl, b, h, r0, nr, w);
        product(mc, nr_p, dqk_p, w.a1.data(), dqk_p, q_t.tile(b, h, qt), q_t.ld(), st, kLd, false);
        product(mc, nr_p, dv_p, w.a2.data(), dv_p, do_t.tile(b, h, qt), do_t.ld(), dpt, kLd, false);
        // P^T and dS^T (times the softmax scale), row j holding key c0 + j.
        for (int64_t j = 0; j < nc; ++j) k.scale_row(st + j * kLd, nr, p.softmax_scale);
        float* tanh_buf = ctx.softcap > 0.f ? w.tanh.data() : nullptr;
        if (ctx.softcap > 0.f || ctx.alibi || !mask.tile_full(r0, r0 + nr, c0, c0 + nc))
          ctx.apply_t(st, kLd, r0, nr, c0, nc, tanh_buf);
        for (int64_t j = 0; j < nc; ++j) k.exp_sub_vec(st + j * kLd, w.lse.data(), nr);
        if (ctx.dropout) ctx.dropout_t(dpt, kLd, r0, nr, c0, nc);  // dP through the multiplier
        for (int64_t j = 0; j < nc; ++j)
          k.softmax_grad_vec(st + j * kLd, dpt + j * kLd, w.d.data(), nr, p.softmax_scale);
        if (ctx.dropout) ctx.dropout_t(st, kLd, r0, nr, c0, nc);  // the same multiplier on P, for dV
        if (tanh_buf)
          for (int64_t j = 0; j < nc; ++j)
            for (int64_t r = 0; r < nr; ++r) dpt[j * kLd + r] *= 1.f - tanh_buf[j * kLd + r] * tanh_buf[j * kLd + r];
        // dV += P^T dO, dK += dS^T Q; NaN/inf in dO or Q reach only the keys
        // their rows see (pack.h).
        product(mc, dv_p, nr_p, as_operand(st, w.pa.data(), nc, nr, nr_p), kLd, do_n.tile(b, h, qt),
                do_n.ld(), dvv, dv_p, true);
        if (!do_n.tile_finite(b, h, qt))
          add_nonfinite<Elem>(dov, sl, true, b, h, r0, nr, dv, st, kLd, nc, dvv, dv_p, w.row.data());
        product(mc, dqk_p, nr_p, as_operand(dpt, w.da.data(), nc, nr, nr_p), kLd, q_n.tile(b, h, qt),
                q_n.ld(), dk, dqk_p, true);
        if (!q_n.tile_finite(b, h, qt))
          add_nonfinite<Elem>(qv, sl, true, b, h, r0, nr, dqk, dpt, kLd, nc, dk, dqk_p, w.row.data());
      }
    }
    store_tile<Elem>(p.dk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, sl, false, b, hk,
                     c0, nc, dqk, dk, dqk_p);
    store_tile<Elem>(p.dv, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, sl, false, b, hk,
                     c0, nc, dv, dvv, dv_p);
  }

  // Pass 2: dQ of query rows [r0, r0+nr) of head h.
  void dq_tile(int64_t b, int64_t h, int64_t qt, BwdScratch<PT>& w) const {
    const SeqLen sl(p, b);
    const int64_t r0 = qt * kBlockQ;
    if (r0 >= sl.seqlen_q) return;
    const int64_t nr = std::min(kBlockQ, sl.seqlen_q - r0), mr = padded<PT>(nr);
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v, hk = h / p.group_size();
    const int64_t dqk_p = padded<PT>(dqk), dv_p = padded<PT>(dv);
    const ScoreContext ctx(p, sl, b, h, rng);
    float* dq = w.acc1.data();
    std::fill(dq, dq + mr * dqk_p, 0.f);
    load_a_tile<Elem>(qv, sl, true, b, h, r0, nr, mr, dqk, dqk_p, w.a1.data(), w.row.data());
    load_a_tile<Elem>(dov, sl, true, b, h, r0, nr, mr, dv, dv_p, w.a2.data(), w.row.data());
    load_row_stats(sl, b, h, r0, nr, w);
    float* s = w.s.data();
    float* dp = w.dp.data();
    const int64_t c_begin = ctx.mask.col_begin(r0), c_end = ctx.mask.col_end(r0 + nr - 1);
    for (int64_t t = c_begin / kBlockK; t * kBlockK < c_end; ++t) {
      const int64_t c0 = t * kBlockK, nc = std::min(kBlockK, c_end - c0), nc_p = padded<PT>(nc);
      product(mr, nc_p, dqk_p, w.a1.data(), dqk_p, k_t.tile(b, hk, t), k_t.ld(), s, kLd, false);
      product(mr, nc_p, dv_p, w.a2.data(), dv_p, v_t.tile(b, hk, t), v_t.ld(), dp, kLd, false);
      for (int64_t r = 0; r < nr; ++r) k.scale_row(s + r * kLd, nc, p.softmax_scale);
      float* tanh_buf = ctx.softcap > 0.f ? w.tanh.data() : nullptr;
      if (ctx.softcap > 0.f || ctx.alibi || !ctx.mask.tile_full(r0, r0 + nr, c0, c0 + nc))
        ctx.apply(s, kLd, r0, nr, c0, nc, tanh_buf);
      for (int64_t r = 0; r < nr; ++r) {
        float* sr = s + r * kLd;
        float* dpr = dp + r * kLd;
        k.exp_sum(sr, nc, 1.f, w.lse[r]);  // p = exp(s - lse); masked entries are 0
        if (ctx.dropout) ctx.dropout_row(dpr, r0 + r, c0, nc);
        k.softmax_grad_row(sr, dpr, nc, w.d[r], p.softmax_scale);
        if (tanh_buf) {
          const float* tr = tanh_buf + r * kLd;
          for (int64_t j = 0; j < nc; ++j) dpr[j] *= 1.f - tr[j] * tr[j];
        }
      }
      product(mr, dqk_p, nc_p, as_operand(dp, w.da.data(), nr, nc, nc_p), kLd, k_n.tile(b, hk, t),
              k_n.ld(), dq, dqk_p, true);
      if (!k_n.tile_finite(b, hk, t))
        add_nonfinite<Elem>(kv, sl, false, b, hk, c0, nc, dqk, dp, kLd, nr, dq, dqk_p, w.row.data());
    }
    store_tile<Elem>(p.dq, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, sl, true, b, h, r0,
                     nr, dqk, dq, dqk_p);
  }
};

}  // namespace
}  // namespace cpu

void cpu_backward(const BwdParams& p) {
  const cpu::Kernels& k = cpu::active_kernels();
  with_elem(p.dtype, [&](auto e) {
    using Elem = decltype(e);
    if (std::is_same_v<Elem, BF16> && k.gemm_bf16 != nullptr)
      cpu::Backward<Elem, uint16_t>(p, k).run();
    else
      cpu::Backward<Elem, float>(p, k).run();
  });
}

}  // namespace flashattn::detail
