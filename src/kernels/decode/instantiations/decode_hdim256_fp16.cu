// The decoding path's kernels for head dim 256, fp16 (decode.h).
#include "kernels/decode/decode_kernel.cuh"

namespace flashattn::decode {
template cudaError_t run_decode<256, false>(const DecodeArgs&, const Plan&, cudaStream_t);
}  // namespace flashattn::decode
