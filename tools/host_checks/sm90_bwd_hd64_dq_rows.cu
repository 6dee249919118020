// Build and run on the host (no GPU needed), from the repository root:
//   nvcc -std=c++17 -O2 --expt-relaxed-constexpr -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     tools/host_checks/sm90_bwd_hd64_dq_rows.cu -o /tmp/sm90_bwd_hd64_dq_rows && /tmp/sm90_bwd_hd64_dq_rows
// Host checks of hd64's dQ split by rows (sm90 backward v8):
//  1. shared storage within 232448 B, the staging 1024-byte aligned, two dS buffers and
//     two staging buffers (the deferred staging of bwd_kernel.cuh);
//  2. offsets (dq_staging_offsets.h, shared with hd128): every dQ accumulator element
//     of both buffers lands where its group's TMA tile (rows [64g, 64g + 64)) has it,
//     once, in adjacent float2 pairs.
//  The step protocol of the deferred staging is hd128's, replayed by
//  sm90_bwd_hd128_dq_staging.cu.
#include <cstdio>
#include <vector>
#include "dq_staging_offsets.h"
#include "kernels/sm90/bwd_kernel.cuh"
using namespace cute;
using namespace flashattn::sm90;

alignas(4096) static char arena[1 << 17];

template <typename Tr>
int run(const char* name) {
  int bad = 0;
  long checks = 0;
  static_assert(Tr::kDqSplitM && Tr::kDqStages == 2 && Tr::kDsStages == 2, "the hd64 path");
  using St = typename Tr::SharedStorage;
  constexpr int kTile = cosize_v<typename Tr::SmemLayoutdQ>;  // one group's TMA tile, floats
  constexpr int kBuf = kTile * Tr::kConsumerGroups;          // kernel's kDqBufElems
  printf("%s: smem %d bytes (limit 232448, spare %d); dq at %zu, %zu bytes; ds %zu bytes\n", name, Tr::kSmemBytes,
         232448 - Tr::kSmemBytes, offsetof(St, dq), sizeof(St{}.dq), sizeof(St{}.ds));
  if (Tr::kSmemBytes > 232448 || offsetof(St, dq) % 1024 || (kTile * sizeof(float)) % 1024 ||
      sizeof(St{}.dq) != size_t(Tr::kDqStages) * kBuf * sizeof(float) ||
      cosize_v<typename Tr::SmemLayoutdQMma> != kBuf || size(typename Tr::SmemLayoutdQ{}) != 64 * 64)
    ++bad;
  bad += check_dq_staging_offsets<Tr>(arena, checks);
  printf("  staging offsets: %ld checks, %d bad\n", checks, bad);
  return bad;
}

int main() {
  int bad = run<BwdTraits<64, cutlass::bfloat16_t>>("hd64 bf16");
  bad += run<BwdTraits<64, cutlass::half_t>>("hd64 fp16");
  return bad != 0;
}
