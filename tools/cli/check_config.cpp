#include "check_config.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "host_tensor.h"

namespace facli {

int64_t CheckConfig::seqlen_q() const {
  return len_q.empty() ? 0 : *std::max_element(len_q.begin(), len_q.end());
}
int64_t CheckConfig::seqlen_k() const {
  return len_k.empty() ? 0 : *std::max_element(len_k.begin(), len_k.end());
}
int64_t CheckConfig::total_q() const { return q_row0(batch); }
int64_t CheckConfig::total_k() const { return k_row0(batch); }

int64_t CheckConfig::q_row0(int64_t b) const {
  if (!packed) return b * seqlen_q();
  int64_t r = 0;
  for (int64_t i = 0; i < b; ++i) r += len_q[i];
  return r;
}
int64_t CheckConfig::k_row0(int64_t b) const {
  if (!packed) return b * seqlen_k();
  int64_t r = 0;
  for (int64_t i = 0; i < b; ++i) r += len_k[i];
  return r;
}

int64_t CheckConfig::effective_right() const {
  if (!causal) return window_right;
  return window_right < 0 ? 0 : std::min<int64_t>(window_right, 0);
}

float CheckConfig::effective_scale() const {
  return scale ? *scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(dqk)));
}

std::string CheckConfig::describe() const {
  std::string s = fmt::format("{} {} B={} ", dtype_short_name(dtype), packed ? "packed" : "batched",
                              batch);
  if (packed) s += fmt::format("len_q={} len_k={}", len_q, len_k);
  else s += fmt::format("Sq={} Sk={}", seqlen_q(), seqlen_k());
  s += fmt::format(" Hq={} Hkv={} Dqk={} Dv={}", heads_q, heads_kv, dqk, dv);
  if (scale) s += fmt::format(" scale={}", *scale);
  if (q_sigma != 1.f) s += fmt::format(" q_sigma={}", q_sigma);
  if (causal) s += " causal";
  if (window_left >= 0 || window_right >= 0)
    s += fmt::format(" window=({},{})", window_left, window_right);
  if (softcap > 0.f) s += fmt::format(" softcap={}", softcap);
  if (alibi) s += alibi == 1 ? " alibi=[Hq]" : " alibi=[B,Hq]";
  if (dropout > 0.f) s += fmt::format(" dropout={} seed={} offset={}", dropout, seed, offset);
  if (backward) s += deterministic ? " +backward(deterministic)" : " +backward";
  return s;
}

namespace {

bool chance(std::mt19937_64& rng, double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; }

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, std::max(lo, hi))(rng);
}

// Lengths that matter: 1, the contract's odd sizes, short and long ones.
int64_t random_length(std::mt19937_64& rng, int64_t max_len) {
  const double r = std::uniform_real_distribution<>(0, 1)(rng);
  if (r < 0.15) return 1;
  if (r < 0.30) {
    static const int64_t special[] = {17, 113, 239, 1023};
    return std::min(max_len, special[uniform(rng, 0, 3)]);
  }
  if (r < 0.60) return uniform(rng, 2, std::min<int64_t>(max_len, 40));
  return uniform(rng, 1, max_len);
}

int64_t random_head_dim(std::mt19937_64& rng, ConfigSpace space) {
  if (space == ConfigSpace::cuda) {
    // The kernel sizes (64/96/128/192/256) and dims padded up to them.
    static const int64_t dims[] = {8, 32, 40, 64, 64, 72, 96, 128, 128, 136, 160, 192, 200, 256};
    return dims[uniform(rng, 0, 13)];
  }
  static const int64_t dims[] = {8, 16, 32, 40, 64, 64, 96, 128, 3, 13};
  return dims[uniform(rng, 0, 9)];
}

// About half of d, still a multiple of 8 (for the cuda space).
int64_t halve_by_8(int64_t d) { return std::max<int64_t>(8, d / 16 * 8); }

}  // namespace

