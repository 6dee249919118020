#include "staged_inputs.h"

#include <cstring>

#include <fmt/format.h>

#include "errors.h"

namespace facli {

namespace {

std::string label(const AttnInputs& in, const std::string& argument) {
  const auto it = in.labels.find(argument);
  return it != in.labels.end() ? it->second : argument;
}

// The library's rules for cu_seqlens contents: from 0, non-decreasing, no
// sequence above max_seqlen, ending at the number of packed rows. Counts and
// dtypes are left to the library, which sees the same shapes on the device.
void check_offsets(const AttnInputs& in, const HostTensor& cu, const char* name,
                   const char* max_name, int64_t rows, int64_t max_seqlen) {
  const int64_t n = cu.numel();
  if (n < 1 || cu.dtype != flashattn::DType::i32 || max_seqlen < 0) return;  // the library says why
  std::vector<int32_t> c(static_cast<size_t>(n));
  std::memcpy(c.data(), cu.data.data(), c.size() * sizeof(int32_t));
  const std::string where = label(in, name);
  if (c[0] != 0) throw CliError(where, fmt::format("must start at 0, got {}", c[0]));
  for (int64_t b = 1; b < n; ++b) {
    const int64_t len = static_cast<int64_t>(c[b]) - c[b - 1];
    if (len < 0)
      throw CliError(where, fmt::format("must be non-decreasing, but entry {} ({}) is below "
                                        "entry {} ({})", b, c[b], b - 1, c[b - 1]));
    if (len > max_seqlen)
      throw CliError(label(in, max_name), fmt::format("is {} but sequence {} has length {}",
                                                      max_seqlen, b - 1, len));
  }
  if (c[n - 1] != rows)
    throw CliError(where, fmt::format("last entry must equal the number of packed rows {}, got {}",
                                      rows, c[n - 1]));
}

}  // namespace

AttnViews stage_inputs(Staging& st, AttnInputs& in) {
  AttnViews a;
  a.options = in.options;
  if (in.packed && st.on_device()) {
    check_offsets(in, in.cu_seqlens_q, "cu_seqlens_q", "max_seqlen_q", in.q.shape[0],
                  in.varlen.max_seqlen_q);
    check_offsets(in, in.cu_seqlens_k, "cu_seqlens_k", "max_seqlen_k", in.k.shape[0],
                  in.varlen.max_seqlen_k);
  }
  a.q = st.in(in.q);
  a.k = st.in(in.k);
  a.v = st.in(in.v);
  if (in.alibi) a.options.alibi_slopes = st.in(*in.alibi);
  if (in.packed) {
    a.varlen = in.varlen;
    a.varlen.cu_seqlens_q = st.in(in.cu_seqlens_q);
    a.varlen.cu_seqlens_k = st.in(in.cu_seqlens_k);
  }
  return a;
}

}  // namespace facli
