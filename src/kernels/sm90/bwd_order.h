// The Hopper backward's deterministic mode: one int32 counter per (batch, query
// head, 64-row query tile, consumer group), after the fp32 dQ accumulator in the
// backward's scratch (cuda_backend.cpp allocates and zeroes them; bwd_kernel.cuh,
// order_wait, reads and writes them). Counters count the key blocks whose dQ
// has been added to the tile; a kernel with 128-row tiles uses the first half.
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"

namespace flashattn::sm90 {

// Counters per head and batch entry (two consumer groups per query tile).
FA_HD int64_t dq_order_per_head(int64_t seqlen_q) { return ((seqlen_q + 63) / 64) * 2; }
// Where they start, in floats from the accumulator's start (256-byte aligned).
FA_HD int64_t dq_order_offset(int64_t accum_floats) { return (accum_floats + 63) / 64 * 64; }

}  // namespace flashattn::sm90
