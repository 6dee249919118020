// The offset check both dQ-staging host checks share (sm90 backward, deferred
// double-buffered staging): for both buffers and every consumer thread, the kernel's
// staging address of each dQ accumulator element (the 256-thread dQ product's C
// partition over SmemLayoutdQMma, base + buffer * kDqBufElems as stage_dq forms it)
// equals the byte address CuTe's swizzled pointer gives that element (its column
// permuted where Tr::kDqColPerm, dq_layout.h) in the TMA tile
// its group's leader reduce-adds (SmemLayoutdQ at dq + (buffer * groups + group) *
// tile, as issue_dq forms it). Split by columns (hd128) a group owns kDqCols columns,
// split by rows (hd64) kDqRows rows; a group writes only its own tile, every element
// is written exactly once, and the float2 pairs are adjacent. Returns the failures.
#pragma once

#include <cstdio>
#include <vector>

#include "kernels/sm90/bwd_kernel.cuh"

// The kernel's staging store address of element e (stage_dq / the by-product
// staging): permuted columns (dq_layout.h) where Tr::kDqColPerm.
template <typename Tr, typename Offsets>
uint32_t kernel_dq_stage_offset(const Offsets& off, uint32_t base_elems, int e) {
  using namespace flashattn::sm90;
  if constexpr (Tr::kDqColPerm) {  // at hd96 the group's tile start goes into the pointer
    constexpr int kBits = Tr::kDqSwizzleBits;
    constexpr uint32_t kTile = cute::cosize_v<typename Tr::SmemLayoutdQ>;
    const uint32_t tile = kBits == 2 ? base_elems / kTile * kTile : 0;
    return tile * 4u + dq_stage_offset<kBits>(off, dq_stage_base<kBits>(base_elems - tile), e);
  } else {
    return swizzled_byte_offset<float, Tr::kDqSwizzleBits>(off, base_elems, e);
  }
}
// The column of the TMA tile that holds the group's column c.
template <typename Tr>
int staged_col(int c) { return Tr::kDqColPerm ? flashattn::sm90::dq_acc_col<Tr::kDqSwizzleBits>(c) : c; }

template <typename Tr>
int check_dq_staging_offsets(char* arena, long& checks) {
  using namespace cute;
  constexpr int kTile = cosize_v<typename Tr::SmemLayoutdQ>;  // one group's TMA tile, floats
  constexpr int kBuf = kTile * Tr::kConsumerGroups;          // kernel's kDqBufElems
  int bad = 0;
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
        const uint32_t b = kernel_dq_stage_offset<Tr>(off, base, e);  // the kernel's address
        // The owning group, and the element's place in that group's tile.
        const int owner = Tr::kDqSplitM ? row / Tr::kDqRows : col / Tr::kDqCols;
        const int r = Tr::kDqSplitM ? row - group * Tr::kDqRows : row;
        const int c = Tr::kDqSplitM ? col : col - group * Tr::kDqCols;
        if (owner != group) ++bad;
        // Where the leader's TMA reads it: its tile's swizzled pointer.
        Tensor sdq = make_tensor(
            make_smem_ptr(reinterpret_cast<float*>(arena) + (buf * Tr::kConsumerGroups + group) * kTile), ldq);
        const int want = int(reinterpret_cast<char*>(&sdq(r, staged_col<Tr>(c))) - arena);
        if (int(b) != want) {
          if (bad < 5) std::printf("  bad buf%d t%d e%d (%d,%d): %u vs %d\n", buf, t, e, row, col, b, want);
          ++bad;
        }
        if (b / 4 < hits.size()) hits[b / 4]++; else ++bad;
        if (e % 2 == 1 && b != kernel_dq_stage_offset<Tr>(off, base, e - 1) + 4) ++bad;  // float2 pairs
      }
    }
  for (int h : hits) if (h != 1) ++bad;
  return bad;
}
