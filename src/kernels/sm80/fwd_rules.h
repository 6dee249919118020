// Host-side choices of the sm80 forward that depend on the problem, not only on
// the head dim and the GPU's shared-memory tier (tiles.h): defined in dispatch.cpp.
#pragma once

#include "flashattn/params.h"
#include "kernels/sm80/smem_tier.h"

namespace flashattn::sm80 {

// Whether the forward of head dim `head_dim` (the compiled one) runs on the
// compact tier's tiles although the GPU's tier is `tier`: hd256 on H100 / H200
// for problems without score modifiers whose rows see at most 8192 keys.
bool hd256_compact_tiles(const FwdParams& p, int head_dim, SmemTier tier);

}  // namespace flashattn::sm80
