// Causal attention on a tiny random problem through the installed library.
#include <flashattn/flashattn.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  namespace fa = flashattn;
  const int64_t B = 1, S = 33, H = 2, D = 16;
  std::mt19937 gen(0);
  std::normal_distribution<float> normal;
  std::vector<float> q(B * S * H * D), k(q.size()), v(q.size()), out(q.size()), lse(B * H * S);
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = normal(gen);
  auto view = [&](std::vector<float>& x) {
    return fa::TensorView::contiguous(x.data(), fa::DType::f32, {B, S, H, D});
  };
  auto lse_view = fa::TensorView::contiguous(lse.data(), fa::DType::f32, {B, H, S});
  fa::Options options;
  options.causal = true;
  fa::forward(view(q), view(k), view(v), view(out), &lse_view, options);
  // Row 0 of a causal mask sees only key 0: out equals v[0] exactly enough.
  for (int64_t d = 0; d < D; ++d)
    if (std::fabs(out[d] - v[d]) > 1e-6f) {
      std::printf("mismatch at %lld\n", static_cast<long long>(d));
      return 1;
    }
  try {
    options.dropout_p = 2.f;
    fa::forward(view(q), view(k), view(v), view(out), nullptr, options);
    return 1;
  } catch (const fa::Error& e) {
    std::printf("refused as expected: %s\n", e.what());
  }
  std::printf("flashattn %s consumer ok\n", fa::version());
  return 0;
}
