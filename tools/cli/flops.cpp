#include "flops.h"

#include <algorithm>

namespace facli {

KeyRange visible_keys(int64_t i, int64_t sq, int64_t sk, int64_t left, int64_t right) {
  const int64_t diag = i + sk - sq;  // bottom-right alignment
  return {left < 0 ? 0 : std::clamp<int64_t>(diag - left, 0, sk),
          right < 0 ? sk : std::clamp<int64_t>(diag + right + 1, 0, sk)};
}

int64_t visible_pairs(int64_t sq, int64_t sk, int64_t left, int64_t right) {
  int64_t n = 0;
  for (int64_t i = 0; i < sq; ++i) {
    const KeyRange r = visible_keys(i, sq, sk, left, right);
    n += std::max<int64_t>(0, r.hi - r.lo);
  }
  return n;
}

double forward_flops(int64_t batch, int64_t heads_q, int64_t sq, int64_t sk, int64_t dqk,
                     int64_t dv, bool causal) {
  const int64_t pairs = visible_pairs(sq, sk, -1, causal ? 0 : -1);
  return 2.0 * static_cast<double>(batch) * static_cast<double>(heads_q) *
         static_cast<double>(pairs) * static_cast<double>(dqk + dv);
}

}  // namespace facli
