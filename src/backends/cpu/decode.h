// The CPU forward's path for decoding shapes (decode.cpp): at most 64 query
// rows per kv head, K and V read in place, keys split across threads.
#pragma once

#include "backends/host_params.h"

namespace flashattn::detail {

// Runs the forward and returns true when the call has a decoding shape (at
// most 64 query rows per kv head, any dtype); false, having done nothing,
// otherwise.
bool cpu_forward_decode(const HostFwdParams& p);

}  // namespace flashattn::detail
