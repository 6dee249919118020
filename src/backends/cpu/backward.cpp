// CPU flash backward. The probabilities are recomputed from the saved LSE, never
// stored. Two passes, each writing every output element from exactly one work
// item, so the result is bitwise reproducible for any thread count (the
// `deterministic` flag costs nothing here):
//   0. d_i = dO_i . O_i for every query row (fp32, O(Sq) per head);
//   1. per (sequence, kv head, key tile): dV and dK, summed over the query heads
//      of the group and over the visible query tiles;
//   2. per (sequence, query head, query tile): dQ over the visible key tiles.
// Pass 2 recomputes S and dP once more: 7 tile products instead of 5, in
// exchange for no atomics and no O(N) dq scratch per thread.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/tile_io.h"
#include "backends/cpu/tile_ops.h"
#include "backends/threads.h"

namespace flashattn::detail {
namespace cpu {
namespace {

constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 64;

// Row index into the per-row vector d (same layout as a contiguous LSE).
inline int64_t row_slot(const FwdParams& p, const SeqLen& sl, int64_t b, int64_t h, int64_t i) {
  return p.is_varlen() ? h * p.total_q + sl.q_offset + i : (b * p.heads_q + h) * p.seqlen_q + i;
}

struct BwdScratch {
  std::vector<float> q, kt, vt, k, dout, s, dp, tanh, lse, d, acc1, acc2, tmp;
  BwdScratch(int64_t dqk, int64_t dv, int64_t acc_rows)
      : q(kBlockQ * dqk), kt(dqk * kBlockK), vt(dv * kBlockK), k(kBlockK * dqk),
        dout(kBlockQ * dv), s(kBlockQ * kBlockK), dp(kBlockQ * kBlockK),
        tanh(kBlockQ * kBlockK), lse(kBlockQ), d(kBlockQ), acc1(acc_rows * std::max(dqk, dv)),
        acc2(acc_rows * dv), tmp(std::max(dqk, dv)) {}
};

// For a tile of nr query rows x nc keys whose S = scale q.k and dP = dO.v are in
// w.s / w.dp: leaves the dropped-out probabilities in w.s and
// dS * scale (the gradient w.r.t. q.k) in w.dp.
inline void tile_grad(const ScoreContext& ctx, float scale, int64_t r0, int64_t nr, int64_t c0,
                      int64_t nc, BwdScratch& w) {
  float* tanh_buf = ctx.softcap > 0.f ? w.tanh.data() : nullptr;
  ctx.apply(w.s.data(), kBlockK, r0, nr, c0, nc, tanh_buf);
  for (int64_t r = 0; r < nr; ++r) {
    float* s = w.s.data() + r * kBlockK;
    float* dp = w.dp.data() + r * kBlockK;
    exp_sub_sum(s, nc, w.lse[r]);  // p = exp(s - lse); masked entries are 0
    if (ctx.dropout) {
      ctx.dropout_row(dp, r0 + r, c0, nc);  // dP through the dropout multiplier
      softmax_grad_row(s, dp, nc, w.d[r], scale);
      ctx.dropout_row(s, r0 + r, c0, nc);  // the same multiplier on p, for dV
    } else {
      softmax_grad_row(s, dp, nc, w.d[r], scale);
    }
    if (tanh_buf) {
      const float* t = tanh_buf + r * kBlockK;
      for (int64_t j = 0; j < nc; ++j) dp[j] *= 1.f - t[j] * t[j];
    }
  }
}

// Loads lse and d for rows [r0, r0+nr). A row that saw no key has lse = -inf;
// +inf makes every p of it exp(-inf) = 0 instead of exp(-inf - -inf) = NaN.
inline void load_row_stats(const BwdParams& p, const std::vector<float>& dvec, const SeqLen& sl,
                           int64_t b, int64_t h, int64_t r0, int64_t nr, BwdScratch& w) {
  for (int64_t r = 0; r < nr; ++r) {
    const float l = p.lse[sl.lse_index(p, b, h, r0 + r)];
    w.lse[r] = l == kNegInf ? -kNegInf : l;
    w.d[r] = dvec[row_slot(p, sl, b, h, r0 + r)];
  }
}

template <typename Elem>
struct Backward {
  const BwdParams& p;
  DropoutRng rng;
  std::vector<float> dvec;
  HeadView qv, kv, vv, ov, dov;

