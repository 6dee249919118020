// The contract's accuracy rule as numbers: max errors that treat matching
// infinities as equal and any unmatched NaN/Inf as an infinite error, and the
// bounds each result must meet.
#pragma once

#include <string>
#include <vector>

#include <flashattn/types.h>

namespace facli {

// max_i |a_i - b_i|; 0 where both are the same infinity (e.g. LSE of a fully
// masked row), +inf where exactly one is non-finite or either is NaN.
double max_abs_error(const std::vector<float>& got, const std::vector<float>& ref);
// max |x| over finite x (0 when none).
double max_abs_finite(const std::vector<float>& x);
// The dtype's rounding error at the values' magnitude: 2 max |rd(x + 0.3) - 0.3 - x|,
// at least one unit in the last place of the largest |x|.
double rounding_atol(flashattn::DType dtype, const std::vector<float>& ref);

// fp32 bounds: outputs 1e-5 max(1, R) + 2e-7 max|s| R, gradients 1e-4 max(1, R) + 2e-6 max|s| R,
// where R = max|ref|. LSE (fp32 for every dtype): 1e-5 max(1, R) + 2e-7 max|s|.
double fp32_output_bound(double max_ref, double max_score);
double fp32_grad_bound(double max_ref, double max_score);
double lse_bound(double max_ref, double max_score);
// 2 * the naive same-precision computation's error + atol: the fp16/bf16 output
// bound, and an allowance for ill-conditioned problems everywhere.
double conditioned_bound(double naive_error, double atol);
// eps32 (2^-23) times the largest sum of |terms| behind a result: the rounding
// that any fp32 summation order may show, even where the exact result is ~0.
double summation_allowance(const std::vector<float>& term_magnitudes);
// The backward reads D = dO . O from the output as stored (fp16/bf16 rounded),
// which the float64 reference does not: half the dtype's epsilon times the
// largest sum of |terms| that D's part of dS carries into a gradient. 0 for fp32
// (summation_allowance covers it there).
double stored_output_allowance(flashattn::DType dtype, const std::vector<float>& d_term_magnitudes);
// fp16/bf16 gradients, the simpler bound: 0.05 max(1, R).
double lowp_grad_bound(double max_ref);

// One compared quantity.
struct Verdict {
  std::string name;
  double error = 0, bound = 0;
  bool ok() const { return error <= bound; }  // false for NaN errors too
};

}  // namespace facli
