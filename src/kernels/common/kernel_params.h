// What a GPU kernel receives: the validated FwdParams plus values the host
// derives once per call (the dropout stream, the softmax scale in log2 units).
#pragma once

#include "flashattn/params.h"
#include "kernels/common/philox.h"

namespace flashattn::detail {

struct FwdKernelParams : FwdParams {
  DropoutRng rng;
  // exp(x) is computed as exp2(x * log2(e)); scores are pre-multiplied by this.
  float scale_log2 = 0.f;
};

}  // namespace flashattn::detail

namespace flashattn::detail {

// Softcap, ALiBi, dropout or a non-positive scale need the general kernel path;
// plain attention folds the scale into exp2 and skips per-score work.
inline bool needs_score_mods(const FwdParams& p) {
  return p.softcap > 0.f || p.alibi_slopes != nullptr || p.dropout_p > 0.f ||
         !(p.softmax_scale > 0.f);
}

}  // namespace flashattn::detail

namespace flashattn::detail {

struct BwdKernelParams : BwdParams {
  DropoutRng rng;
  float scale_log2 = 0.f;      // as in FwdKernelParams
  float* row_dot = nullptr;    // d_i = dO_i . O_i, laid out like a contiguous LSE
  // The LSE in log2 units laid out as row_dot (+inf for a row that saw no key),
  // written by the row-dot pass where a kernel asks for it (the Hopper backward's
  // producer copies it with cp.async, no register round trip); null otherwise.
  float* lse_log2 = nullptr;
  // fp32 dQ accumulator, one row of head_dim_qk floats per row_dot slot; set when
  // dQ is summed with atomics (non-deterministic mode), null otherwise.
  float* dq_accum = nullptr;
};

}  // namespace flashattn::detail
