// Loading the input files of `run` and `grad`: dtype rules (output dtype = input
// dtype, bf16 only as uint16 with --dtype bf16), ranks, cu_seqlens conversion.
// Shape agreement between the tensors is left to the library, which names the
// tensor at fault.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <flashattn/flashattn.h>

#include "attn_options.h"
#include "errors.h"
#include "host_tensor.h"

namespace facli {

struct AttnFiles {
  std::string q, k, v;
};

struct AttnInputs {
  flashattn::DType dtype = flashattn::DType::f32;
  bool packed = false;
  HostTensor q, k, v;
  std::optional<HostTensor> alibi;
  HostTensor cu_seqlens_q, cu_seqlens_k;  // int32, packed only
  flashattn::Varlen varlen;               // views into cu_seqlens_*, packed only
  flashattn::Options options;             // alibi_slopes points into `alibi`
  ArgLabels labels;                       // library argument -> option and file

  // Shapes of the forward's outputs: out [.., Dv] and lse ([B, Hq, Sq] / [Hq, total_q]).
  std::vector<int64_t> out_shape() const;
  std::vector<int64_t> lse_shape() const;
};

// Parses the options (cheap checks first), then reads q, k, v, ALiBi and
// cu_seqlens. The result must not be moved after views are taken (see bind()).
void load_attn_inputs(const AttnFiles& files, const AttnArgs& args, AttnInputs& in);

// Another tensor of the input dtype (dout, or out given to grad) with q's rank.
HostTensor load_like_input(const std::string& option, const std::string& path,
                           const AttnInputs& in);
// A float32 LSE of the rank of the layout.
HostTensor load_lse(const std::string& option, const std::string& path, const AttnInputs& in);

}  // namespace facli
