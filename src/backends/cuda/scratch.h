// Scratch memory for CUDA launches, shared by the backend and the kernels' launch
// code that sizes its own (the Hopper forward's cut last round, sm90/fwd_split.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace flashattn::detail {

// bytes of stream-ordered scratch on stream from flashattn's pool for device, which
// keeps freed memory for the next call (cuda_backend.cpp); under graph capture the
// allocation becomes a graph node. Free it with cudaFreeAsync on the same stream.
cudaError_t cuda_scratch(void** ptr, size_t bytes, int device, cudaStream_t stream);

}  // namespace flashattn::detail
