// Build and run on the host (no GPU needed), from the repository root:
//   nvcc -std=c++17 -O2 --expt-relaxed-constexpr -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     tools/host_checks/sm90_bwd_hd128_dq_staging.cu -o /tmp/sm90_bwd_hd128_dq_staging && /tmp/sm90_bwd_hd128_dq_staging
// Host checks of the hd128 double-buffered dQ staging (sm90 backward v6; not run on a GPU):
//  1. shared storage: the two buffers fit, 1024-byte aligned, total within 232448 B;
//  2. offsets: for both buffers and every consumer thread (0-255, both groups), the
//     kernel's swizzled_byte_offset of each dQ accumulator element (the dQ product's C
//     partition over SmemLayoutdQMma, base + buffer * kDqBufElems) equals the byte
//     address CuTe's swizzled pointer gives that element in the TMA tile the leader
//     reduce-adds (SmemLayoutdQ at dq + (buffer * 2 + group) * tile); group g writes
//     only its own tile; every element of each buffer written exactly once; the pairs of
//     the 64-bit stores adjacent;
//  3. protocol: the kernel's per-step order (fence, leader's wait_group.read 0, barrier,
//     issue of step t - 1's reduce-add, stores of step t into buffer t & 1; after the
//     loop fence, barrier, last issue) replayed with reads that complete only when waited
//     for: every step's staging is reduce-added once, from the buffer it was written to,
//     after its writers' fence and a barrier, and never overwritten before its read is
//     known complete.
#include <cstdio>
#include <vector>
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

  typename Tr::TiledMmadQ mma_dq;
  auto lmma = typename Tr::SmemLayoutdQMma{};
  auto ldq = typename Tr::SmemLayoutdQ{};
  std::vector<int> hits(size_t(Tr::kDqStages) * kBuf, 0);
  for (int buf = 0; buf < Tr::kDqStages; ++buf)
    for (int t = 0; t < Tr::kConsumerThreads; ++t) {
      const int group = t / 128;
      auto thr = mma_dq.get_thread_slice(t);
      Tensor off = thr.partition_C(make_tensor(counting_iterator<int>{0}, lmma.layout_b()));
      Tensor cid = thr.partition_C(make_identity_tensor(Shape<Int<Tr::kBlockM>, Int<Tr::kHeadDim>>{}));
      const uint32_t base = uint32_t(off(0)) + uint32_t(buf * kBuf);  // the kernel's stage_dq
      for (int e = 0; e < size(off); ++e) {
        ++checks;
        const int row = get<0>(cid(e)), col = get<1>(cid(e));
        const uint32_t b = swizzled_byte_offset<float>(off, base, e);  // the kernel's function
        if (col / Tr::kDqCols != group) ++bad;                         // own columns = own tile
        // Where the leader's TMA reads (row, col): its tile's swizzled pointer.
        Tensor sdq = make_tensor(
            make_smem_ptr(reinterpret_cast<float*>(arena) + (buf * Tr::kConsumerGroups + group) * kTile), ldq);
        const int want = int(reinterpret_cast<char*>(&sdq(row, col - group * Tr::kDqCols)) - arena);
        if (int(b) != want) {
          if (bad < 5) printf("  bad buf%d t%d e%d (%d,%d): %u vs %d\n", buf, t, e, row, col, b, want);
          ++bad;
        }
        if (b / 4 < hits.size()) hits[b / 4]++; else ++bad;
        if (e % 2 == 1 && b != swizzled_byte_offset<float>(off, base, e - 1) + 4) ++bad;  // float2 pairs
      }
    }
  for (int h : hits) if (h != 1) ++bad;
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
