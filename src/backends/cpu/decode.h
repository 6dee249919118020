// The CPU forward's path for decoding shapes (decode.cpp): at most 64 query
// rows per kv head, K and V read in place, keys split across threads.
#pragma once

#include "flashattn/params.h"

namespace flashattn::detail {

// Runs the forward and returns true when the call has a decoding shape this
// path takes (fp32, fp16, or bf16 on AVX512-BF16 or AMX); false, having
// done nothing, otherwise.
bool cpu_forward_decode(const FwdParams& p);

}  // namespace flashattn::detail
