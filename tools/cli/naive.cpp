#include "naive.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <flashattn/flashattn.h>

#include "flops.h"
#include "host_tensor.h"

namespace facli {

namespace {

// Indexing of the [.., rows, heads, dim] layouts and the per-row softmax.
struct Naive {
  const CheckConfig& c;
  const NaiveInputs& in;
  float scale;
  int64_t group;

  float rd(float x) const { return round_to(c.dtype, x); }
  int64_t qi(int64_t row, int64_t h, int64_t d) const { return (row * c.heads_q + h) * d; }
  int64_t ki(int64_t row, int64_t hk, int64_t d) const { return (row * c.heads_kv + hk) * d; }
  float dot(const float* a, const float* b, int64_t n) const {
    float s = 0.f;
    for (int64_t x = 0; x < n; ++x) s += a[x] * b[x];
    return s;
  }
  // sum |a[x] b[x]|: the size of the terms a dot product cancels.
  static float abs_dot(const float* a, const float* b, int64_t n) {
    float s = 0.f;
    for (int64_t x = 0; x < n; ++x) s += std::abs(a[x] * b[x]);
    return s;
  }

  // One query row of (sequence b, head h): visible keys, p (dtype-rounded, before
  // dropout), the dropout multiplier and the softcap derivative per key.
  struct Row {
    KeyRange kr{0, 0};
    std::vector<float> p, mult, dcap;
  };

  void row(int64_t b, int64_t h, int64_t i, Row& r, double* max_s) const {
    const int64_t sq = c.len_q[b], sk = c.len_k[b], hk = h / group;
    r.kr = visible_keys(i, sq, sk, c.window_left, c.effective_right());
    r.p.assign(static_cast<size_t>(sk), 0.f);
    r.mult.assign(static_cast<size_t>(sk), 1.f);
    r.dcap.assign(static_cast<size_t>(sk), 1.f);
    if (r.kr.hi <= r.kr.lo) return;
    const float slope =
        c.alibi == 0 ? 0.f : in.alibi[static_cast<size_t>((c.alibi == 2 ? b * c.heads_q : 0) + h)];
    const float* qrow = in.q.data() + qi(c.q_row0(b) + i, h, c.dqk);
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = r.kr.lo; j < r.kr.hi; ++j) {
      float x = scale * dot(qrow, in.k.data() + ki(c.k_row0(b) + j, hk, c.dqk), c.dqk);
      if (max_s) *max_s = std::max(*max_s, static_cast<double>(std::abs(x)));
      x = rd(x);
      if (c.softcap > 0.f) {
        const float t = std::tanh(x / c.softcap);
        r.dcap[j] = 1.f - t * t;
        x = rd(c.softcap * t);
      }
      if (c.alibi) x = rd(x - slope * static_cast<float>(std::llabs(i + sk - sq - j)));
      if (max_s) *max_s = std::max(*max_s, static_cast<double>(std::abs(x)));
      r.p[j] = x;
      m = std::max(m, x);
    }
    float sum = 0.f;
    for (int64_t j = r.kr.lo; j < r.kr.hi; ++j) sum += (r.p[j] = std::exp(r.p[j] - m));
    for (int64_t j = r.kr.lo; j < r.kr.hi; ++j) {
      r.p[j] = rd(r.p[j] / sum);
      if (c.dropout > 0.f)
        r.mult[j] = flashattn::dropout_keep(c.seed, c.offset, b, h, i, j, c.dropout)
                        ? 1.f / (1.f - c.dropout)
                        : 0.f;
    }
  }
};

}  // namespace

NaiveForward naive_forward(const CheckConfig& c, const NaiveInputs& in) {
  const Naive nv{c, in, c.effective_scale(), c.heads_q / c.heads_kv};
  NaiveForward r;
  r.out.assign(static_cast<size_t>(c.total_q() * c.heads_q * c.dv), 0.f);
  std::vector<float> o(static_cast<size_t>(c.dv));
  Naive::Row row;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads_q; ++h)
      for (int64_t i = 0; i < c.len_q[b]; ++i) {
        nv.row(b, h, i, row, &r.max_abs_score);
        std::fill(o.begin(), o.end(), 0.f);
        for (int64_t j = row.kr.lo; j < row.kr.hi; ++j) {
          const float pj = nv.rd(row.p[j] * row.mult[j]);
          const float* vj = in.v.data() + nv.ki(c.k_row0(b) + j, h / nv.group, c.dv);
          for (int64_t x = 0; x < c.dv; ++x) o[x] += pj * vj[x];
        }
        float* orow = r.out.data() + nv.qi(c.q_row0(b) + i, h, c.dv);
        for (int64_t x = 0; x < c.dv; ++x) orow[x] = nv.rd(o[x]);
      }
  return r;
}

