// The float64 oracle. Naive on purpose: for each (batch, head) it materialises the
// Sq x Sk score matrix in double, applies the contract step by step, and (for the
// backward) differentiates it exactly. It recomputes everything from q, k, v: the
// out and lse arguments of the backward are not read. Memory is O(Sq * Sk) per
// thread; this is the one backend allowed that.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/backend.h"
#include "backends/host_rows.h"
#include "backends/threads.h"
#include "kernels/common/mask.h"
#include "kernels/common/philox.h"
#include "kernels/common/score_mod.h"
#include "backends/host_params.h"

namespace flashattn::detail {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Probabilities of one (sequence, head): p (softmax, before dropout), the
// dropout multiplier per element, the softcap derivative and the lse per row.
struct Probs {
  int64_t sq = 0, sk = 0;
  std::vector<double> p;        // [sq, sk], 0 where masked
  std::vector<double> drop;     // [sq, sk], 0 or 1/(1-p_drop); empty without dropout
  std::vector<double> dsoftcap; // [sq, sk], d s_final / d s_scaled; empty without softcap
  std::vector<double> lse;      // [sq]
};

template <typename Elem>
void load_head(const void* base, const HostSeqLen& sl, int64_t b, int64_t bs, int64_t rs, int64_t hs,
               int64_t h, int64_t rows, int64_t dim, bool is_q, std::vector<double>& dst) {
  dst.resize(static_cast<size_t>(rows * dim));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t off = is_q ? sl.q_row(b, bs, rs, hs, h, i) : sl.k_row(b, bs, rs, hs, h, i);
    load_row<Elem>(base, off, dim, dst.data() + i * dim);
  }
}

Probs compute_probs(const FwdParams& p, int64_t b, int64_t h, const HostSeqLen& sl,
                    const std::vector<double>& q, const std::vector<double>& k) {
  Probs r;
  r.sq = sl.seqlen_q;
  r.sk = sl.seqlen_k;
  const int64_t d = p.head_dim_qk;
  const Mask mask(r.sq, r.sk, p.window_left, p.window_right);
  const size_t n = static_cast<size_t>(r.sq * r.sk);
  r.p.assign(n, 0.0);
  r.lse.assign(static_cast<size_t>(r.sq), kNegInf);
  if (p.softcap > 0.f) r.dsoftcap.assign(n, 0.0);
  const double slope =
      p.alibi_slopes ? static_cast<double>(p.alibi_slopes[b * p.alibi_batch_stride + h]) : 0.0;
  std::vector<double> s(static_cast<size_t>(r.sk));
  for (int64_t i = 0; i < r.sq; ++i) {
    double m = kNegInf;
    bool any = false;
    for (int64_t j = 0; j < r.sk; ++j) {
      if (!mask.visible(i, j)) {
        s[j] = kNegInf;
        continue;
      }
      double dot = 0.0;
      for (int64_t c = 0; c < d; ++c) dot += q[i * d + c] * k[j * d + c];
      double x = static_cast<double>(p.softmax_scale) * dot;
      if (p.softcap > 0.f) {
        const double cap = p.softcap;
        const double t = std::tanh(x / cap);
        x = cap * t;
        r.dsoftcap[i * r.sk + j] = 1.0 - t * t;
      }
      if (p.alibi_slopes) {
        const int64_t dist = std::llabs(i + r.sk - r.sq - j);
        x -= slope * static_cast<double>(dist);
      }
      s[j] = x;
      any = true;
      if (x > m) m = x;  // a NaN score leaves m alone and then poisons the row's sum
    }
    if (!any) continue;  // fully masked row: p = 0, lse = -inf
    double sum = 0.0;
    for (int64_t j = 0; j < r.sk; ++j)
      if (mask.visible(i, j)) sum += std::exp(s[j] - m);
    for (int64_t j = 0; j < r.sk; ++j)
      if (mask.visible(i, j)) r.p[i * r.sk + j] = std::exp(s[j] - m) / sum;
    r.lse[i] = m + std::log(sum);
  }
  if (p.dropout_p > 0.f) {
    const DropoutRng rng = DropoutRng::make(p.seed, p.offset, p.dropout_p);
    const double scale = 1.0 / (1.0 - static_cast<double>(p.dropout_p));
    r.drop.assign(n, 0.0);
    for (int64_t i = 0; i < r.sq; ++i)
      for (int64_t j = 0; j < r.sk; ++j)
        r.drop[i * r.sk + j] = rng.keep(b, h, i, j) ? scale : 0.0;
  }
  return r;
}

