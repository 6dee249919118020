// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3")
// and the contract's dropout decision built on it. Shared bit for bit by every
// backend, host and device, so that a seed drops the same entries everywhere.
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"

namespace flashattn::detail {

struct Philox4 {
  uint32_t x[4];
};

FA_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

FA_HD Philox4 philox4x32_10(Philox4 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo32(kM0, c.x[0], &hi0);
    const uint32_t lo1 = mulhilo32(kM1, c.x[2], &hi1);
    c = Philox4{{hi1 ^ c.x[1] ^ k0, lo1, hi0 ^ c.x[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

// The dropout stream of one call. The key is derived once from (seed, offset)
// so that distinct (seed, offset) pairs never share a stream by construction;
// each element then costs a quarter of a Philox call (4 outputs per counter).
struct DropoutRng {
  uint32_t key0 = 0, key1 = 0;
  uint32_t threshold = 0;  // drop when the random word is below it
  float keep_scale = 1.f;  // 1 / (1 - p)

  static DropoutRng make(uint64_t seed, uint64_t offset, float p) {
    DropoutRng r;
    const Philox4 k = philox4x32_10(
        Philox4{{static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32), 0x46414452u, 0u}},
        static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    r.key0 = k.x[0];
    r.key1 = k.x[1];
    const double t = static_cast<double>(p) * 4294967296.0;
    r.threshold = t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
    r.keep_scale = 1.f / (1.f - p);
    return r;
  }

  // Random words for keys j4*4 .. j4*4+3 of row i of head h of sequence b.
  FA_HD Philox4 words(int64_t b, int64_t h, int64_t i, int64_t j4) const {
    return philox4x32_10(Philox4{{static_cast<uint32_t>(j4), static_cast<uint32_t>(i),
                                  static_cast<uint32_t>(h), static_cast<uint32_t>(b)}},
                         key0, key1);
  }
  FA_HD bool keep_word(uint32_t w) const { return w >= threshold; }
  FA_HD bool keep(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return keep_word(words(b, h, i, j >> 2).x[j & 3]);
  }
};

}  // namespace flashattn::detail