NaiveBackward naive_backward(const CheckConfig& c, const NaiveInputs& in,
                             const std::vector<float>& out, const std::vector<float>& dout) {
  const Naive nv{c, in, c.effective_scale(), c.heads_q / c.heads_kv};
  NaiveBackward r;
  r.dq.assign(in.q.size(), 0.f);
  r.dk.assign(in.k.size(), 0.f);
  r.dv.assign(in.v.size(), 0.f);
  r.mag_dq.assign(in.q.size(), 0.f);
  r.mag_dk.assign(in.k.size(), 0.f);
  r.mag_dv.assign(in.v.size(), 0.f);
  r.mag_d_dq.assign(in.q.size(), 0.f);
  r.mag_d_dk.assign(in.k.size(), 0.f);
  Naive::Row row;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads_q; ++h) {
      const int64_t hk = h / nv.group;
      for (int64_t i = 0; i < c.len_q[b]; ++i) {
        nv.row(b, h, i, row, nullptr);
        const int64_t qrow = c.q_row0(b) + i;
        const float* doi = dout.data() + nv.qi(qrow, h, c.dv);
        const float* qv = in.q.data() + nv.qi(qrow, h, c.dqk);
        float* dq = r.dq.data() + nv.qi(qrow, h, c.dqk);
        float* mdq = r.mag_dq.data() + nv.qi(qrow, h, c.dqk);
        float* mdq_d = r.mag_d_dq.data() + nv.qi(qrow, h, c.dqk);
        const float d = nv.dot(doi, out.data() + nv.qi(qrow, h, c.dv), c.dv);  // D_i = dO_i . O_i
        const float d_mag = Naive::abs_dot(doi, out.data() + nv.qi(qrow, h, c.dv), c.dv);
        for (int64_t j = row.kr.lo; j < row.kr.hi; ++j) {
          const int64_t krow = c.k_row0(b) + j;
          const float* kv = in.k.data() + nv.ki(krow, hk, c.dqk);
          const float* vv = in.v.data() + nv.ki(krow, hk, c.dv);
          const float pj = nv.rd(row.p[j] * row.mult[j]);
          const float dp = nv.rd(nv.dot(doi, vv, c.dv)) * row.mult[j];
          const float ds = nv.rd(row.p[j] * (dp - d) * row.dcap[j] * nv.scale);
          // dP - D cancels where one key takes nearly all of p (large scores):
          // what is left of it carries the rounding of both dots' terms.
          const float dp_mag = Naive::abs_dot(doi, vv, c.dv) * std::abs(row.mult[j]);
          const float ds_mag_d = row.p[j] * d_mag * row.dcap[j] * std::abs(nv.scale);
          const float ds_mag = row.p[j] * dp_mag * row.dcap[j] * std::abs(nv.scale) + ds_mag_d;
          float* dk = r.dk.data() + nv.ki(krow, hk, c.dqk);
          float* dv = r.dv.data() + nv.ki(krow, hk, c.dv);
          float* mdk = r.mag_dk.data() + nv.ki(krow, hk, c.dqk);
          float* mdv = r.mag_dv.data() + nv.ki(krow, hk, c.dv);
          float* mdk_d = r.mag_d_dk.data() + nv.ki(krow, hk, c.dqk);
          for (int64_t x = 0; x < c.dqk; ++x) {
            dq[x] += ds * kv[x];
            dk[x] += ds * qv[x];
            mdq[x] += ds_mag * std::abs(kv[x]);
            mdk[x] += ds_mag * std::abs(qv[x]);
            mdq_d[x] += ds_mag_d * std::abs(kv[x]);
            mdk_d[x] += ds_mag_d * std::abs(qv[x]);
          }
          for (int64_t x = 0; x < c.dv; ++x) {
            dv[x] += pj * doi[x];
            mdv[x] += std::abs(pj * doi[x]);
          }
        }
      }
    }
  for (std::vector<float>* g : {&r.dq, &r.dk, &r.dv})
    for (float& x : *g) x = nv.rd(x);
  return r;
}

}  // namespace facli
