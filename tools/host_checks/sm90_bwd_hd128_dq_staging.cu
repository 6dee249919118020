// Build and run on the host (no GPU needed), from the repository root:
//   nvcc -std=c++17 -O2 --expt-relaxed-constexpr -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     tools/host_checks/sm90_bwd_hd128_dq_staging.cu -o /tmp/sm90_bwd_hd128_dq_staging && /tmp/sm90_bwd_hd128_dq_staging
// Host checks of the hd128 double-buffered dQ staging (sm90 backward v6; not run on a GPU):
//  1. shared storage: the two buffers fit, 1024-byte aligned, total within 232448 B;
//  2. offsets (dq_staging_offsets.h, shared with hd64): every dQ accumulator element
//     of both buffers lands where its group's TMA tile (columns [64g, 64g + 64)) has
//     it, once, in adjacent float2 pairs;
//  3. protocol: the kernel's per-step order (fence, leader's wait_group.read 0, barrier,
//     issue of step t - 1's reduce-add, stores of step t into buffer t & 1; after the
//     loop fence, barrier, last issue) replayed with reads that complete only when waited
//     for: every step's staging is reduce-added once, from the buffer it was written to,
//     after its writers' fence and a barrier, and never overwritten before its read is
//     known complete.
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
  static_assert(Tr::kDqStages == 2 && Tr::kDqSplitN && !Tr::kByProduct, "the hd128 path");
  using St = typename Tr::SharedStorage;
  const size_t dq_off = offsetof(St, dq), dq_bytes = sizeof(St{}.dq);
  constexpr int kTile = cosize_v<typename Tr::SmemLayoutdQ>;  // one group's TMA tile, floats
  constexpr int kBuf = kTile * Tr::kConsumerGroups;          // kernel's kDqBufElems
  printf("%s: smem %d bytes (limit 232448, spare %d); dq at %zu, %zu bytes = %d buffers x %d groups x %d bytes\n",
         name, Tr::kSmemBytes, 232448 - Tr::kSmemBytes, dq_off, dq_bytes, Tr::kDqStages, Tr::kConsumerGroups,
         int(kTile * sizeof(float)));
  printf("  offsets: k %zu v %zu q %zu dout %zu ds %zu dq %zu lse %zu row_dot %zu kv_full %zu empty %zu\n",
         offsetof(St, k), offsetof(St, v), offsetof(St, q), offsetof(St, dout), offsetof(St, ds), offsetof(St, dq),
         offsetof(St, lse_log2), offsetof(St, row_dot), offsetof(St, kv_full), offsetof(St, empty));
  if (Tr::kSmemBytes > 232448 || dq_off % 1024 || (kBuf * sizeof(float)) % 1024 ||
      dq_bytes != size_t(Tr::kDqStages) * kBuf * sizeof(float) || cosize_v<typename Tr::SmemLayoutdQMma> != kBuf)
    ++bad;

  bad += check_dq_staging_offsets<Tr>(arena, checks);
  printf("  staging offsets: %ld checks, %d bad so far\n", checks, bad);

  // Protocol replay (one group; the other is the same with its own tiles and leader).
  int pbad = 0;
  for (int n_steps = 0; n_steps <= 9; ++n_steps) {
    int content[2] = {-1, -1};       // which step's dQ each buffer holds
    bool published[2] = {false, false};  // written, then fenced by every writer and a barrier passed
    bool fenced[2] = {false, false};
    std::vector<int> outstanding;    // buffers with a reduce-add issued and its read not known complete
    std::vector<int> added;          // steps reduce-added, in order
    auto fence = [&]() { for (int b = 0; b < 2; ++b) if (content[b] >= 0) fenced[b] = true; };
    auto barrier = [&]() { for (int b = 0; b < 2; ++b) published[b] = fenced[b]; };
    auto issue = [&](int st) {
      const int b = st & 1;
      if (!published[b] || content[b] != st) ++pbad;
      added.push_back(content[b]);
      outstanding.push_back(b);
    };
    for (int step = 0; step < n_steps; ++step) {
      fence();                       // after the dS^T stores
      outstanding.clear();           // leader: tma_store_wait<0>, before barrier 0
      barrier();                     // barrier 0 (256 threads)
      if (step > 0) issue(step - 1); // under dQ / dK
      const int b = step & 1;        // stage_dq(acc_dq, step & 1)
      for (int o : outstanding) if (o == b) ++pbad;  // WAR: a read of b still pending
      content[b] = step;
      fenced[b] = published[b] = false;
    }
    if (n_steps > 0) {
      fence();
      barrier();                     // group_sync
      issue(n_steps - 1);
    }
    outstanding.clear();             // tma_store_wait<0>
    if (int(added.size()) != n_steps) ++pbad;
    for (int i = 0; i < int(added.size()); ++i) if (added[i] != i) ++pbad;
  }
  printf("  protocol replay (0-9 steps): %d bad\n", pbad);
  bad += pbad;
  printf("  %d bad\n", bad);
  return bad;
}

int main() {
  int bad = run<BwdTraits<128, cutlass::bfloat16_t>>("hd128 bf16");
  bad += run<BwdTraits<128, cutlass::half_t>>("hd128 fp16");
  return bad != 0;
}
