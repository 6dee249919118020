// Times the sm80 forward kernel under several tile shapes per head dim on the
// contract's grid, so the tile table in kernels/sm80/traits.h rests on
// measurements. Build: nvcc (see bench/gpu/README in docs/kernel_notes.md);
// run on the GPU: ./tile_sweep [N ...] (-DFLASHATTN_SWEEP_SHORT: the table's
// shapes only, for quick A/B builds). Outputs compare against the first
// variant of each head dim (max |diff| should be ~1e-3, rounding only).
#include "sweep_common.h"
#include "kernels/sm80/fwd_launch.cuh"

using Elem = cutlass::bfloat16_t;
using sweep::Problem;

template <int D, int M, int N, int W>
void run(const Problem& pr, const char* tag, std::vector<uint16_t>* first) {
  using Traits = flashattn::sm80::FwdTraits<D, Elem, M, N, W>;
  const auto p = sweep::params(pr);
  const double ms = sweep::median_ms([&] { return flashattn::sm80::launch_fwd<Traits, false, false>(p, 0); }, 3, 10);
  bool finite;
  const double diff = sweep::diff_from_first(pr, first, &finite);
  std::printf("D=%3lld causal=%d N=%6lld  %-14s %7.1f TFLOP/s  (%.3f ms, regs/spill see ptxas)  max|diff| %.1e%s\n",
              (long long)pr.D, pr.causal, (long long)pr.N, tag, pr.flops() / ms / 1e9, ms, diff,
              finite ? "" : "  NON-FINITE OUTPUT");
}

int main(int argc, char** argv) {
  sweep::for_each_problem(sweep::seqlens(argc, argv), [](const Problem& pr) {
    const int64_t D = pr.D;
    std::vector<uint16_t> first;
#if defined(FLASHATTN_SWEEP_SHORT)  // the candidate shapes only (quick A/B builds of a kernel change)
    if (D == 64) {
      run<64, 128, 64, 4>(pr, "128x64 w4", &first);
      run<64, 128, 128, 4>(pr, "128x128 w4", &first);
    } else if (D == 128) {
      run<128, 128, 32, 4>(pr, "128x32 w4", &first);
      run<128, 128, 64, 4>(pr, "128x64 w4", &first);
    } else {
      run<256, 128, 64, 8>(pr, "128x64 w8", &first);
    }
#else
    if (D == 64) {
      run<64, 128, 128, 4>(pr, "128x128 w4", &first);
      run<64, 128, 64, 4>(pr, "128x64 w4", &first);
      run<64, 64, 128, 4>(pr, "64x128 w4", &first);
      run<64, 128, 128, 8>(pr, "128x128 w8", &first);
    } else if (D == 128) {
      run<128, 128, 64, 4>(pr, "128x64 w4", &first);
      run<128, 128, 32, 4>(pr, "128x32 w4", &first);
      run<128, 64, 64, 4>(pr, "64x64 w4", &first);
      run<128, 128, 64, 8>(pr, "128x64 w8", &first);
      run<128, 128, 128, 8>(pr, "128x128 w8", &first);
    } else {
      run<256, 128, 64, 8>(pr, "128x64 w8", &first);
      run<256, 64, 64, 4>(pr, "64x64 w4", &first);
      run<256, 128, 32, 8>(pr, "128x32 w8", &first);
      run<256, 64, 32, 4>(pr, "64x32 w4", &first);
    }
#endif
  });
  return 0;
}
