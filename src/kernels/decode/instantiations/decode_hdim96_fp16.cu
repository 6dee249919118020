// The decoding path's kernels for head dim 96, fp16 (decode.h).
#include "kernels/decode/decode_kernel.cuh"

namespace flashattn::decode {
template cudaError_t run_decode<96, false>(const DecodeArgs&, const Plan&, cudaStream_t);
}  // namespace flashattn::decode
