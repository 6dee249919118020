// The naive attention of the accuracy rule, done in the inputs' own precision:
// S = scale q.k rounded to the dtype (each score modifier rounded again), softmax
// in fp32, P rounded to the dtype, O = P V accumulated in fp32 then rounded; the
// backward likewise (dP, dS rounded, products accumulated in fp32, results
// rounded). For fp32 nothing is rounded beyond fp32 arithmetic. Its error against
// the float64 reference measures how well-conditioned a problem is: a result
// may be off by twice that (plus an atol). The forward also reports the largest
// score magnitude, which the fp32 bounds use.
#pragma once

#include <vector>

#include "check_config.h"

namespace facli {

// Inputs decoded to float in their tensor layout; alibi as [Hq] or [B, Hq].
struct NaiveInputs {
  const std::vector<float>& q;
  const std::vector<float>& k;
  const std::vector<float>& v;
  const std::vector<float>& alibi;
};

struct NaiveForward {
  std::vector<float> out;    // layout of out
  double max_abs_score = 0;  // max over visible pairs of |scale q.k| and |final logit|
};

struct NaiveBackward {
  std::vector<float> dq, dk, dv;  // layouts of q, k, v
  // Per element, the sum of |terms| that form it (|dS| taken as p (sum |dO v| +
  // sum |dO O|), the terms of dP and D before they cancel):
  // fp32 rounding can move a gradient by about eps32 times this, however small
  // the gradient itself is after cancellation.
  std::vector<float> mag_dq, mag_dk, mag_dv;
  // The part of mag_dq, mag_dk that comes through D (dV has none).
  std::vector<float> mag_d_dq, mag_d_dk;
};

NaiveForward naive_forward(const CheckConfig& c, const NaiveInputs& in);
// `out` is the naive forward's; dout in the layout of out.
NaiveBackward naive_backward(const CheckConfig& c, const NaiveInputs& in,
                             const std::vector<float>& out, const std::vector<float>& dout);

}  // namespace facli