  explicit Backward(const BwdParams& params)
      : p(params),
        rng(p.dropout_p > 0.f ? DropoutRng::make(p.seed, p.offset, p.dropout_p) : DropoutRng{}),
        qv{p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride},
        kv{p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride},
        vv{p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride},
        ov{p.out, p.o_batch_stride, p.o_row_stride, p.o_head_stride},
        dov{p.dout, p.do_batch_stride, p.do_row_stride, p.do_head_stride} {}

  void run() {
    const int64_t rows = p.is_varlen() ? p.total_q : p.batch * p.seqlen_q;
    dvec.assign(static_cast<size_t>(p.heads_q * rows), 0.f);
    const int nt = thread_count(p);
    const int64_t n_qt = ceil_div(p.seqlen_q, kBlockQ), n_kt = ceil_div(p.seqlen_k, kBlockK);
#pragma omp parallel num_threads(nt)
    {
      BwdScratch w(p.head_dim_qk, p.head_dim_v, std::max(kBlockQ, kBlockK));
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < p.batch * p.heads_q * n_qt; ++t)
        row_dots(t / n_qt / p.heads_q, t / n_qt % p.heads_q, t % n_qt, w);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < p.batch * p.heads_kv * n_kt; ++t)
        dkdv_tile(t / n_kt / p.heads_kv, t / n_kt % p.heads_kv, t % n_kt, w);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < p.batch * p.heads_q * n_qt; ++t)
        dq_tile(t / n_qt / p.heads_q, t / n_qt % p.heads_q, n_qt - 1 - t % n_qt, w);
    }
  }

  // Pass 0: d_i = dO_i . O_i.
  void row_dots(int64_t b, int64_t h, int64_t qt, BwdScratch& w) {
    const SeqLen sl(p, b);
    const int64_t r0 = qt * kBlockQ;
    if (r0 >= sl.seqlen_q) return;
    const int64_t nr = std::min(kBlockQ, sl.seqlen_q - r0), dv = p.head_dim_v;
    load_tile<Elem>(dov, sl, true, b, h, r0, nr, dv, w.dout.data(), dv);
    load_tile<Elem>(ov, sl, true, b, h, r0, nr, dv, w.acc2.data(), dv);
    for (int64_t r = 0; r < nr; ++r)
      dvec[row_slot(p, sl, b, h, r0 + r)] = dot(w.dout.data() + r * dv, w.acc2.data() + r * dv, dv);
  }

