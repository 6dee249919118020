// Build and run on the host (no GPU needed), from the repository root:
//   nvcc -std=c++17 -O2 --expt-relaxed-constexpr -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     tools/host_checks/sm90_bwd_dq_perm.cu -o /tmp/sm90_bwd_dq_perm && /tmp/sm90_bwd_dq_perm
// Host checks of the Hopper backward's dQ staging stores with the accumulator's
// permuted columns (sm90/dq_layout.h), every head dim and both tile splits:
//  1. the XOR form's premise: a thread's base offset shares no bit with any of
//     its elements' offsets from it (so base + d = base ^ d);
//  2. placement: each element lands where the group's TMA tile holds its
//     permuted column (once; float2 pairs adjacent);
//  3. banks: shared-memory wavefronts of each warp's float2 store, counted per
//     half warp (a 64-bit store's unit) as the most distinct 4-byte words any
//     bank receives; the permuted layouts must reach the ideal 2;
//  4. the conversion's reads (DqPermCols: at(c), + kHalf) cover columns c..c+7.
#include <cstdio>
#include <map>
#include <set>
#include <vector>
#include "dq_staging_offsets.h"
using namespace cute;
using namespace flashattn::sm90;

alignas(4096) static char arena[1 << 18];

template <typename Tr>
int run(const char* name) {
  int bad = 0;
  long checks = 0;
  constexpr int kTile = cosize_v<typename Tr::SmemLayoutdQ>;
  constexpr int kGroups = Tr::kByProduct ? 1 : Tr::kConsumerGroups;  // groups in one product's view
  typename Tr::TiledMmadQ mma_dq;
  auto lmma = typename Tr::SmemLayoutdQMma{};
  auto ldq = typename Tr::SmemLayoutdQ{};
  long wavefronts = 0, stores = 0;
  std::vector<int> hits(size_t(kTile) * Tr::kConsumerGroups, 0);
  for (int t = 0; t < 128 * kGroups; ++t) {
    const int group = Tr::kByProduct ? 0 : t / 128;
    auto thr = mma_dq.get_thread_slice(t);
    Tensor off = thr.partition_C(make_tensor(counting_iterator<int>{0}, lmma.layout_b()));
    Tensor cid = thr.partition_C(make_identity_tensor(Shape<Int<Tr::kBlockM>, Int<(Tr::kByProduct ? Tr::kDqCols : Tr::kHeadDim)>>{}));
    const uint32_t base = uint32_t(off(0));
    Tensor sdq = make_tensor(make_smem_ptr(reinterpret_cast<float*>(arena) + group * kTile), ldq);
    for (int e = 0; e < size(off); ++e) {
      ++checks;
      const uint32_t d = uint32_t(off(e) - off(0)) * 4u;
      const uint32_t in_tile = Tr::kDqSwizzleBits == 3 ? base : base % uint32_t(kTile);  // hd96: within the group's tile
      if (Tr::kDqColPerm && ((in_tile * 4u) & d)) {
        if (bad < 5) printf("  %s: t%d e%d base %u and offset %u share bits\n", name, t, e, base * 4u, d);
        ++bad;
      }
      const int row = get<0>(cid(e)), col = get<1>(cid(e));
      const int r = Tr::kDqSplitM && !Tr::kByProduct ? row - group * Tr::kDqRows : row;
      const int c = Tr::kDqSplitN && !Tr::kByProduct ? col - group * Tr::kDqCols : col;
      const uint32_t b = kernel_dq_stage_offset<Tr>(off, base, e);
      const int want = int(reinterpret_cast<char*>(&sdq(r, staged_col<Tr>(c))) - arena);
      if (int(b) != want) {
        if (bad < 5) printf("  %s: t%d e%d (%d,%d) at %u, TMA tile has it at %d\n", name, t, e, row, col, b, want);
        ++bad;
      }
      if (b / 4 < hits.size()) hits[b / 4]++; else ++bad;
      if (e % 2 == 1 && b != kernel_dq_stage_offset<Tr>(off, base, e - 1) + 4) ++bad;
    }
  }
  for (size_t i = 0; i < size_t(kTile) * kGroups; ++i) if (hits[i] != 1) ++bad;
  // Banks, per warp and float2 store.
  for (int w = 0; w < 4 * kGroups; ++w) {
    auto off0 = mma_dq.get_thread_slice(32 * w).partition_C(make_tensor(counting_iterator<int>{0}, lmma.layout_b()));
    for (int e = 0; e < size(off0); e += 2) {
      ++stores;
      for (int half = 0; half < 2; ++half) {
        std::map<int, std::set<uint32_t>> bank_words;
        for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
          auto thr = mma_dq.get_thread_slice(32 * w + lane);
          Tensor off = thr.partition_C(make_tensor(counting_iterator<int>{0}, lmma.layout_b()));
          const uint32_t b = kernel_dq_stage_offset<Tr>(off, uint32_t(off(0)), e);
          for (uint32_t word = b / 4; word < b / 4 + 2; ++word) bank_words[word % 32].insert(word);
        }
        size_t most = 0;
        for (auto& kv : bank_words) most = std::max(most, kv.second.size());
        wavefronts += long(most);
      }
    }
  }
  const double per_store = double(wavefronts) / double(stores);
  if (Tr::kDqColPerm && wavefronts != 2 * stores) ++bad;
  // The conversion's reads: columns c..c+3 and c+4..c+7 (c % 8 == 0).
  if constexpr (Tr::kDqColPerm)
    for (int c = 0; c < Tr::kHeadDim; c += 8) {
      using Cols = DqPermCols<Tr::kDqSwizzleBits>;
      const int lo_at = Cols::at(c), hi_at = lo_at + Cols::kHalf;
      if (Tr::kDqSwizzleBits == 3 && lo_at != (c & ~31) + ((c & 31) >> 1)) ++bad;
      for (int u = 0; u < 4; ++u) {
        ++checks;
        if (dq_acc_col<Tr::kDqSwizzleBits>(c + u) != lo_at + u || dq_acc_col<Tr::kDqSwizzleBits>(c + 4 + u) != hi_at + u) ++bad;
      }
    }
  printf("%s: col perm %d, %ld checks, float2 stores %.2f wavefronts each (ideal 2), %d bad\n", name,
         int(Tr::kDqColPerm), checks, per_store, bad);
  return bad;
}

int main() {
  int bad = 0;
  bad += run<BwdTraits<64, cutlass::bfloat16_t>>("hd64 (rows)");
  bad += run<BwdTraits<96, cutlass::bfloat16_t>>("hd96 (columns, 64-byte rows)");
  bad += run<BwdTraits<128, cutlass::bfloat16_t>>("hd128 (columns)");
  bad += run<BwdTraits<192, cutlass::bfloat16_t>>("hd192 (by product)");
  bad += run<BwdTraits<256, cutlass::bfloat16_t>>("hd256 (by product)");
  bad += run<BwdTraits<256, cutlass::half_t>>("hd256 fp16 (by product)");
  printf(bad ? "FAILED\n" : "PASSED\n");
  return bad != 0;
}
