#include "inputs.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "npy.h"

namespace facli {

using flashattn::DType;

namespace {

NpyArray read_file(const std::string& option, const std::string& path) {
  try {
    return read_npy(path);
  } catch (const NpyError& e) {
    throw CliError(file_label(option, path), e.what());
  }
}

// Checks a file's dtype against the run's (the first input file decides it when
// --dtype is not given).
DType check_dtype(const std::string& option, const std::string& path, const NpyArray& a,
                  std::optional<DType> expected, const std::string& decided_by) {
  const std::string where = file_label(option, path);
  if (!expected) {
    if (a.descr == "<f4") return DType::f32;
    if (a.descr == "<f2") return DType::f16;
    if (a.descr == "<u2")
      throw CliError(where, "dtype uint16 ('<u2') holds bf16 only with --dtype bf16");
    throw CliError(where, fmt::format("dtype {} is not supported; use float32 ('<f4'), float16 "
                                      "('<f2'), or bf16 as uint16 ('<u2') with --dtype bf16",
                                      a.dtype_name()));
  }
  if (a.descr != npy_descr(*expected))
    throw CliError(where, fmt::format("dtype is {}, but {} needs {}", a.dtype_name(), decided_by,
                                      npy_type_name(npy_descr(*expected))));
  return *expected;
}

HostTensor to_tensor(NpyArray&& a, DType dtype) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(a.shape);
  t.data = std::move(a.data);
  return t;
}

void check_rank(const std::string& option, const std::string& path, const HostTensor& t, int rank,
                const char* layout, bool packed) {
  if (t.ndim() == rank) return;
  throw CliError(file_label(option, path),
                 fmt::format("expected {} dims {}{}, got shape {}", rank, layout,
                             packed ? " (packed layout, --cu-seqlens-q/k given)"
                                    : " (or 3 dims [total, H, D] with --cu-seqlens-q/k)",
                             shape_string(t.shape)));
}

// int32 '<i4' as is; int64 '<i8' converted with a range check.
HostTensor load_cu_seqlens(const std::string& option, const std::string& path) {
  NpyArray a = read_file(option, path);
  const std::string where = file_label(option, path);
  if (a.shape.size() != 1)
    throw CliError(where, fmt::format("expected 1 dim [B+1], got shape {}", shape_string(a.shape)));
  if (a.descr == "<i4") return to_tensor(std::move(a), DType::i32);
  if (a.descr != "<i8")
    throw CliError(where, fmt::format("dtype is {}; cu_seqlens must be int32 ('<i4') or int64 "
                                      "('<i8')", a.dtype_name()));
  HostTensor t = HostTensor::zeros(DType::i32, a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t v;
    std::memcpy(&v, a.data.data() + 8 * i, 8);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      throw CliError(where, fmt::format("entry {} ({}) does not fit int32", i, v));
    const int32_t v32 = static_cast<int32_t>(v);
    std::memcpy(t.data.data() + 4 * i, &v32, 4);
  }
  return t;
}

// Longest sequence described by cu (0 when none); bad entries are left to the
// library's cu_seqlens check.
int64_t max_length(const HostTensor& cu) {
  int64_t m = 0;
  const auto* c = reinterpret_cast<const int32_t*>(cu.data.data());
  for (int64_t b = 0; b + 1 < cu.numel(); ++b)
    m = std::max<int64_t>(m, static_cast<int64_t>(c[b + 1]) - c[b]);
  return m;
}

}  // namespace

std::vector<int64_t> AttnInputs::out_shape() const {
  std::vector<int64_t> s = q.shape;
  s.back() = v.shape.back();
  return s;
}

std::vector<int64_t> AttnInputs::lse_shape() const {
  if (packed) return {q.shape[1], q.shape[0]};
  return {q.shape[0], q.shape[2], q.shape[1]};
}