  // Pass 1: dK, dV of keys [c0, c0+nc) of kv head hk.
  void dkdv_tile(int64_t b, int64_t hk, int64_t kt, BwdScratch& w) {
    const SeqLen sl(p, b);
    const int64_t c0 = kt * kBlockK;
    if (c0 >= sl.seqlen_k) return;
    const int64_t nc = std::min(kBlockK, sl.seqlen_k - c0);
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
    float* dk = w.acc1.data();
    float* dvv = w.acc2.data();
    std::fill(dk, dk + nc * dqk, 0.f);
    std::fill(dvv, dvv + nc * dv, 0.f);
    load_tile_t<Elem>(kv, sl, false, b, hk, c0, nc, dqk, w.kt.data(), kBlockK, w.tmp.data());
    load_tile_t<Elem>(vv, sl, false, b, hk, c0, nc, dv, w.vt.data(), kBlockK, w.tmp.data());
    const Mask mask(sl.seqlen_q, sl.seqlen_k, p.window_left, p.window_right);
    const int64_t r_begin = mask.row_begin(c0), r_end = mask.row_end(c0 + nc - 1);
    for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
      const ScoreContext ctx(p, sl, b, h, rng);
      for (int64_t r0 = r_begin; r0 < r_end; r0 += kBlockQ) {
        const int64_t nr = std::min(kBlockQ, r_end - r0);
        load_tile<Elem>(qv, sl, true, b, h, r0, nr, dqk, w.q.data(), dqk);
        load_tile<Elem>(dov, sl, true, b, h, r0, nr, dv, w.dout.data(), dv);
        load_row_stats(p, dvec, sl, b, h, r0, nr, w);
        const bool q_finite = all_finite(w.q.data(), nr * dqk);
        const bool dout_finite = all_finite(w.dout.data(), nr * dv);
        gemm_nn(nr, nc, dqk, w.q.data(), dqk, w.kt.data(), kBlockK, w.s.data(), kBlockK, false);
        scale_tile(w.s.data(), nr, nc);
        gemm_nn(nr, nc, dv, w.dout.data(), dv, w.vt.data(), kBlockK, w.dp.data(), kBlockK, false);
        tile_grad(ctx, p.softmax_scale, r0, nr, c0, nc, w);
        // dV += P^T dO, dK += dS^T Q (dS already carries the softmax scale). Tiles
        // with NaN/inf skip zero (masked) coefficients so it stays in its rows.
        if (dout_finite) gemm_tn(nc, dv, nr, w.s.data(), kBlockK, w.dout.data(), dv, dvv, dv, true);
        else gemm_tn_skip_zero(nc, dv, nr, w.s.data(), kBlockK, w.dout.data(), dv, dvv, dv);
        if (q_finite) gemm_tn(nc, dqk, nr, w.dp.data(), kBlockK, w.q.data(), dqk, dk, dqk, true);
        else gemm_tn_skip_zero(nc, dqk, nr, w.dp.data(), kBlockK, w.q.data(), dqk, dk, dqk);
      }
    }
    store_tile<Elem>(p.dk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, sl, false, b, hk,
                     c0, nc, dqk, dk, dqk);
    store_tile<Elem>(p.dv, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, sl, false, b, hk,
                     c0, nc, dv, dvv, dv);
  }

  // Pass 2: dQ of query rows [r0, r0+nr) of head h.
  void dq_tile(int64_t b, int64_t h, int64_t qt, BwdScratch& w) {
    const SeqLen sl(p, b);
    const int64_t r0 = qt * kBlockQ;
    if (r0 >= sl.seqlen_q) return;
    const int64_t nr = std::min(kBlockQ, sl.seqlen_q - r0);
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v, hk = h / p.group_size();
    const ScoreContext ctx(p, sl, b, h, rng);
    float* dq = w.acc1.data();
    std::fill(dq, dq + nr * dqk, 0.f);
    load_tile<Elem>(qv, sl, true, b, h, r0, nr, dqk, w.q.data(), dqk, p.softmax_scale);
    load_tile<Elem>(dov, sl, true, b, h, r0, nr, dv, w.dout.data(), dv);
    load_row_stats(p, dvec, sl, b, h, r0, nr, w);
    const int64_t c_begin = ctx.mask.col_begin(r0), c_end = ctx.mask.col_end(r0 + nr - 1);
    for (int64_t c0 = c_begin; c0 < c_end; c0 += kBlockK) {
      const int64_t nc = std::min(kBlockK, c_end - c0);
      load_tile_t<Elem>(kv, sl, false, b, hk, c0, nc, dqk, w.kt.data(), kBlockK, w.tmp.data());
      load_tile_t<Elem>(vv, sl, false, b, hk, c0, nc, dv, w.vt.data(), kBlockK, w.tmp.data());
      load_tile<Elem>(kv, sl, false, b, hk, c0, nc, dqk, w.k.data(), dqk);
      gemm_nn(nr, nc, dqk, w.q.data(), dqk, w.kt.data(), kBlockK, w.s.data(), kBlockK, false);
      gemm_nn(nr, nc, dv, w.dout.data(), dv, w.vt.data(), kBlockK, w.dp.data(), kBlockK, false);
      tile_grad(ctx, p.softmax_scale, r0, nr, c0, nc, w);
      if (all_finite(w.k.data(), nc * dqk))
        gemm_nn(nr, dqk, nc, w.dp.data(), kBlockK, w.k.data(), dqk, dq, dqk, true);
      else
        gemm_nn_skip_zero(nr, dqk, nc, w.dp.data(), kBlockK, w.k.data(), dqk, dq, dqk);
    }
    store_tile<Elem>(p.dq, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, sl, true, b, h, r0,
                     nr, dqk, dq, dqk);
  }

  void scale_tile(float* s, int64_t nr, int64_t nc) const {
    for (int64_t r = 0; r < nr; ++r) scale_row(s + r * kBlockK, nc, p.softmax_scale);
  }
};

}  // namespace
}  // namespace cpu

void cpu_backward(const BwdParams& p) {
  with_elem(p.dtype, [&](auto e) { cpu::Backward<decltype(e)>(p).run(); });
}

}  // namespace flashattn::detail
