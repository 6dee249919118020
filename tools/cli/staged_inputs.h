// The inputs of `run` and `grad` as one call sees them: the host tensors' own
// views, or views of device copies when the backend is cuda.
#pragma once

#include <flashattn/flashattn.h>

#include "inputs.h"
#include "staging.h"

namespace facli {

struct AttnViews {
  flashattn::TensorView q, k, v;
  flashattn::Varlen varlen;    // packed layout only
  flashattn::Options options;  // alibi_slopes on the device of q
};

// Stages q, k, v, the ALiBi slopes and cu_seqlens. On the device the cu_seqlens
// values are checked here, on the host copies: the library checks them only in
// host memory (on the device it would have to wait for a copy), and a bad
// offset would make the kernel read out of bounds. Throws CliError.
AttnViews stage_inputs(Staging& st, AttnInputs& in);

}  // namespace facli
