// cp.async (sm80 and newer): small global -> shared copies that land without a
// register round trip, and an mbarrier arrival that waits for them.
#pragma once

namespace flashattn::detail {

// cp.async of kBytes that zero-fills the destination and reads nothing when
// !valid (src-size 0): one predicated instruction instead of a branch. 16-byte
// copies bypass L1 (.cg); smaller ones must go through it (.ca).
template <int kBytes>
__device__ __forceinline__ void cp_async_zfill(void* smem, const void* gmem, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(kBytes),
                 "r"(valid ? kBytes : 0));
#endif
}

// Arrives on the mbarrier at `bar` (shared memory) once every cp.async this thread
// issued before has landed; counts as one of the barrier's expected arrivals
// (.noinc), so a waiter on the barrier sees the copied data.
__device__ __forceinline__ void cp_async_mbarrier_arrive(void* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(addr) : "memory");
#endif
}

}  // namespace flashattn::detail
