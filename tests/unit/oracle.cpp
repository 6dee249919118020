// The harness's own oracles: the contract computed naively in float64 (an
// independent check of the reference backend) and in fp16/bf16 (what the
// accuracy rule measures against), and the reference backend on widened inputs.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "harness.h"

namespace fatest {

// ================================================================ oracles

namespace {

template <typename T>
Naive naive_impl(const Problem& P, bool lowp, DType dt, bool backward) {
  const Case& c = P.c;
  auto R = [&](T x) -> T { return lowp ? static_cast<T>(round_to(dt, static_cast<double>(x))) : x; };
  const std::vector<double> q = P.q.values(), k = P.k.values(), v = P.v.values(),
                            dO = P.dout.values();
  const int64_t Hq = c.Hq, Hkv = c.Hkv, Dqk = c.Dqk, Dv = c.Dv, group = Hq / Hkv;
  const T scale = static_cast<T>(P.scale);
  const double keep_scale = c.dropout > 0.f ? 1.0 / (1.0 - static_cast<double>(c.dropout)) : 1.0;

  Naive n;
  n.out.assign(static_cast<size_t>(P.rows_q * Hq * Dv), 0.0);
  int64_t lse_n = 1;
  for (int64_t s : P.lse_shape()) lse_n *= s;
  n.lse.assign(static_cast<size_t>(lse_n), -kInf);
  if (backward) {
    n.dq.assign(static_cast<size_t>(P.rows_q * Hq * Dqk), 0.0);
    n.dk.assign(static_cast<size_t>(P.rows_k * Hkv * Dqk), 0.0);
    n.dv.assign(static_cast<size_t>(P.rows_k * Hkv * Dv), 0.0);
  }
  auto qa = [&](int64_t b, int64_t i, int64_t h, int64_t x) {
    return q[(P.row_q(b, i) * Hq + h) * Dqk + x];
  };
  auto ka = [&](int64_t b, int64_t j, int64_t h, int64_t x) {
    return k[(P.row_k(b, j) * Hkv + h) * Dqk + x];
  };
  auto va = [&](int64_t b, int64_t j, int64_t h, int64_t x) {
    return v[(P.row_k(b, j) * Hkv + h) * Dv + x];
  };
  auto doa = [&](int64_t b, int64_t i, int64_t h, int64_t x) {
    return dO[(P.row_q(b, i) * Hq + h) * Dv + x];
  };

  for (int64_t b = 0; b < P.B; ++b) {
    const int64_t sq = P.len_q[b], sk = P.len_k[b];
    const size_t nn = static_cast<size_t>(sq * sk);
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      std::vector<T> dk_acc(static_cast<size_t>(sk * Dqk), T(0)), dv_acc(static_cast<size_t>(sk * Dv), T(0));
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        const double slope = P.slope(b, h);
        std::vector<T> Pm(nn, T(0)), Pd(nn, T(0)), tanh_t(nn, T(0)), O(static_cast<size_t>(sq * Dv), T(0));
        std::vector<double> mult(nn, 1.0);
        std::vector<char> vis(nn, 0), row_any(static_cast<size_t>(sq), 0);
        std::vector<T> s(static_cast<size_t>(sk));
        for (int64_t i = 0; i < sq; ++i) {
          T m = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j < sk; ++j) {
            if (!visible(c, sq, sk, i, j)) continue;
            vis[i * sk + j] = row_any[i] = 1;
            T acc = 0;
            double exact = 0.0;
            for (int64_t x = 0; x < Dqk; ++x) {
              acc += static_cast<T>(qa(b, i, h, x)) * static_cast<T>(ka(b, j, hk, x));
              exact += qa(b, i, h, x) * ka(b, j, hk, x);
            }
            n.max_s = std::max(n.max_s, std::fabs(static_cast<double>(P.scale) * exact));
            T x = R(acc * scale);
            if (c.softcap > 0.f) {
              const T cap = static_cast<T>(c.softcap);
              const T t = std::tanh(x / cap);
              tanh_t[i * sk + j] = t;
              x = cap * t;
            }
            if (c.alibi != Alibi::none) x -= static_cast<T>(slope * static_cast<double>(std::llabs(i + sk - sq - j)));
            s[j] = x;
            m = std::max(m, x);
          }
          if (!row_any[i]) continue;
          T sum = 0;
          for (int64_t j = 0; j < sk; ++j)
            if (vis[i * sk + j]) sum += std::exp(s[j] - m);
          n.lse[P.lse_index(b, h, i)] = static_cast<double>(m + std::log(sum));
          for (int64_t j = 0; j < sk; ++j) {
            if (!vis[i * sk + j]) continue;
            const T pr = std::exp(s[j] - m) / sum;
            if (c.dropout > 0.f)
              mult[i * sk + j] = fa::dropout_keep(c.dropout_seed, c.dropout_offset, b, h, i, j, c.dropout)
                                     ? keep_scale
                                     : 0.0;
            Pm[i * sk + j] = R(pr);
            Pd[i * sk + j] = R(pr * static_cast<T>(mult[i * sk + j]));
          }
          for (int64_t x = 0; x < Dv; ++x) {
            T acc = 0;
            for (int64_t j = 0; j < sk; ++j)
              if (vis[i * sk + j]) acc += Pd[i * sk + j] * static_cast<T>(va(b, j, hk, x));
            O[i * Dv + x] = R(acc);
            n.out[(P.row_q(b, i) * Hq + h) * Dv + x] = static_cast<double>(O[i * Dv + x]);
          }
        }
        if (!backward) continue;
        for (int64_t i = 0; i < sq; ++i) {
          if (!row_any[i]) continue;
          T D = 0;
          for (int64_t x = 0; x < Dv; ++x) D += static_cast<T>(doa(b, i, h, x)) * O[i * Dv + x];
          std::vector<T> dq_acc(static_cast<size_t>(Dqk), T(0));
          for (int64_t j = 0; j < sk; ++j) {
            if (!vis[i * sk + j]) continue;
            T dp = 0;
            for (int64_t x = 0; x < Dv; ++x)
              dp += static_cast<T>(doa(b, i, h, x)) * static_cast<T>(va(b, j, hk, x));
            dp = R(dp);
            T ds = Pm[i * sk + j] * (dp * static_cast<T>(mult[i * sk + j]) - D);
            if (c.softcap > 0.f) ds *= T(1) - tanh_t[i * sk + j] * tanh_t[i * sk + j];
            ds = R(ds);
            for (int64_t x = 0; x < Dqk; ++x) {
              dq_acc[x] += ds * static_cast<T>(ka(b, j, hk, x));
              dk_acc[j * Dqk + x] += ds * static_cast<T>(qa(b, i, h, x));
            }
            for (int64_t x = 0; x < Dv; ++x)
              dv_acc[j * Dv + x] += Pd[i * sk + j] * static_cast<T>(doa(b, i, h, x));
          }
          for (int64_t x = 0; x < Dqk; ++x)
            n.dq[(P.row_q(b, i) * Hq + h) * Dqk + x] = static_cast<double>(R(dq_acc[x] * scale));
        }
      }
      if (!backward) continue;
      for (int64_t j = 0; j < sk; ++j) {
        for (int64_t x = 0; x < Dqk; ++x)
          n.dk[(P.row_k(b, j) * Hkv + hk) * Dqk + x] = static_cast<double>(R(dk_acc[j * Dqk + x] * scale));
        for (int64_t x = 0; x < Dv; ++x)
          n.dv[(P.row_k(b, j) * Hkv + hk) * Dv + x] = static_cast<double>(R(dv_acc[j * Dv + x]));
      }
    }
  }
  return n;
}

}  // namespace

Naive naive_attention(const Problem& p, std::optional<DType> lowp, bool backward) {
  if (lowp && (*lowp == DType::f16 || *lowp == DType::bf16))
    return naive_impl<float>(p, true, *lowp, backward);
  return naive_impl<double>(p, false, DType::f32, backward);
}

Truth reference_truth(const Problem& p, bool backward) {
  const Problem wide = convert_problem(p, DType::f32);
  const FwdResult f = run_forward(wide, reference_target());
  Truth t;
  t.out = f.out.values();
  t.lse = f.lse.values();
  if (backward) {
    const BwdResult g = run_backward(wide, reference_target(), f);
    t.dq = g.dq.values();
    t.dk = g.dk.values();
    t.dv = g.dv.values();
  }
  return t;
}

}  // namespace fatest