void load_attn_inputs(const AttnFiles& files, const AttnArgs& args, AttnInputs& in) {
  // Options first: they are cheap to check and need no file.
  in.options = make_options(args);
  std::optional<DType> dtype;
  if (!args.dtype.empty()) dtype = parse_dtype(args.dtype);
  const bool has_cq = !args.cu_seqlens_q.empty(), has_ck = !args.cu_seqlens_k.empty();
  if (has_cq != has_ck)
    throw CliError(has_cq ? "--cu-seqlens-k" : "--cu-seqlens-q",
                   "the packed layout needs both --cu-seqlens-q and --cu-seqlens-k");
  in.packed = has_cq;
  if (!in.packed && (args.max_q_opt->count() || args.max_k_opt->count()))
    throw CliError(args.max_q_opt->count() ? "--max-seqlen-q" : "--max-seqlen-k",
                   "only meaningful with --cu-seqlens-q/k (the packed layout)");

  in.labels = option_labels();
  const std::string decided_by = dtype ? "--dtype " + args.dtype : file_label("--q", files.q);
  NpyArray qa = read_file("--q", files.q);
  in.dtype = check_dtype("--q", files.q, qa, dtype, decided_by);
  in.q = to_tensor(std::move(qa), in.dtype);
  NpyArray ka = read_file("--k", files.k);
  check_dtype("--k", files.k, ka, in.dtype, decided_by);
  in.k = to_tensor(std::move(ka), in.dtype);
  NpyArray va = read_file("--v", files.v);
  check_dtype("--v", files.v, va, in.dtype, decided_by);
  in.v = to_tensor(std::move(va), in.dtype);

  const int rank = in.packed ? 3 : 4;
  check_rank("--q", files.q, in.q, rank, in.packed ? "[total_q, Hq, Dqk]" : "[B, Sq, Hq, Dqk]",
             in.packed);
  check_rank("--k", files.k, in.k, rank, in.packed ? "[total_k, Hkv, Dqk]" : "[B, Sk, Hkv, Dqk]",
             in.packed);
  check_rank("--v", files.v, in.v, rank, in.packed ? "[total_k, Hkv, Dv]" : "[B, Sk, Hkv, Dv]",
             in.packed);
  in.labels["q"] = file_label("--q", files.q);
  in.labels["k"] = file_label("--k", files.k);
  in.labels["v"] = file_label("--v", files.v);

  if (!args.alibi.empty()) {
    NpyArray a = read_file("--alibi", args.alibi);
    if (a.descr != "<f4")
      throw CliError(file_label("--alibi", args.alibi),
                     fmt::format("dtype is {}; ALiBi slopes must be float32 ('<f4')", a.dtype_name()));
    if (a.shape.size() != 1 && a.shape.size() != 2)
      throw CliError(file_label("--alibi", args.alibi),
                     fmt::format("expected [Hq] or [B, Hq], got shape {}", shape_string(a.shape)));
    in.alibi = to_tensor(std::move(a), DType::f32);
    in.options.alibi_slopes = in.alibi->view();
    in.labels["alibi_slopes"] = file_label("--alibi", args.alibi);
  }

  if (in.packed) {
    in.cu_seqlens_q = load_cu_seqlens("--cu-seqlens-q", args.cu_seqlens_q);
    in.cu_seqlens_k = load_cu_seqlens("--cu-seqlens-k", args.cu_seqlens_k);
    in.varlen.cu_seqlens_q = in.cu_seqlens_q.view();
    in.varlen.cu_seqlens_k = in.cu_seqlens_k.view();
    in.varlen.max_seqlen_q = args.max_q_opt->count() ? args.max_seqlen_q : max_length(in.cu_seqlens_q);
    in.varlen.max_seqlen_k = args.max_k_opt->count() ? args.max_seqlen_k : max_length(in.cu_seqlens_k);
    in.labels["cu_seqlens_q"] = file_label("--cu-seqlens-q", args.cu_seqlens_q);
    in.labels["cu_seqlens_k"] = file_label("--cu-seqlens-k", args.cu_seqlens_k);
  }
}

HostTensor load_like_input(const std::string& option, const std::string& path,
                           const AttnInputs& in) {
  NpyArray a = read_file(option, path);
  check_dtype(option, path, a, in.dtype, "the dtype of --q");
  HostTensor t = to_tensor(std::move(a), in.dtype);
  check_rank(option, path, t, in.packed ? 3 : 4, in.packed ? "[total_q, Hq, Dv]" : "[B, Sq, Hq, Dv]",
             in.packed);
  return t;
}

HostTensor load_lse(const std::string& option, const std::string& path, const AttnInputs& in) {
  NpyArray a = read_file(option, path);
  if (a.descr != "<f4")
    throw CliError(file_label(option, path),
                   fmt::format("dtype is {}; LSE is always float32 ('<f4')", a.dtype_name()));
  HostTensor t = to_tensor(std::move(a), DType::f32);
  check_rank(option, path, t, in.packed ? 2 : 3, in.packed ? "[Hq, total_q]" : "[B, Hq, Sq]",
             in.packed);
  return t;
}

}  // namespace facli
