// Programmatic dependent launch (sm90 and newer): a kernel launched with
// launch_early may start before the kernel ahead of it in the stream has ended,
// as soon as every block of that one has called pdl_trigger (or ended). It must
// call pdl_wait before it reads anything that kernel writes; pdl_wait returns once
// that kernel has ended and its writes are visible. Both are no-ops in a kernel
// that was launched the ordinary way, and below sm90.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace flashattn::detail {

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Launches kernel(args...) on stream, programmatically when early (the caller
// checks that the kernel waits where it must) and otherwise as <<<...>>> would.
// Where the programmatic launch is refused (a driver or tool that does not take
// the attribute) outside a stream capture, the ordinary launch is tried once
// more: the kernels are correct either way. (In a capture a refused launch has
// already spoilt the capture, so its error is returned as it is.)
template <typename... Params, typename... Args>
cudaError_t launch_early(bool early, void (*kernel)(Params...), dim3 grid, dim3 block, int smem,
                         cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  if (early) {
    config.attrs = &attr;
    config.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&config, kernel, args...);
    if (e == cudaSuccess) return e;
    (void)cudaGetLastError();  // a refused launch leaves no sticky error
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) return e;
    config.attrs = nullptr;
    config.numAttrs = 0;
  }
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace flashattn::detail
