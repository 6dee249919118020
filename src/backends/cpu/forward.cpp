// CPU flash forward, FlashAttention-2 loop order: each work item is one tile of
// query rows of one (sequence, head); key/value tiles stream through it with an
// online softmax (running max m, running sum l, rescaled output). Extra memory is
// a few tiles per thread. Tiles entirely outside the mask are never visited.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/tile_io.h"
#include "backends/cpu/tile_ops.h"
#include "backends/threads.h"

namespace flashattn::detail {
namespace cpu {
namespace {

constexpr int64_t kBlockQ = 64;  // query rows per work item
constexpr int64_t kBlockK = 64;  // keys per inner step

struct FwdScratch {
  std::vector<float> q, kt, v, s, o, m, l, tmp;
  FwdScratch(int64_t dqk, int64_t dv)
      : q(kBlockQ * dqk), kt(dqk * kBlockK), v(kBlockK * dv), s(kBlockQ * kBlockK),
        o(kBlockQ * dv), m(kBlockQ), l(kBlockQ), tmp(std::max(dqk, dv)) {}
};

template <typename Elem>
void forward_tile(const FwdParams& p, const DropoutRng& rng, int64_t b, int64_t h, int64_t qt,
                  FwdScratch& w) {
  const SeqLen sl(p, b);
  const int64_t r0 = qt * kBlockQ;
  if (r0 >= sl.seqlen_q) return;
  const int64_t nr = std::min(kBlockQ, sl.seqlen_q - r0);
  const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v, hk = h / p.group_size();
  const ScoreContext ctx(p, sl, b, h, rng);
  const HeadView qv{p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride};
  const HeadView kv{p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride};
  const HeadView vv{p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride};

  // Scores are scale * q.k: fold the scale into the query tile once.
  load_tile<Elem>(qv, sl, true, b, h, r0, nr, dqk, w.q.data(), dqk, p.softmax_scale);
  std::fill(w.o.begin(), w.o.begin() + nr * dv, 0.f);
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.f);

  const int64_t c_begin = ctx.mask.col_begin(r0), c_end = ctx.mask.col_end(r0 + nr - 1);
  for (int64_t c0 = c_begin; c0 < c_end; c0 += kBlockK) {
    const int64_t nc = std::min(kBlockK, c_end - c0);
    load_tile_t<Elem>(kv, sl, false, b, hk, c0, nc, dqk, w.kt.data(), kBlockK, w.tmp.data());
    load_tile<Elem>(vv, sl, false, b, hk, c0, nc, dv, w.v.data(), dv);
    gemm_nn(nr, nc, dqk, w.q.data(), dqk, w.kt.data(), kBlockK, w.s.data(), kBlockK, false);
    ctx.apply(w.s.data(), kBlockK, r0, nr, c0, nc, nullptr);

    for (int64_t r = 0; r < nr; ++r) {
      float* s = w.s.data() + r * kBlockK;
      const float tile_max = row_max(s, nc);  // NaN when the row met a NaN score
      const float m_new = (tile_max > w.m[r] || tile_max != tile_max) ? tile_max : w.m[r];
      if (m_new == kNegInf) {  // nothing visible in this row yet
        std::fill(s, s + nc, 0.f);
        continue;
      }
      const float alpha = w.m[r] == kNegInf ? 0.f : std::exp(w.m[r] - m_new);
      const float sum = exp_sub_sum(s, nc, m_new);
      w.l[r] = w.l[r] * alpha + sum;
      w.m[r] = m_new;
      if (alpha != 1.f) scale_row(w.o.data() + r * dv, dv, alpha);
      // Dropout acts on the probabilities after the normaliser is taken.
      if (ctx.dropout) ctx.dropout_row(s, r0 + r, c0, nc);
    }
    // A NaN/inf value row must reach only the rows that see it: such tiles skip
    // the zero (masked) probabilities instead of multiplying them in.
    if (all_finite(w.v.data(), nc * dv))
      gemm_nn(nr, dv, nc, w.s.data(), kBlockK, w.v.data(), dv, w.o.data(), dv, true);
    else
      gemm_nn_skip_zero(nr, dv, nc, w.s.data(), kBlockK, w.v.data(), dv, w.o.data(), dv);
  }

  // Rows that saw no key: out 0, lse -inf (the identity of log-sum-exp merging).
  // A row whose visible scores were all -inf (an inf input) is NaN, as exp(-inf - -inf).
  for (int64_t r = 0; r < nr; ++r) {
    float* o = w.o.data() + r * dv;
    float lse = w.m[r] + std::log(w.l[r]);
    if (w.l[r] == 0.f) {
      const bool sees_keys = ctx.mask.col_begin(r0 + r) < ctx.mask.col_end(r0 + r);
      const float fill = sees_keys ? std::numeric_limits<float>::quiet_NaN() : 0.f;
      std::fill(o, o + dv, fill);
      lse = sees_keys ? fill : kNegInf;
    } else {
      scale_row(o, dv, 1.f / w.l[r]);
    }
    if (p.lse) p.lse[sl.lse_index(p, b, h, r0 + r)] = lse;
  }
  store_tile<Elem>(p.out, p.o_batch_stride, p.o_row_stride, p.o_head_stride, sl, true, b, h, r0, nr,
                   dv, w.o.data(), dv);
}

template <typename Elem>
void forward_impl(const FwdParams& p) {
  const int64_t n_qt = ceil_div(p.seqlen_q, kBlockQ);
  const int64_t work = p.batch * p.heads_q * n_qt;
  const DropoutRng rng = p.dropout_p > 0.f ? DropoutRng::make(p.seed, p.offset, p.dropout_p)
                                           : DropoutRng{};
#pragma omp parallel num_threads(thread_count(p))
  {
    FwdScratch scratch(p.head_dim_qk, p.head_dim_v);
    // Last query tiles first: under a causal mask they are the longest.
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < work; ++w) {
      const int64_t qt = n_qt - 1 - w % n_qt, bh = w / n_qt;
      forward_tile<Elem>(p, rng, bh / p.heads_q, bh % p.heads_q, qt, scratch);
    }
  }
}

}  // namespace
}  // namespace cpu

void cpu_forward(const FwdParams& p) {
  with_elem(p.dtype, [&](auto e) { cpu::forward_impl<decltype(e)>(p); });
}

}  // namespace flashattn::detail
