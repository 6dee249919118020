// The score modifiers of the contract, applied in this order to s = scale * q.k:
// softcap, then ALiBi. Kept as tiny functions so every backend shares the formula.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace flashattn::detail {

// ALiBi bias for query i and key j: -slope * |i + Sk - Sq - j|.
FA_HD float alibi_bias(float slope, int64_t i, int64_t j, int64_t seqlen_q, int64_t seqlen_k) {
  const int64_t d = i + seqlen_k - seqlen_q - j;
  return -slope * static_cast<float>(d < 0 ? -d : d);
}

}  // namespace flashattn::detail
