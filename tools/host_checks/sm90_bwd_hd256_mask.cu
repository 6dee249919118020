// Build and run on the host (no GPU needed), from the repository root:
//   nvcc -std=c++17 -O2 --expt-relaxed-constexpr -I include -I src \
//     -I third_party/cutlass/cutlass_library/source/include -I /usr/local/cuda/include/cccl \
//     tools/host_checks/sm90_bwd_hd256_mask.cu -o /tmp/sm90_bwd_hd256_mask && /tmp/sm90_bwd_hd256_mask
// Emulates the hd256 consumer's step loop and mask (64 keys, 64 rows): every (row, key) the kernel
// gives a nonzero P must be visible, and every visible pair must be visited with P nonzero.
#include <cstdio>
#include <vector>
#include "kernels/sm90/bwd_traits.h"
#include "kernels/sm90/mma_utils.cuh"
#include "kernels/common/mask.h"
using namespace cute;
using namespace flashattn::sm90;
using Tr = BwdTraits<256, cutlass::bfloat16_t>;
// Host copy of mma_utils.cuh's acc_rowcol (that one is __device__).
template <typename Layout>
auto rowcol(Layout acc) {
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                     make_layout(get<0, 0>(acc), get<0, 2>(acc), get<2>(acc)));
}
int main() {
  typename Tr::TiledMmaSdP mma;
  constexpr int BM = Tr::kBlockM, BN = Tr::kBlockN;
  // coordinates per thread: (mi, ni) -> (key, row)
  std::vector<std::vector<std::pair<int,int>>> co(128);
  int nrow = 0, ncol = 0;
  for (int t = 0; t < 128; ++t) {
    auto thr = mma.get_thread_slice(t);
    Tensor c = thr.partition_C(make_identity_tensor(Shape<Int<BN>, Int<BM>>{}));
    Tensor rc = make_tensor(c.data(), rowcol(c.layout()));
    nrow = size<0>(rc); ncol = size<1>(rc);
    for (int mi = 0; mi < size<0>(rc); ++mi)
      for (int ni = 0; ni < size<1>(rc); ++ni) co[t].push_back({get<0>(rc(mi, ni)), get<1>(rc(mi, ni))});
  }
  long pairs = 0, bad = 0;
  const int lens[] = {1, 2, 63, 64, 65, 127, 128, 129, 200, 257, 300};
  const int wins[] = {-1, 0, 1, 7, 63, 64, 65, 129, 300};
  for (int sq : lens) for (int sk : lens) for (int wl : wins) for (int wr : wins) {
    flashattn::detail::Mask mask(sq, sk, wl, wr);
    std::vector<char> seen(size_t(sq) * sk, 0);
    for (int nb = 0; nb * BN < sk; ++nb) {
      const int c0 = nb * BN, c_last = std::min(c0 + BN, sk) - 1;
      const int rb = int(mask.row_begin(c0)), re = int(mask.row_end(c_last));
      const int mmin = rb / BM, mmax = re > rb ? (re + BM - 1) / BM : mmin;
      for (int t = 0; t < 128; ++t) {
        int klo[2], khi[2];
        for (int mi = 0; mi < 2; ++mi) {
          const int j = c0 + co[t][mi * ncol].first;
          klo[mi] = j < sk ? int(mask.row_begin(j)) : 0;
          khi[mi] = j < sk ? int(mask.row_end(j)) : 0;
        }
        const int q0 = co[t][0].second;
        for (int mb = mmin; mb < mmax; ++mb) {
          const int m0 = mb * BM;
          const bool need = !mask.tile_full(m0, std::min(m0 + BM, sq), c0, c0 + BN);
          for (int mi = 0; mi < nrow; ++mi) for (int ni = 0; ni < ncol; ++ni) {
            const int key = c0 + co[t][mi * ncol + ni].first, il = co[t][mi * ncol + ni].second, row = m0 + il;
            bool nz;
            if (need) { const int q = il - q0; nz = q >= klo[mi] - m0 - q0 && q < khi[mi] - m0 - q0; }
            else nz = row < sq;  // LSE +inf past the sequence
            if (row >= sq || key >= sk) { if (nz && row < sq) ++bad; if (nz && key >= sk) ++bad; continue; }
            ++pairs;
            if (nz != mask.visible(row, key)) ++bad;
            if (nz) seen[size_t(row) * sk + key]++;
          }
        }
      }
    }
    for (int i = 0; i < sq; ++i) for (int j = 0; j < sk; ++j)
      if (mask.visible(i, j) != (seen[size_t(i) * sk + j] == 1)) ++bad;
  }
  printf("%ld pairs, %ld bad (rowcol %d x %d)\n", pairs, bad, nrow, ncol);
  return bad != 0;
}
