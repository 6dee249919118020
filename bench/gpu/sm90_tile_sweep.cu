// Times the Hopper (sm90a) forward kernel under several tile configurations per
// head dim (query rows = 64 x consumer warp groups, keys per tile, K/V stages)
// on the contract's grid, so the table in kernels/sm90/fwd_traits.h rests on
// measurements. The first configuration of each head dim is the table's; the
// others are compared with it (max |diff| should be ~1e-3 or below: rounding).
//
// Build (repository root, one nvcc, ~4 minutes on 2 cores):
//   nvcc -std=c++17 -O3 -DNDEBUG -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED --expt-relaxed-constexpr --use_fast_math \
//     -gencode arch=compute_90a,code=sm_90a -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     -Xptxas -v bench/gpu/sm90_tile_sweep.cu -o build/sm90_tile_sweep 2>&1 | grep -E 'spill|registers|error'
// Run on the H200: build/sm90_tile_sweep [N ...]   (default N = 512 2048 16384;
//   B = 16384 / N, H = 2048 / D, bf16, causal and not; -DSWEEP_HDIM=64 builds one
//   head dim's candidates alone)
#include "sweep_common.h"
#include "kernels/sm90/fwd_launch.cuh"

using Elem = cutlass::bfloat16_t;
using sweep::Problem;

template <int D, int M, int N, int S, int SW = -1>
void run(const Problem& pr, std::vector<uint16_t>* first) {
  using Traits = flashattn::sm90::FwdTraits<D, Elem, M, N, S, SW>;
  const auto p = sweep::params(pr);
  const double ms = sweep::median_ms([&] { return flashattn::sm90::launch_fwd<Traits>(p, 0); }, 3, 15);
  bool finite;
  const double diff = sweep::diff_from_first(pr, first, &finite);
  char tag[64];
  std::snprintf(tag, sizeof tag, "%dx%d %dwg %dst%s %c%c%c", M, N, M / 64, S, Traits::kOInQ ? " o-in-q" : "",
                Traits::kLateP ? 'L' : '-', Traits::kUniformGroup ? 'U' : '-', Traits::kQDescInLoop ? 'Q' : '-');
  std::printf("D=%3d causal=%d N=%6lld  %-22s %7.1f TFLOP/s  (%.3f ms, smem %3d KiB)  max|diff| %.1e%s\n", D,
              int(pr.causal), (long long)pr.N, tag, pr.flops() / ms / 1e9, ms, Traits::kSmemBytes / 1024, diff,
              finite ? "" : "  NON-FINITE OUTPUT");
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  sweep::for_each_problem(sweep::seqlens(argc, argv), [](const Problem& pr) {
    const int64_t D = pr.D;
#ifdef SWEEP_HDIM  // -DSWEEP_HDIM=64: one head dim only
    if (D != SWEEP_HDIM) return;
#endif
    std::vector<uint16_t> first;
    // <head dim, query rows (64 per consumer group), keys per tile, stages[, switches]>;
    // the first of each head dim is the table's entry. Switches (the tag's LUQ):
    // 1 late_p | 2 uniform_group | 4 q_desc_in_loop; left out, the table's for the shape.
#ifdef SWEEP_SHORT_CAUSAL
    // -DSWEEP_SHORT_CAUSAL: narrower key tiles for short causal calls (issue 5's N = 512 /
    // 1024 causal points sit at 0.92-0.97x cuDNN on the H100, session 47): a diagonal
    // tile of 64 keys masks half the products of one of 128. Run with N = 512 1024 2048.
    if (D == 64) {
      run<64, 128, 128, 2>(pr, &first);  // the short causal blocks (-U-)
      run<64, 128, 64, 2>(pr, &first);
      run<64, 128, 64, 3>(pr, &first);
      run<64, 128, 96, 2>(pr, &first);
      run<64, 192, 128, 2>(pr, &first);  // the table's entry
    } else if (D == 128) {
      run<128, 128, 128, 2>(pr, &first);
      run<128, 128, 64, 2>(pr, &first);
      run<128, 128, 64, 3>(pr, &first);
      run<128, 128, 96, 2>(pr, &first);
    } else if (D == 256) {
      run<256, 128, 64, 2>(pr, &first);
      run<256, 128, 32, 2>(pr, &first);
      run<256, 128, 48, 2>(pr, &first);
    }
    return;
#endif
    if (D == 64) {
      run<64, 192, 128, 2>(pr, &first);     // -UQ
      run<64, 192, 128, 2, 7>(pr, &first);  // LUQ (late_p spilled before uniform_group / q_desc_in_loop)
      run<64, 128, 128, 2>(pr, &first);     // -U- (the short causal blocks)
      run<64, 128, 128, 2, 7>(pr, &first);
    } else if (D == 128) {
      run<128, 128, 128, 2>(pr, &first);
      run<128, 128, 192, 2>(pr, &first);  // long_tile_config's entry
      // 176 keys with the long entry's switches: session 43's best at non-causal 8k
      // (641 against 617-633 TFLOP/s on the H100), not elsewhere.
      run<128, 128, 176, 2, 7>(pr, &first);
    } else if (D == 192) {
      run<192, 128, 112, 2>(pr, &first);     // LU-
      run<192, 128, 112, 2, 7>(pr, &first);  // LUQ
    } else {
      run<256, 128, 64, 2>(pr, &first);     // LU-
      run<256, 128, 64, 2, 7>(pr, &first);  // LUQ
      run<256, 128, 80, 2>(pr, &first);     // long_tile_config's entry, LU-
      run<256, 128, 80, 2, 7>(pr, &first);
    }
  }, {64, 128, 192, 256});
  return 0;
}
