// Build and run on the host (no GPU needed), from the repository root:
//   nvcc -std=c++17 -O2 --expt-relaxed-constexpr -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     tools/host_checks/sm90_bwd_hd64_dq_rows.cu -o /tmp/sm90_bwd_hd64_dq_rows && /tmp/sm90_bwd_hd64_dq_rows
// Host checks of hd64's dQ split by rows (sm90 backward v8):
//  1. shared storage within 232448 B, the staging 1024-byte aligned, two dS buffers and
//     two staging buffers (the deferred staging of bwd_kernel.cuh);
//  2. offsets: for both buffers and every consumer thread (0-255), the kernel's
//     swizzled_byte_offset of each dQ accumulator element (the 256-thread dQ product's C
//     partition over SmemLayoutdQMma, base + buffer * kDqBufElems as stage_dq forms it)
//     equals the byte address CuTe's swizzled pointer gives that element in the TMA tile
//     its group's leader reduce-adds (SmemLayoutdQ at dq + (buffer * 2 + group) * tile,
//     rows [64g, 64g + 64), as issue_dq forms it); a group writes only its own rows;
//     every element written exactly once; the float2 pairs adjacent.
//  The step protocol of the deferred staging is hd128's, replayed by
//  sm90_bwd_hd128_dq_staging.cu.
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
        const uint32_t b = swizzled_byte_offset<float>(off, base, e);
        if (row / Tr::kDqRows != group) ++bad;  // own rows = own tile
        Tensor sdq = make_tensor(
            make_smem_ptr(reinterpret_cast<float*>(arena) + (buf * Tr::kConsumerGroups + group) * kTile), ldq);
        const int want = int(reinterpret_cast<char*>(&sdq(row - group * Tr::kDqRows, col)) - arena);
        if (int(b) != want) {
          if (bad < 5) printf("  bad buf%d t%d e%d (%d,%d): %u vs %d\n", buf, t, e, row, col, b, want);
          ++bad;
        }
        if (b / 4 < hits.size()) hits[b / 4]++; else ++bad;
        if (e % 2 == 1 && b != swizzled_byte_offset<float>(off, base, e - 1) + 4) ++bad;
      }
    }
  for (int h : hits) if (h != 1) ++bad;
  printf("  staging offsets: %ld checks, %d bad\n", checks, bad);
  return bad;
}

int main() {
  int bad = run<BwdTraits<64, cutlass::bfloat16_t>>("hd64 bf16");
  bad += run<BwdTraits<64, cutlass::half_t>>("hd64 fp16");
  return bad != 0;
}