template <typename Elem>
void forward_impl(const HostFwdParams& p) {
  const int64_t work = p.batch * p.heads_q;
#pragma omp parallel for schedule(dynamic) num_threads(thread_count(p))
  for (int64_t w = 0; w < work; ++w) {
    const int64_t b = w / p.heads_q, h = w % p.heads_q, hk = h / p.group_size();
    const HostSeqLen sl(p, b);
    std::vector<double> q, k, v;
    load_head<Elem>(p.q, sl, b, p.q_batch_stride, p.q_row_stride, p.q_head_stride, h, sl.seqlen_q,
                    p.head_dim_qk, true, q);
    load_head<Elem>(p.k, sl, b, p.k_batch_stride, p.k_row_stride, p.k_head_stride, hk, sl.seqlen_k,
                    p.head_dim_qk, false, k);
    load_head<Elem>(p.v, sl, b, p.v_batch_stride, p.v_row_stride, p.v_head_stride, hk, sl.seqlen_k,
                    p.head_dim_v, false, v);
    const Probs pr = compute_probs(p, b, h, sl, q, k);
    const int64_t dv = p.head_dim_v;
    std::vector<double> o(static_cast<size_t>(dv));
    for (int64_t i = 0; i < sl.seqlen_q; ++i) {
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t j = 0; j < sl.seqlen_k; ++j) {
        double pij = pr.p[i * sl.seqlen_k + j];
        if (!pr.drop.empty()) pij *= pr.drop[i * sl.seqlen_k + j];
        if (pij == 0.0) continue;
        for (int64_t c = 0; c < dv; ++c) o[c] += pij * v[j * dv + c];
      }
      store_row<Elem>(p.out, sl.q_row(b, p.o_batch_stride, p.o_row_stride, p.o_head_stride, h, i),
                      dv, o.data());
      if (p.lse) p.lse[sl.lse_index(p, b, h, i)] = static_cast<float>(pr.lse[i]);
    }
  }
}

template <typename Elem>
void backward_impl(const BwdParams& p) {
  const int64_t work = p.batch * p.heads_kv;
  const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
  // One work item per (batch, kv head) so the group's dk/dv sums stay in one thread.
#pragma omp parallel for schedule(dynamic) num_threads(thread_count(p))
  for (int64_t w = 0; w < work; ++w) {
    const int64_t b = w / p.heads_kv, hk = w % p.heads_kv;
    const HostSeqLen sl(p, b);
    const int64_t sq = sl.seqlen_q, sk = sl.seqlen_k;
    std::vector<double> k, v, q, dout;
    load_head<Elem>(p.k, sl, b, p.k_batch_stride, p.k_row_stride, p.k_head_stride, hk, sk, dqk,
                    false, k);
    load_head<Elem>(p.v, sl, b, p.v_batch_stride, p.v_row_stride, p.v_head_stride, hk, sk, dv,
                    false, v);
    std::vector<double> dk(static_cast<size_t>(sk * dqk), 0.0), dvv(static_cast<size_t>(sk * dv), 0.0);
    for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
      load_head<Elem>(p.q, sl, b, p.q_batch_stride, p.q_row_stride, p.q_head_stride, h, sq, dqk,
                      true, q);
      load_head<Elem>(p.dout, sl, b, p.do_batch_stride, p.do_row_stride, p.do_head_stride, h, sq,
                      dv, true, dout);
      const Probs pr = compute_probs(p, b, h, sl, q, k);
      std::vector<double> dq(static_cast<size_t>(dqk));
      std::vector<double> dp(static_cast<size_t>(sk));
      for (int64_t i = 0; i < sq; ++i) {
        // dP_ij = dO_i . v_j (through dropout); D_i = sum_j p_ij dP_ij.
        double di = 0.0;
        for (int64_t j = 0; j < sk; ++j) {
          const double pij = pr.p[i * sk + j];
          if (pij == 0.0) {
            dp[j] = 0.0;
            continue;
          }
          double x = 0.0;
          for (int64_t c = 0; c < dv; ++c) x += dout[i * dv + c] * v[j * dv + c];
          const double drop = pr.drop.empty() ? 1.0 : pr.drop[i * sk + j];
          dp[j] = x * drop;
          di += pij * dp[j];
          for (int64_t c = 0; c < dv; ++c) dvv[j * dv + c] += pij * drop * dout[i * dv + c];
        }
        std::fill(dq.begin(), dq.end(), 0.0);
        for (int64_t j = 0; j < sk; ++j) {
          const double pij = pr.p[i * sk + j];
          if (pij == 0.0) continue;
          double ds = pij * (dp[j] - di);
          if (!pr.dsoftcap.empty()) ds *= pr.dsoftcap[i * sk + j];
          ds *= static_cast<double>(p.softmax_scale);
          for (int64_t c = 0; c < dqk; ++c) {
            dq[c] += ds * k[j * dqk + c];
            dk[j * dqk + c] += ds * q[i * dqk + c];
          }
        }
        store_row<Elem>(p.dq, sl.q_row(b, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, h, i),
                        dqk, dq.data());
      }
    }
    for (int64_t j = 0; j < sk; ++j) {
      store_row<Elem>(p.dk, sl.k_row(b, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, hk, j),
                      dqk, dk.data() + j * dqk);
      store_row<Elem>(p.dv, sl.k_row(b, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, hk, j),
                      dv, dvv.data() + j * dv);
    }
  }
}

}  // namespace

void reference_forward(const HostFwdParams& p) {
  with_elem(p.dtype, [&](auto e) { forward_impl<decltype(e)>(p); });
}

void reference_backward(const BwdParams& p) {
  with_elem(p.dtype, [&](auto e) { backward_impl<decltype(e)>(p); });
}

}  // namespace flashattn::detail
