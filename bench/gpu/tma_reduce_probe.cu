// Probe (session 14, the hd96 backward's dQ fault): a 64 x 48 fp32 tile in 64-byte swizzled shared
// memory, TMA reduce-added into columns [48, 96) (and a second one into [0, 48)) of a zeroed 64 x 96
// global tensor, checked on the host; run it plain and under compute-sanitizer memcheck / racecheck.
// Build: nvcc -std=c++17 -O2 -DNDEBUG -arch=sm_90a -I<cutlass include> -I<cuda>/include/cccl
//        --expt-relaxed-constexpr bench/gpu/tma_reduce_probe.cu -o tma_reduce_probe
#include <cstdio>
#include <vector>
#include <cute/tensor.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
using namespace cute;
template <int kSw>
using Atom = std::conditional_t<kSw == 64, GMMA::Layout_K_SW64_Atom<float>, GMMA::Layout_K_SW128_Atom<float>>;
template <int kSw, int kCols>
using SL = decltype(tile_to_shape(Atom<kSw>{}, Shape<_64, Int<kCols>>{}));
using GT = decltype(make_tensor(make_gmem_ptr(static_cast<float*>(nullptr)), make_shape(64, 96), make_stride(96, _1{})));
template <int kSw, int kCols>
using Tma = decltype(make_tma_copy(SM90_TMA_REDUCE_ADD{}, GT{}, SL<kSw, kCols>{}, Shape<_64, Int<kCols>>{}, _1{}));

template <int kSw, int kCols>
__global__ void probe(const __grid_constant__ Tma<kSw, kCols> tma, int reps) {
  extern __shared__ __align__(1024) float smem[];
  Tensor s0 = make_tensor(make_smem_ptr(smem), SL<kSw, kCols>{});
  Tensor s1 = make_tensor(make_smem_ptr(smem + 64 * kCols), SL<kSw, kCols>{});
  for (int rep = 0; rep < reps; ++rep) {
    for (int i = threadIdx.x; i < 64 * kCols; i += blockDim.x) {
      int r = i / kCols, c = i % kCols;
      s0(r, c) = float(r * 1000 + c);
      s1(r, c) = float(-(r * 1000 + c) - 0.5f);
    }
    cutlass::arch::fence_view_async_shared();
    __syncthreads();
    if (threadIdx.x == 0) {
      Tensor m = tma.get_tma_tensor(make_shape(64, 96));
      auto cta = tma.get_slice(_0{});
      copy(tma, cta.partition_S(s0), cta.partition_D(local_tile(m, Shape<_64, Int<kCols>>{}, make_coord(0, 96 / kCols - 1))));
      copy(tma, cta.partition_S(s1), cta.partition_D(local_tile(m, Shape<_64, Int<kCols>>{}, make_coord(0, 0))));
      tma_store_arrive();
      tma_store_wait<0>();
    }
    __syncthreads();
  }
}

template <int kSw, int kCols>
int run(float* d, int reps) {
  cudaMemset(d, 0, 64 * 96 * 4);
  GT g = make_tensor(make_gmem_ptr(d), make_shape(64, 96), make_stride(96, _1{}));
  auto tma = make_tma_copy(SM90_TMA_REDUCE_ADD{}, g, SL<kSw, kCols>{}, Shape<_64, Int<kCols>>{}, _1{});
  int smem = 2 * 64 * kCols * 4;
  cudaFuncSetAttribute(probe<kSw, kCols>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  probe<kSw, kCols><<<1, 128, smem>>>(tma, reps);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) { printf("error %s\n", cudaGetErrorString(e)); return 1; }
  std::vector<float> h(64 * 96);
  cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost);
  int bad = 0, first = -1;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 96; ++c) {
      float want = 0.f;
      if (c >= 96 - kCols) want += float(r * 1000 + (c - (96 - kCols)));
      if (c < kCols) want += float(-(r * 1000 + c) - 0.5f);
      want *= reps;
      if (h[r * 96 + c] != want) { if (first < 0) first = r * 96 + c; ++bad; }
    }
  printf("SW%d, %d-column tiles, %d reps: %d wrong of %d", kSw, kCols, reps, bad, 64 * 96);
  if (bad) printf(" (first at row %d col %d: %g)", first / 96, first % 96, h[first]);
  printf("\n");
  return bad != 0;
}

int main() {
  float* d;
  cudaMalloc(&d, 64 * 96 * 4);
  int fails = run<64, 48>(d, 1) + run<64, 48>(d, 3) + run<128, 32>(d, 3);
  cudaFree(d);
  return fails;
}
