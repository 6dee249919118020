// The backends behind dispatch. Each takes a validated parameter block; `check_*`
// refuses what the backend cannot run (before any work), `*_forward/backward` run.
#pragma once

#include "backends/host_params.h"
#include "flashattn/params.h"

namespace flashattn::detail {

// Float64 oracle: materialises the score matrix of one (batch, head) at a time.
void reference_forward(const HostFwdParams& p);
void reference_backward(const BwdParams& p);

// Tiled CPU flash backend (OpenMP).
void cpu_forward(const HostFwdParams& p);
void cpu_backward(const BwdParams& p);

#if defined(FLASHATTN_WITH_CUDA)
void cuda_check(const FwdParams& p, bool backward);
// A KV cache (after cuda_check): seqused_k, block_table, k_new / v_new in the call's
// device memory, the new rows 16-byte aligned.
void cuda_check_kv(const HostFwdParams& p);
void cuda_forward(const HostFwdParams& p);
void cuda_backward(const BwdParams& p);
int cuda_device_count();
#endif

}  // namespace flashattn::detail
