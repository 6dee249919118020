// Probe (session 24): how fast can every SM add fp32 tiles from shared memory into
// global memory with the bulk-copy engine, the path of the Hopper backward's dQ
// reduce-add? One block per SM; its thread 0 issues back-to-back bulk operations
// of `bytes` from a shared tile (a 1-D `cp.reduce.async.bulk .add.f32`, or a
// plain `cp.async.bulk` store for comparison), at most `depth` in flight (waited
// with `wait_group.read`), into slots spread over a region of `region_mib` (small:
// the L2 takes the adds; large: DRAM behind it). Prints GB/s over the whole GPU
// and per SM, and the time one operation takes at that rate.
// With `loads`, warp 1 reads as many bytes from global memory into a second tile
// meanwhile (bulk loads on an mbarrier, as the kernel's Q / dO stream: at hd128
// and hd256 the backward loads as many bytes of Q and dO a step as it adds of dQ).
// Build: nvcc -std=c++17 -O2 -arch=sm_90a bench/gpu/dq_reduce_bw.cu -o dq_reduce_bw
// Run:   ./dq_reduce_bw            (the table of modes, sizes and depths)
//        ./dq_reduce_bw blocks     (32 KiB adds on 1..all SMs)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdint>

namespace {

__global__ void bulk_kernel(float* dst, const float* load_src, int64_t slots, int slot_floats, int bytes, int iters,
                            int depth, bool reduce, bool loads, bool same) {
  extern __shared__ __align__(128) float tile[];
  __shared__ __align__(8) uint64_t full;
  for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x) tile[i] = 1e-6f * float(i % 977);
  const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&full));
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar) : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the tile, to the async proxy
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 32 && loads) {
    // The load stream: one bulk load of `bytes` at a time into the second tile.
    const uint32_t buf = static_cast<uint32_t>(__cvta_generic_to_shared(tile + bytes / 4));
    for (int it = 0; it < iters; ++it) {
      const int64_t slot = (int64_t(blockIdx.x) * 104729 + int64_t(it) * 17) % slots;
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(buf), "l"(load_src + slot * slot_floats), "r"(bytes), "r"(bar) : "memory");
      uint32_t done = 0;
      while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(it & 1) : "memory");
    }
    return;
  }
  if (threadIdx.x != 0) return;
  const uint32_t src = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  for (int it = 0; it < iters; ++it) {
    // Neighbouring blocks at distant slots, each block walking its own sequence.
    // `same`: every block adds into the same slot at the same iteration (key
    // blocks walking the query tiles in lockstep).
    const int64_t slot = ((same ? 0 : int64_t(blockIdx.x) * 7919) + int64_t(it) * 131) % slots;
    float* d = dst + slot * slot_floats;
    if (reduce)
      asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                   :: "l"(d), "r"(src), "r"(bytes) : "memory");
    else
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                   :: "l"(d), "r"(src), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    // At most `depth` operations in flight (the kernel's staging buffers).
    if (depth == 1) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    else if (depth == 2) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    else asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

bool check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

struct Probe {
  float* dst;
  const float* src;
  cudaEvent_t t0, t1;
  // GB/s of `blocks` blocks issuing 400 ops of `bytes` each over `region_mib`, after a
  // 20-op warm-up; negative when the kernel failed.
  double gbs(int blocks, int bytes, int depth, int region_mib, bool reduce, bool loads, bool same) const {
    constexpr int kIters = 400;
    const int64_t slots = int64_t((size_t(region_mib) << 20) / bytes);
    bulk_kernel<<<blocks, 128, 2 * bytes>>>(dst, src, slots, bytes / 4, bytes, 20, depth, reduce, loads, same);
    cudaEventRecord(t0);
    bulk_kernel<<<blocks, 128, 2 * bytes>>>(dst, src, slots, bytes / 4, bytes, kIters, depth, reduce, loads, same);
    cudaEventRecord(t1);
    if (!check(cudaEventSynchronize(t1), "kernel")) return -1.0;
    float ms = 0.f;
    cudaEventElapsedTime(&ms, t0, t1);
    return double(blocks) * kIters * bytes / (ms * 1e-3) / 1e9;
  }
};

}  // namespace

int main(int argc, char**) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t big = size_t(2) << 30;  // 2 GiB of slots at most
  float* dst = nullptr;
  float* src = nullptr;
  if (!check(cudaMalloc(&dst, big), "cudaMalloc") || !check(cudaMalloc(&src, big), "cudaMalloc")) return 1;
  cudaMemset(dst, 0, big);
  cudaMemset(src, 0, big);
  cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 128 * 1024);
  Probe probe{dst, src, nullptr, nullptr};
  cudaEventCreate(&probe.t0);
  cudaEventCreate(&probe.t1);
  if (argc > 1) {
    // `dq_reduce_bw blocks`: 32 KiB adds, two in flight, L2-resident, on 1..sms
    // blocks: whether the rate is each SM's bulk engine or the L2's total.
    std::printf("%6s %5s %5s | %9s %11s\n", "blocks", "loads", "same", "GB/s", "GB/s per SM");
    for (int same = 0; same <= 1; ++same)
      for (int loads = 0; loads <= 1; ++loads)
        for (int blocks : {1, 8, 33, 66, 99, sms}) {
          const double gbs = probe.gbs(blocks, 32768, 2, 16, true, loads, same);
          if (gbs < 0) return 1;
          std::printf("%6d %5d %5d | %9.0f %11.2f\n", blocks, loads, same, gbs, gbs / blocks);
        }
  } else {
    std::printf("SMs %d; one block per SM, thread 0 issuing\n", sms);
    std::printf("%-7s %5s %8s %6s %11s | %9s %11s %12s\n", "op", "loads", "bytes", "depth", "region MiB", "GB/s",
                "GB/s per SM", "us per op");
    for (int loads = 0; loads <= 1; ++loads)
      for (int reduce = 1; reduce >= 0; --reduce) {
        if (loads && !reduce) continue;  // loads beside the adds only
        for (int bytes : {16384, 32768, 65536})
          for (int depth : {1, 2, 4})
            for (int region_mib : {16, 2048}) {
              const double gbs = probe.gbs(sms, bytes, depth, region_mib, reduce, loads, false);
              if (gbs < 0) return 1;
              std::printf("%-7s %5d %8d %6d %11d | %9.0f %11.2f %12.3f\n", reduce ? "add.f32" : "store", loads, bytes,
                          depth, region_mib, gbs, gbs / sms, double(bytes) / (gbs / sms * 1e9) * 1e6);
            }
      }
  }
  cudaFree(dst);
  cudaFree(src);
  return 0;
}
