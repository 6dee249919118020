// Argument checking: turns the API's tensor views and options into a filled,
// checked parameter block, or throws flashattn::Error naming the argument.
#pragma once

#include "backends/host_params.h"
#include "flashattn/flashattn.h"

namespace flashattn::detail {

// The forward's block, with what only the host backends take (a KV cache).
HostFwdParams make_fwd_params(const TensorView& q, const TensorView& k, const TensorView& v,
                              const TensorView& out, const TensorView* lse, const Varlen* varlen,
                              const Options& options);

// A paged block's table and pages (host memory): pages a positive multiple of 64
// dividing seqlen_k, batched input, and every block that holds a used key (seqused_k,
// else seqlen_k) inside the pool. Throws naming block_table (or k for the page size).
void check_block_table(const HostFwdParams& p);

BwdParams make_bwd_params(const TensorView& dout, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out, const TensorView& lse,
                          const TensorView& dq, const TensorView& dk, const TensorView& dv,
                          const Varlen* varlen, const Options& options);

}  // namespace flashattn::detail