CheckConfig random_config(std::mt19937_64& rng, int64_t max_seqlen, ConfigSpace space) {
  using flashattn::DType;
  const bool cuda = space == ConfigSpace::cuda;
  CheckConfig c;
  static const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  c.dtype = cuda ? dtypes[uniform(rng, 1, 2)] : dtypes[uniform(rng, 0, 2)];
  c.packed = chance(rng, 0.3);
  c.batch = uniform(rng, 1, c.packed ? 4 : 3);
  const int64_t max_len = std::max<int64_t>(1, max_seqlen);
  if (c.packed) {
    for (int64_t b = 0; b < c.batch; ++b) {
      // Empty sequences are legal and produce nothing.
      c.len_q.push_back(chance(rng, 0.15) ? 0 : random_length(rng, max_len));
      c.len_k.push_back(chance(rng, 0.15) ? 0 : random_length(rng, max_len));
    }
  } else {
    c.len_q.assign(c.batch, random_length(rng, max_len));
    c.len_k.assign(c.batch, chance(rng, 0.3) ? c.len_q[0] : random_length(rng, max_len));
  }
  c.heads_kv = uniform(rng, 1, 3);
  static const int64_t groups[] = {1, 1, 2, 4};  // 1: MHA, >1: GQA (MQA when heads_kv = 1)
  c.heads_q = c.heads_kv * groups[uniform(rng, 0, 3)];
  c.dqk = random_head_dim(rng, space);
  c.dv = chance(rng, 0.7) ? c.dqk : random_head_dim(rng, space);
  if (chance(rng, 0.15)) c.scale = std::uniform_real_distribution<float>(0.05f, 2.f)(rng);
  if (chance(rng, 0.08)) c.q_sigma = std::uniform_real_distribution<float>(50.f, 300.f)(rng);
  c.causal = chance(rng, 0.3);
  if (chance(rng, 0.3)) {
    const int64_t span = std::max(c.seqlen_q(), c.seqlen_k());
    c.window_left = chance(rng, 0.25) ? -1 : uniform(rng, 0, span);
    c.window_right = chance(rng, 0.25) ? -1 : uniform(rng, 0, span);
  }
  if (chance(rng, 0.2)) c.softcap = std::uniform_real_distribution<float>(1.f, 30.f)(rng);
  if (chance(rng, 0.2)) c.alibi = chance(rng, 0.5) ? 1 : 2;
  if (chance(rng, 0.2)) {
    static const float ps[] = {0.1f, 0.25f, 0.5f, 0.8f};
    c.dropout = ps[uniform(rng, 0, 3)];
    c.seed = rng();
    c.offset = rng() >> uniform(rng, 0, 63);
  }
  c.backward = chance(rng, 0.5);
  c.deterministic = c.backward && chance(rng, 0.25);

  // Keep each trial cheap: the float64 reference is O(B*Hq*Sq*Sk*(Dqk+Dv)).
  const auto work = [&] {
    double w = 0;
    for (int64_t b = 0; b < c.batch; ++b)
      w += static_cast<double>(c.len_q[b]) * static_cast<double>(c.len_k[b]);
    return w * static_cast<double>(c.heads_q * (c.dqk + c.dv));
  };
  while (work() > 5e7 && c.heads_kv > 1) {
    c.heads_q /= c.heads_kv;
    c.heads_kv = 1;
  }
  while (work() > 5e7 && c.heads_q > 1) c.heads_q /= 2;
  if (cuda) {
    // Fewer sequences before smaller dims: the GPU's interest is long ones.
    while (work() > 5e7 && c.batch > 1) {
      --c.batch;
      c.len_q.pop_back();
      c.len_k.pop_back();
    }
    while (work() > 5e7 && std::max(c.dqk, c.dv) > 8) c.dqk = halve_by_8(c.dqk), c.dv = halve_by_8(c.dv);
    return c;
  }
  while (work() > 5e7 && c.dqk > 16) c.dqk /= 2, c.dv = std::max<int64_t>(8, c.dv / 2);
  return c;
}

}  // namespace facli
