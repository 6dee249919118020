// Build and run on the host (no GPU needed), from the repository root:
//   nvcc -std=c++17 -O1 --expt-relaxed-constexpr -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     tools/host_checks/sm80_bwd_lse_slots.cu -o /tmp/sm80_bwd_lse_slots && /tmp/sm80_bwd_lse_slots
// Host check of the sm80 backward's LSE / d slots (BwdTraits::lse_slot) for every
// tile shape whose kernels read them (early_p: 128-key blocks), on every tier:
//  1. lse_slot is a permutation of the step's query columns;
//  2. for every thread, the columns of its S^T fragment (in the order the kernel
//     walks them, ni) sit at lse_slot(first column) + ni, a 16-byte-aligned run.
#include <cstdio>
#include <set>
#include <cutlass/numeric_types.h>
#include "kernels/sm80/bwd_traits.h"
using namespace cute;
using namespace flashattn::sm80;

// tile_utils.cuh's acc_rowcol, on the host.
template <typename Layout>
auto rowcol(Layout acc) {
  auto l = logical_divide(acc, Shape<_2>{});
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<2>(l)));
}

template <int D, SmemTier kTier>
int check() {
  using Tr = BwdTraits<D, cutlass::bfloat16_t, kTier>;
  if constexpr (!Tr::early_p(false)) {
    return 0;
  } else {
    int bad = 0;
    std::set<int> slots;
    for (int c = 0; c < Tr::kBlockM; ++c) slots.insert(Tr::lse_slot(c));
    if (int(slots.size()) != Tr::kBlockM || *slots.begin() != 0 || *slots.rbegin() != Tr::kBlockM - 1) ++bad;
    typename Tr::TiledMmaSdP mma;
    for (int t = 0; t < Tr::kThreadsKV; ++t) {
      auto thr = mma.get_thread_slice(t);
      Tensor c = thr.partition_C(make_identity_tensor(Shape<Int<Tr::kBlockN>, Int<Tr::kBlockM>>{}));
      Tensor coord = make_tensor(c.data(), rowcol(c.layout()));
      const int base = Tr::lse_slot(get<1>(coord(0, 0)));
      if (base % 4 != 0 || int(size<1>(coord)) != Tr::kColsPerThread) ++bad;
      for (int ni = 0; ni < size<1>(coord); ++ni)
        if (Tr::lse_slot(get<1>(coord(0, ni))) != base + ni) ++bad;
    }
    std::printf("hd%d tier %d (%d x %d, %d warps): %s\n", D, int(kTier), Tr::kBlockM, Tr::kBlockN, Tr::kWarpsKV,
                bad ? "MISMATCH" : "ok");
    return bad;
  }
}

template <SmemTier kTier>
int check_tier() {
  return check<64, kTier>() + check<96, kTier>() + check<128, kTier>() + check<192, kTier>() + check<256, kTier>();
}

int main() {
  const int bad = check_tier<SmemTier::compact>() + check_tier<SmemTier::standard>() + check_tier<SmemTier::large>();
  std::printf(bad ? "FAILED\n" : "all slots ok\n");
  return bad ? 1 : 0;
}
