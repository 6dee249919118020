// Argument checking: turns the API's tensor views and options into a filled,
// checked parameter block, or throws flashattn::Error naming the argument.
#pragma once

#include "flashattn/flashattn.h"

namespace flashattn::detail {

FwdParams make_fwd_params(const TensorView& q, const TensorView& k, const TensorView& v,
                          const TensorView& out, const TensorView* lse, const Varlen* varlen,
                          const Options& options);

BwdParams make_bwd_params(const TensorView& dout, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out, const TensorView& lse,
                          const TensorView& dq, const TensorView& dk, const TensorView& dv,
                          const Varlen* varlen, const Options& options);

}  // namespace flashattn::detail
