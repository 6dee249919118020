// Build and run on the host (no GPU needed), from the repository root:
//   nvcc -std=c++17 -O2 --expt-relaxed-constexpr -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     tools/host_checks/sm90_bwd_hd256_layouts.cu -o /tmp/sm90_bwd_hd256_layouts && /tmp/sm90_bwd_hd256_layouts
// Host checks of the hd256 by-product layouts (not run on a GPU).
#include <cstdio>
#include <map>
#include <set>
#include <vector>
#include "kernels/sm90/bwd_traits.h"
#include "kernels/sm90/mma_utils.cuh"
#include "dq_staging_offsets.h"
using namespace cute;
using namespace flashattn::sm90;

template <typename T, typename Offsets>
uint32_t swz(const Offsets& off, uint32_t base, int e) {
  const uint32_t b = (base + uint32_t(off(e) - off(0))) * uint32_t(sizeof(T));
  return b ^ ((b >> 3) & 0x70u);
}

alignas(4096) static char arena[1 << 17];
template <typename Tr>
int run(const char* name) {
  using Element = typename Tr::Element;
  int bad = 0;
  long checks = 0;
  printf("%s: kBlockM %d kBlockN %d smem %d bytes (limit 232448), byproduct %d\n", name, Tr::kBlockM, Tr::kBlockN,
         Tr::kSmemBytes, int(Tr::kByProduct));
  typename Tr::SharedStorage* st = nullptr;
  printf("  offsets: k %zu v %zu q %zu dout %zu ds %zu p %zu lse %zu row_dot %zu kv_full %zu empty %zu\n",
         (size_t)&st->k, (size_t)&st->v, (size_t)&st->q, (size_t)&st->dout, (size_t)&st->ds, (size_t)&st->p,
         (size_t)&st->lse_log2, (size_t)&st->row_dot, (size_t)&st->kv_full, (size_t)&st->empty);
  // Q stage stride.
  auto lq = typename Tr::SmemLayoutQ{};
  for (int s = 0; s < Tr::kStages; ++s)
    for (int r = 0; r < Tr::kBlockM; ++r)
      for (int c = 0; c < Tr::kHeadDim; ++c) {
        ++checks;
        int o = lq(r, c, s), o0 = lq(r, c, 0);
        if (o != o0 + s * Tr::kBlockM * Tr::kHeadDim) ++bad;
      }
  // dS^T stores: partition of the S^T accumulator over SmemLayoutdSt (unswizzled offsets), the
  // kernel's swizzled byte offsets against CuTe's swizzled layout; the element (key, row) must land
  // where the dQ product reads sdS(row, key).
  typename Tr::TiledMmaSdP mma_sdp;
  auto ldst = typename Tr::SmemLayoutdSt{};
  auto lds = typename Tr::SmemLayoutdS{};
  std::vector<int> hits(cosize(lds) * sizeof(Element), 0);
  for (int t = 0; t < 128; ++t) {
    auto thr = mma_sdp.get_thread_slice(t);
    Tensor off = thr.partition_C(make_tensor(counting_iterator<int>{0}, ldst.layout_b()));
    Tensor cid = thr.partition_C(make_identity_tensor(Shape<Int<Tr::kBlockN>, Int<Tr::kBlockM>>{}));
    Tensor offb = off(_, _, _, 0);
    const uint32_t base = uint32_t(offb(0));
    for (int e = 0; e < size(offb); ++e) {
      ++checks;
      const int key = get<0>(cid(e)), row = get<1>(cid(e));
      const uint32_t b = swz<Element>(offb, base, e);
      Tensor sds = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(arena)), lds);
      const int want = int(reinterpret_cast<char*>(&sds(row, key, 0)) - arena);  // CuTe's swizzled pointer
      if (int(b) != want) { if (bad < 5) printf("  dS bad t%d e%d key%d row%d %u vs %d\n", t, e, key, row, b, want); ++bad; }
      hits[b] += 1;
      if (e % 2 == 1 && swz<Element>(offb, base, e) != swz<Element>(offb, base, e - 1) + sizeof(Element)) ++bad;  // pair adjacent
    }
  }
  for (int i = 0; i < cosize(lds); ++i) if (hits[i * sizeof(Element)] != 1) ++bad;
  printf("  dS^T: %d bad so far\n", bad);
  // dQ staging: the group's dQ product C partition over SmemLayoutdQMma, against the TMA tile SmemLayoutdQ.
  typename Tr::TiledMmadQ mma_dq;
  auto lmma = typename Tr::SmemLayoutdQMma{};
  auto ldq = typename Tr::SmemLayoutdQ{};
  std::vector<int> qh(cosize(ldq), 0);
  for (int t = 0; t < 128; ++t) {
    auto thr = mma_dq.get_thread_slice(t);
    Tensor off = thr.partition_C(make_tensor(counting_iterator<int>{0}, lmma.layout_b()));
    Tensor cid = thr.partition_C(make_identity_tensor(Shape<Int<Tr::kBlockM>, Int<Tr::kDqCols>>{}));
    const uint32_t base = uint32_t(off(0));
    for (int e = 0; e < size(off); ++e) {
      ++checks;
      const uint32_t b = kernel_dq_stage_offset<Tr>(off, base, e);
      Tensor sdq = make_tensor(make_smem_ptr(reinterpret_cast<float*>(arena)), ldq);
      const int want = int(reinterpret_cast<char*>(&sdq(get<0>(cid(e)), staged_col<Tr>(get<1>(cid(e))))) - arena);
      if (int(b) != want) { if (bad < 5) printf("  dQ bad t%d e%d %u vs %d\n", t, e, b, want); ++bad; }
      if (b / 4 < qh.size()) qh[b / 4]++;
      if (e % 2 == 1 && b != kernel_dq_stage_offset<Tr>(off, base, e - 1) + 4) ++bad;
    }
  }
  for (int x : qh) if (x != 1) ++bad;
  printf("  staging bytes %zu = one Q stage %zu\n", cosize(ldq) * sizeof(float), size_t(Tr::kBlockM * Tr::kHeadDim * sizeof(Element)));
  // P^T exchange: the acc layout sizes.
  Tensor acc = partition_fragment_C(mma_sdp, Shape<Int<Tr::kBlockN>, Int<Tr::kBlockM>>{});
  Tensor acc_kv = partition_fragment_C(typename Tr::TiledMmadKV{}, Shape<Int<Tr::kBlockN>, Int<Tr::kHeadDim>>{});
  Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<Tr::kBlockM>, Int<Tr::kDqCols>>{});
  printf("  per thread: S^T/dP^T %d, dV/dK %d, dQ %d floats\n", int(size(acc)), int(size(acc_kv)), int(size(acc_dq)));
  printf("  %ld checks, %d bad\n", checks, bad);
  return bad;
}

int main() {
  int bad = run<BwdTraits<256, cutlass::bfloat16_t>>("hd256 bf16");
  bad += run<BwdTraits<256, cutlass::half_t>>("hd256 fp16");
  return bad != 0;
}
