#include "accuracy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "host_tensor.h"

namespace facli {

double max_abs_error(const std::vector<float>& got, const std::vector<float>& ref) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (got.size() != ref.size()) return inf;
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float a = got[i], b = ref[i];
    if (std::isfinite(a) && std::isfinite(b)) {
      m = std::max(m, std::abs(static_cast<double>(a) - static_cast<double>(b)));
    } else if (!(std::isinf(a) && a == b)) {
      return inf;
    }
  }
  return m;
}

double max_abs_finite(const std::vector<float>& x) {
  double m = 0;
  for (float v : x)
    if (std::isfinite(v)) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

double rounding_atol(flashattn::DType dtype, const std::vector<float>& ref) {
  // Both sides are stored in the dtype, so a result one unit in the last place
  // from the reference is the least error a rounding can show: never less than
  // that unit at the largest |ref|, whatever the +0.3 probe gave.
  const int mant = dtype == flashattn::DType::bf16 ? 7 : dtype == flashattn::DType::f16 ? 10 : 23;
  const int min_exp = dtype == flashattn::DType::f16 ? -24 : -149;
  double m = 0, unit = 0;
  for (float r : ref) {
    if (!std::isfinite(r)) continue;
    const float e = round_to(dtype, r + 0.3f) - 0.3f - r;
    m = std::max(m, static_cast<double>(std::abs(e)));
    if (r != 0.f) unit = std::max(unit, std::ldexp(1.0, std::max(std::ilogb(r) - mant, min_exp)));
  }
  return std::max(2 * m, unit);
}

double fp32_output_bound(double r, double s) { return 1e-5 * std::max(1.0, r) + 2e-7 * s * r; }
double fp32_grad_bound(double r, double s) { return 1e-4 * std::max(1.0, r) + 2e-6 * s * r; }
double lse_bound(double r, double s) { return 1e-5 * std::max(1.0, r) + 2e-7 * s; }
double conditioned_bound(double naive_error, double atol) { return 2 * naive_error + atol; }
double summation_allowance(const std::vector<float>& mags) {
  return std::ldexp(max_abs_finite(mags), -23);
}
double stored_output_allowance(flashattn::DType dtype, const std::vector<float>& mags) {
  switch (dtype) {
    case flashattn::DType::f16: return std::ldexp(max_abs_finite(mags), -11);
    case flashattn::DType::bf16: return std::ldexp(max_abs_finite(mags), -8);
    default: return 0.0;
  }
}
double lowp_grad_bound(double r) { return 0.05 * std::max(1.0, r); }

}  // namespace facli
