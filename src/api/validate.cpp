#include "api/validate.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace flashattn::detail {
namespace {

std::string shape_str(const TensorView& t) {
  std::ostringstream s;
  s << '[';
  for (int d = 0; d < t.ndim; ++d) s << (d ? ", " : "") << t.shape[d];
  s << ']';
  return s.str();
}

std::string device_str(Device d) {
  return d.type == DeviceType::cpu ? std::string("cpu") : "cuda:" + std::to_string(d.index);
}

[[noreturn]] void fail(ErrorKind kind, const std::string& arg, const std::string& msg) {
  throw Error(kind, arg, msg);
}

// Rank, null data, negative sizes/strides and the contiguous last dimension.
void check_tensor(const char* name, const TensorView& t, int ndim, const char* layout) {
  if (t.ndim != ndim)
    fail(ErrorKind::value, name,
         std::string("expected ") + std::to_string(ndim) + " dims " + layout + ", got " +
             std::to_string(t.ndim) + " dims " + shape_str(t));
  for (int d = 0; d < ndim; ++d) {
    if (t.shape[d] < 0)
      fail(ErrorKind::value, name, "negative size in shape " + shape_str(t));
    if (t.stride[d] < 0)
      fail(ErrorKind::value, name,
           "negative stride " + std::to_string(t.stride[d]) + " in dim " + std::to_string(d) +
               " is not supported");
  }
  if (t.shape[ndim - 1] > 1 && t.stride[ndim - 1] != 1)
    fail(ErrorKind::value, name,
         "the last dimension must be contiguous (stride 1), got stride " +
             std::to_string(t.stride[ndim - 1]));
  if (t.data == nullptr && t.numel() > 0)
    fail(ErrorKind::value, name, "data pointer is null for a tensor of shape " + shape_str(t));
}

// An output must not have two indices that share an element.
void check_non_overlapping(const char* name, const TensorView& t) {
  if (t.numel() == 0) return;  // nothing to write, nothing to share
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] > 1) dims.emplace_back(t.stride[d], t.shape[d]);
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;
  for (auto [stride, size] : dims) {
    if (stride < extent)
      fail(ErrorKind::value, name,
           "output strides overlap (shape " + shape_str(t) + "): every element needs its own memory");
    extent = stride * size;
  }
}

// Whether the bytes two tensors span (first to last element) meet.
bool memory_overlaps(const TensorView& a, const TensorView& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  auto span = [](const TensorView& t) {
    int64_t last = 0;
    for (int d = 0; d < t.ndim; ++d) last += (t.shape[d] - 1) * t.stride[d];
    const auto* begin = static_cast<const char*>(t.data);
    return std::pair<const char*, const char*>{begin, begin + (last + 1) * dtype_size(t.dtype)};
  };
  const auto [a0, a1] = span(a);
  const auto [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

// An input a GPU call reads while it writes `outputs` must not share their memory (`why`
// says what goes wrong); on the host the call reads it first and takes such memory.
using Outputs = std::vector<std::pair<const char*, const TensorView*>>;
void check_apart_on_gpu(const char* name, const TensorView& input, const Outputs& outputs, const char* why) {
  if (input.device.type == DeviceType::cpu) return;
  for (const auto& [out_name, t] : outputs)
    if (memory_overlaps(input, *t))
      fail(ErrorKind::unsupported, name,
           std::string("shares memory with ") + out_name + ", which the call writes; on a GPU " + why);
}

// The index arrays (cu_seqlens, seqused_k, block_table) are read again and again while
// the outputs are written: a length changed between two reads would leave the roles of
// a Hopper kernel disagreeing on a tile's extent, waiting for each other forever.
void check_index_apart(const char* name, const TensorView& index, const Outputs& outputs) {
  check_apart_on_gpu(name, index, outputs, "the kernels read it while they write, so it must be memory of its own");
}

void check_dim(const char* name, const TensorView& t, int d, int64_t expected, const char* what,
               const char* layout) {
  if (t.shape[d] != expected)
    fail(ErrorKind::value, name,
         std::string("dim ") + std::to_string(d) + " (" + what + ") must be " +
             std::to_string(expected) + " to match the other inputs, got shape " + shape_str(t) +
             " for layout " + layout);
}

void check_same_dtype(const char* name, const TensorView& t, DType expected) {
  if (t.dtype != expected)
    fail(ErrorKind::type, name,
         std::string("dtype must be ") + to_string(expected) + " like q, got " + to_string(t.dtype));
}

void check_same_device(const char* name, const TensorView& t, Device expected) {
  if (!(t.device == expected))
    fail(ErrorKind::value, name,
         "is on " + device_str(t.device) + " but q is on " + device_str(expected) +
             ": all tensors must be on one device");
}

void check_float_dtype(const char* name, const TensorView& t) {
  if (t.dtype != DType::f32 && t.dtype != DType::f16 && t.dtype != DType::bf16)
    fail(ErrorKind::type, name,
         std::string("dtype must be float32, float16 or bfloat16, got ") + to_string(t.dtype));
}

// Host-side check of cu_seqlens contents: 0-based, non-decreasing, ending at the total.
void check_cu_seqlens_values(const char* name, const TensorView& cu, int64_t total,
                             int64_t max_seqlen, const char* max_name) {
  const auto* c = static_cast<const int32_t*>(cu.data);
  const int64_t n = cu.shape[0];
  const int64_t st = cu.stride[0];
  if (c[0] != 0) fail(ErrorKind::value, name, "must start at 0, got " + std::to_string(c[0]));
  for (int64_t b = 1; b < n; ++b) {
    const int64_t len = static_cast<int64_t>(c[b * st]) - c[(b - 1) * st];
    if (len < 0)
      fail(ErrorKind::value, name,
           "must be non-decreasing, but entry " + std::to_string(b) + " (" +
               std::to_string(c[b * st]) + ") is below entry " + std::to_string(b - 1) + " (" +
               std::to_string(c[(b - 1) * st]) + ")");
    if (len > max_seqlen)
      fail(ErrorKind::value, max_name,
           "is " + std::to_string(max_seqlen) + " but sequence " + std::to_string(b - 1) +
               " has length " + std::to_string(len));
  }
  if (c[(n - 1) * st] != total)
    fail(ErrorKind::value, name,
         "last entry must equal the number of packed rows " + std::to_string(total) + ", got " +
             std::to_string(c[(n - 1) * st]));
}

struct Shapes {
  int64_t batch, sq, sk, hq, hkv, dqk, dv;
};

// Checks q, k, v, out (and varlen) and returns the problem sizes.
Shapes check_qkvo(const TensorView& q, const TensorView& k, const TensorView& v,
                  const TensorView& out, const Varlen* varlen, const TensorView* table = nullptr) {
  const bool packed = varlen != nullptr;
  const bool paged = table != nullptr;
  if (packed && paged)
    fail(ErrorKind::unsupported, "block_table", "paged keys and values take batched input, not packed");
  const int nd = packed ? 3 : 4;
  const char* lq = packed ? "[total_q, Hq, Dqk]" : "[B, Sq, Hq, Dqk]";
  const char* lk = packed ? "[total_k, Hkv, Dqk]" : paged ? "[num_blocks, page_size, Hkv, Dqk]" : "[B, Sk, Hkv, Dqk]";
  const char* lv = packed ? "[total_k, Hkv, Dv]" : paged ? "[num_blocks, page_size, Hkv, Dv]" : "[B, Sk, Hkv, Dv]";
  const char* lo = packed ? "[total_q, Hq, Dv]" : "[B, Sq, Hq, Dv]";
  check_tensor("q", q, nd, lq);
  check_tensor("k", k, nd, lk);
  check_tensor("v", v, nd, lv);
  check_tensor("out", out, nd, lo);
  check_float_dtype("q", q);
  check_same_dtype("k", k, q.dtype);
  check_same_dtype("v", v, q.dtype);
  check_same_dtype("out", out, q.dtype);
  check_same_device("k", k, q.device);
  check_same_device("v", v, q.device);
  check_same_device("out", out, q.device);

  const int o = packed ? 0 : 1;  // first of (S, H, D)
  Shapes s{};
  s.hq = q.shape[o + 1];
  s.dqk = q.shape[o + 2];
  s.sk = k.shape[o];
  s.hkv = k.shape[o + 1];
  s.dv = v.shape[o + 2];
  if (!packed) {
    s.batch = q.shape[0];
    s.sq = q.shape[1];
    if (paged) {
      check_dim("v", v, 0, k.shape[0], "num_blocks", lv);
    } else {
      check_dim("k", k, 0, s.batch, "B", lk);
      check_dim("v", v, 0, s.batch, "B", lv);
    }
    check_dim("out", out, 0, s.batch, "B", lo);
  }
  check_dim("k", k, o + 2, s.dqk, "Dqk, the head dim of q", lk);
  check_dim("v", v, o, s.sk, packed ? "total_k" : paged ? "page_size, as k's" : "Sk", lv);
  check_dim("v", v, o + 1, s.hkv, "Hkv", lv);
  check_dim("out", out, o, q.shape[o], packed ? "total_q" : "Sq", lo);
  check_dim("out", out, o + 1, s.hq, "Hq", lo);
  check_dim("out", out, o + 2, s.dv, "Dv, the head dim of v", lo);
  if (s.hq < 1) fail(ErrorKind::value, "q", "needs at least one head, got shape " + shape_str(q));
  if (s.hkv < 1) fail(ErrorKind::value, "k", "needs at least one head, got shape " + shape_str(k));
  if (s.hq % s.hkv != 0)
    fail(ErrorKind::value, "k",
         "the number of query heads (" + std::to_string(s.hq) +
             ") must be a multiple of the number of key/value heads (" + std::to_string(s.hkv) + ")");
  if (s.dqk < 1) fail(ErrorKind::value, "q", "head dim must be positive, got shape " + shape_str(q));
  if (s.dv < 1) fail(ErrorKind::value, "v", "head dim must be positive, got shape " + shape_str(v));
  check_non_overlapping("out", out);

  if (paged) {
    const TensorView& t = *table;
    check_tensor("block_table", t, 2, "[B, max_blocks]");
    if (t.dtype != DType::i32)
      fail(ErrorKind::type, "block_table", std::string("dtype must be int32, got ") + to_string(t.dtype));
    check_same_device("block_table", t, q.device);
    check_dim("block_table", t, 0, s.batch, "B", "[B, max_blocks]");
    // The CPU's decoding path reads a 64-key tile from one block.
    if (s.sk < 1 || s.sk % 64 != 0)
      fail(ErrorKind::value, "k", "the page size (dim 1 of the paged k and v) must be a positive multiple of 64, "
                                   "got shape " + shape_str(k));
    s.sk *= t.shape[1];  // keys a sequence can hold
  }

  if (packed) {
    const TensorView& cq = varlen->cu_seqlens_q;
    const TensorView& ck = varlen->cu_seqlens_k;
    check_tensor("cu_seqlens_q", cq, 1, "[B+1]");
    check_tensor("cu_seqlens_k", ck, 1, "[B+1]");
    if (cq.dtype != DType::i32)
      fail(ErrorKind::type, "cu_seqlens_q", std::string("dtype must be int32, got ") + to_string(cq.dtype));
    if (ck.dtype != DType::i32)
      fail(ErrorKind::type, "cu_seqlens_k", std::string("dtype must be int32, got ") + to_string(ck.dtype));
    check_same_device("cu_seqlens_q", cq, q.device);
    check_same_device("cu_seqlens_k", ck, q.device);
    if (cq.shape[0] < 1)
      fail(ErrorKind::value, "cu_seqlens_q", "needs at least one entry (B+1 with B >= 0)");
    if (ck.shape[0] != cq.shape[0])
      fail(ErrorKind::value, "cu_seqlens_k",
           "must have as many entries as cu_seqlens_q (" + std::to_string(cq.shape[0]) + "), got " +
               std::to_string(ck.shape[0]));
    if (varlen->max_seqlen_q < 0)
      fail(ErrorKind::value, "max_seqlen_q", "must be >= 0, got " + std::to_string(varlen->max_seqlen_q));
    if (varlen->max_seqlen_k < 0)
      fail(ErrorKind::value, "max_seqlen_k", "must be >= 0, got " + std::to_string(varlen->max_seqlen_k));
    s.batch = cq.shape[0] - 1;
    s.sq = varlen->max_seqlen_q;
    s.sk = varlen->max_seqlen_k;
    if (q.device.type == DeviceType::cpu) {
      check_cu_seqlens_values("cu_seqlens_q", cq, q.shape[0], s.sq, "max_seqlen_q");
      check_cu_seqlens_values("cu_seqlens_k", ck, k.shape[0], s.sk, "max_seqlen_k");
    }
    // No sequence is longer than the packed rows, so a larger bound is that count:
    // backends size work by it (a bound of 2^40 ran the CPU backend out of memory).
    s.sq = std::min(s.sq, q.shape[0]);
    s.sk = std::min(s.sk, k.shape[0]);
  }
  return s;
}

void check_lse(const char* name, const TensorView& lse, const Shapes& s, const TensorView& q,
               bool packed) {
  if (packed) {
    check_tensor(name, lse, 2, "[Hq, total_q]");
    check_dim(name, lse, 0, s.hq, "Hq", "[Hq, total_q]");
    check_dim(name, lse, 1, q.shape[0], "total_q", "[Hq, total_q]");
  } else {
    check_tensor(name, lse, 3, "[B, Hq, Sq]");
    check_dim(name, lse, 0, s.batch, "B", "[B, Hq, Sq]");
    check_dim(name, lse, 1, s.hq, "Hq", "[B, Hq, Sq]");
    check_dim(name, lse, 2, s.sq, "Sq", "[B, Hq, Sq]");
  }
  if (lse.dtype != DType::f32)
    fail(ErrorKind::type, name, std::string("dtype must be float32, got ") + to_string(lse.dtype));
  check_same_device(name, lse, q.device);
}

void fill_options(FwdParams& p, const Options& opt, const Shapes& s, const TensorView& q) {
  if (opt.softmax_scale) {
    if (!std::isfinite(*opt.softmax_scale))
      fail(ErrorKind::value, "softmax_scale",
           "must be a finite number, got " + std::to_string(*opt.softmax_scale));
    p.softmax_scale = *opt.softmax_scale;
  } else {
    p.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.dqk)));
  }
  if (!std::isfinite(opt.softcap) || opt.softcap < 0.f)
    fail(ErrorKind::value, "softcap", "must be finite and >= 0 (0 turns it off), got " +
                                          std::to_string(opt.softcap));
  p.softcap = opt.softcap;
  if (opt.window.left < -1 || opt.window.right < -1)
    fail(ErrorKind::value, "window",
         "sides must be >= 0, or -1 for unbounded, got (" + std::to_string(opt.window.left) + ", " +
             std::to_string(opt.window.right) + ")");
  p.causal = opt.causal;
  p.window_left = opt.window.left;
  p.window_right = opt.window.right;
  if (opt.causal) p.window_right = p.window_right < 0 ? 0 : std::min<int64_t>(p.window_right, 0);
  if (!(opt.dropout_p >= 0.f && opt.dropout_p < 1.f))
    fail(ErrorKind::value, "dropout_p", "must be in [0, 1), got " + std::to_string(opt.dropout_p));
  p.dropout_p = opt.dropout_p;
  p.seed = opt.seed;
  p.offset = opt.offset;
  if (opt.alibi_slopes) {
    const TensorView& a = *opt.alibi_slopes;
    if (a.ndim == 1) {
      check_tensor("alibi_slopes", a, 1, "[Hq]");
      check_dim("alibi_slopes", a, 0, s.hq, "Hq", "[Hq]");
      p.alibi_batch_stride = 0;
    } else {
      check_tensor("alibi_slopes", a, 2, "[B, Hq] or [Hq]");
      check_dim("alibi_slopes", a, 0, s.batch, "B", "[B, Hq]");
      check_dim("alibi_slopes", a, 1, s.hq, "Hq", "[B, Hq]");
      p.alibi_batch_stride = a.stride[0];
    }
    if (a.dtype != DType::f32)
      fail(ErrorKind::type, "alibi_slopes", std::string("dtype must be float32, got ") + to_string(a.dtype));
    check_same_device("alibi_slopes", a, q.device);
    p.alibi_slopes = static_cast<const float*>(a.data);
  }
  if (opt.num_threads < 0 || opt.num_threads > kMaxThreads)
    fail(ErrorKind::value, "num_threads",
         "must be in [0, " + std::to_string(kMaxThreads) + "] (0: default), got " + std::to_string(opt.num_threads));
  p.deterministic = opt.deterministic;
  p.stream = opt.stream;
  p.num_threads = opt.num_threads;
  p.backend = resolve_backend(opt.backend, q.device);
  if ((p.backend == Backend::cpu || p.backend == Backend::reference) &&
      q.device.type != DeviceType::cpu)
    fail(ErrorKind::value, "backend",
         std::string("'") + to_string(p.backend) + "' runs on host memory, but q is on " +
             device_str(q.device));
  if (p.backend == Backend::cuda && q.device.type != DeviceType::cuda)
    fail(ErrorKind::value, "backend", "'cuda' needs tensors in CUDA device memory, but q is on the host");
}

// seqused_k: int32 [B], contiguous (check_tensor), on q's device; on the host each entry within its
// sequence's key rows (Sk batched, cu_seqlens_k[b+1] - cu_seqlens_k[b] packed).
void set_seqused_k(HostFwdParams& p, const Options& opt, const TensorView& q) {
  if (!opt.seqused_k) return;
  const TensorView& u = *opt.seqused_k;
  check_tensor("seqused_k", u, 1, "[B]");
  if (u.dtype != DType::i32)
    fail(ErrorKind::type, "seqused_k", std::string("dtype must be int32, got ") + to_string(u.dtype));
  check_same_device("seqused_k", u, q.device);
  check_dim("seqused_k", u, 0, p.batch, "B", "[B]");
  const auto* used = static_cast<const int32_t*>(u.data);
  if (q.device.type == DeviceType::cpu)
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t rows = p.is_varlen() ? int64_t(p.cu_seqlens_k[b + 1]) - p.cu_seqlens_k[b] : p.seqlen_k;
      if (used[b] < 0 || used[b] > rows)
        fail(ErrorKind::value, "seqused_k",
             "entry " + std::to_string(b) + " is " + std::to_string(used[b]) +
                 ", outside [0, " + std::to_string(rows) + "], the key rows of sequence " +
                 std::to_string(b));
    }
  p.kv.seqused_k = used;
}

// block_table (shapes checked in check_qkvo): on the host, the entries too. A table in
// device memory is not read here (that would synchronise the stream): the kernels clamp
// its entries into the pool.
void set_block_table(HostFwdParams& p, const Options& opt, const TensorView& q, const TensorView& k) {
  if (!opt.block_table) return;
  const TensorView& t = *opt.block_table;
  p.kv.block_table = static_cast<const int32_t*>(t.data);
  p.kv.block_table_stride = t.stride[0];
  p.kv.page_size = k.shape[1];
  p.kv.num_blocks = k.shape[0];
  if (q.device.type == DeviceType::cpu) {
    check_block_table(p);
  } else if (p.kv.num_blocks == 0 && p.batch > 0 && t.shape[1] > 0) {
    // The kernels clamp the entries into the pool, which needs a block to clamp into.
    fail(ErrorKind::value, "k", "a paged pool needs at least one block, got shape " + shape_str(k));
  }
}

// k_new / v_new: one decoding step's rows, written into the caches k and v before the
// attention. Needs seqused_k (where they go; on the host every entry at least S_new) and
// batched input; the caches become outputs, so their own memory must not overlap.
void set_kv_new(HostFwdParams& p, const Options& opt, const TensorView& q, const TensorView& k,
                const TensorView& v) {
  if (!opt.k_new && !opt.v_new) return;
  if (!opt.k_new || !opt.v_new)
    fail(ErrorKind::value, opt.k_new ? "v_new" : "k_new", "k_new and v_new are given together or not at all");
  if (p.is_varlen())
    fail(ErrorKind::unsupported, "k_new", "new keys and values take batched input, not packed");
  if (!opt.seqused_k)
    fail(ErrorKind::value, "k_new",
         "needs seqused_k: sequence b's new keys become its keys seqused_k[b] - S_new .. seqused_k[b] - 1");
  const TensorView& kn = *opt.k_new;
  const TensorView& vn = *opt.v_new;
  const char* k_layout = "[B, S_new, Hkv, Dqk]";
  const char* v_layout = "[B, S_new, Hkv, Dv]";
  check_tensor("k_new", kn, 4, k_layout);
  check_tensor("v_new", vn, 4, v_layout);
  check_dim("k_new", kn, 0, p.batch, "B", k_layout);
  check_dim("k_new", kn, 2, p.heads_kv, "Hkv", k_layout);
  check_dim("k_new", kn, 3, p.head_dim_qk, "Dqk", k_layout);
  check_dim("v_new", vn, 0, p.batch, "B", v_layout);
  check_dim("v_new", vn, 1, kn.shape[1], "S_new", v_layout);
  check_dim("v_new", vn, 2, p.heads_kv, "Hkv", v_layout);
  check_dim("v_new", vn, 3, p.head_dim_v, "Dv", v_layout);
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"k_new", kn}, {"v_new", vn}}) {
    check_same_dtype(name, t, q.dtype);
    check_same_device(name, t, q.device);
  }
  const int64_t rows = kn.shape[1];
  if (rows > p.seqlen_k)
    fail(ErrorKind::value, "k_new",
         std::to_string(rows) + " new keys per sequence do not fit its " + std::to_string(p.seqlen_k) + " key rows");
  if (q.device.type == DeviceType::cpu)
    for (int64_t b = 0; b < p.batch; ++b)
      if (p.kv.seqused_k[b] < rows)
        fail(ErrorKind::value, "seqused_k",
             "entry " + std::to_string(b) + " is " + std::to_string(p.kv.seqused_k[b]) + ", fewer than the " +
                 std::to_string(rows) + " new keys of k_new it ends with");
  check_non_overlapping("k", k);
  check_non_overlapping("v", v);
  // On a GPU the rows are copied by many threads at once, with no stage in between: rows
  // that share memory with a cache could be overwritten before they are read.
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"k_new", kn}, {"v_new", vn}})
    check_apart_on_gpu(name, t, {{"k", &k}, {"v", &v}}, "the new rows must be a tensor of their own");
  p.kv.k_new = {kn.data, kn.stride[0], kn.stride[1], kn.stride[2]};
  p.kv.v_new = {vn.data, vn.stride[0], vn.stride[1], vn.stride[2]};
  p.kv.new_rows = rows;
}

// Strides of a [B, S, H, D] or [total, H, D] tensor as (batch, row, head).
void strides_of(const TensorView& t, bool packed, int64_t& b, int64_t& r, int64_t& h) {
  if (packed) {
    b = 0;
    r = t.stride[0];
    h = t.stride[1];
  } else {
    b = t.stride[0];
    r = t.stride[1];
    h = t.stride[2];
  }
}

FwdParams fill_common(const TensorView& q, const TensorView& k, const TensorView& v,
                      const TensorView& out, const Varlen* varlen, const Options& options,
                      Shapes& s) {
  s = check_qkvo(q, k, v, out, varlen, options.block_table ? &*options.block_table : nullptr);
  const bool packed = varlen != nullptr;
  FwdParams p;
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.out = out.data;
  p.dtype = q.dtype;
  p.device = q.device;
  p.batch = s.batch;
  p.seqlen_q = s.sq;
  p.seqlen_k = s.sk;
  p.heads_q = s.hq;
  p.heads_kv = s.hkv;
  p.head_dim_qk = s.dqk;
  p.head_dim_v = s.dv;
  strides_of(q, packed, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
  strides_of(k, packed, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  strides_of(v, packed, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  strides_of(out, packed, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
  if (packed) {
    p.cu_seqlens_q = static_cast<const int32_t*>(varlen->cu_seqlens_q.data);
    p.cu_seqlens_k = static_cast<const int32_t*>(varlen->cu_seqlens_k.data);
    p.total_q = q.shape[0];
    p.total_k = k.shape[0];
    if (varlen->cu_seqlens_q.shape[0] > 1 && (varlen->cu_seqlens_q.stride[0] != 1 ||
                                              varlen->cu_seqlens_k.stride[0] != 1))
      fail(ErrorKind::value, varlen->cu_seqlens_q.stride[0] != 1 ? "cu_seqlens_q" : "cu_seqlens_k",
           "must be contiguous");
  }
  fill_options(p, options, s, q);
  return p;
}

void set_lse(FwdParams& p, const TensorView& lse, bool packed) {
  p.lse = static_cast<float*>(lse.data);
  if (packed) {
    p.lse_batch_stride = 0;
    p.lse_head_stride = lse.stride[0];
  } else {
    p.lse_batch_stride = lse.stride[0];
    p.lse_head_stride = lse.stride[1];
  }
}

}  // namespace

void check_block_table(const HostFwdParams& p) {
  const KvCache& kv = p.kv;
  if (kv.page_size <= 0 || kv.page_size % 64 != 0 || p.seqlen_k % kv.page_size != 0)
    fail(ErrorKind::value, "k", "the page size (dim 1 of the paged k and v) must be a positive multiple of 64 "
                                "that divides the keys a sequence holds, got " + std::to_string(kv.page_size));
  if (p.cu_seqlens_k != nullptr)
    fail(ErrorKind::unsupported, "block_table", "paged keys and values take batched input, not packed");
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t used = kv.seqused_k != nullptr ? std::clamp<int64_t>(kv.seqused_k[b], 0, p.seqlen_k) : p.seqlen_k;
    for (int64_t i = 0; i < (used + kv.page_size - 1) / kv.page_size; ++i) {
      const int64_t e = kv.block_table[b * kv.block_table_stride + i];  // rows are contiguous (check_tensor)
      if (e < 0 || e >= kv.num_blocks)
        fail(ErrorKind::value, "block_table",
             "entry [" + std::to_string(b) + ", " + std::to_string(i) + "] is " + std::to_string(e) +
                 ", outside [0, " + std::to_string(kv.num_blocks) + "), the blocks of k and v, and sequence " +
                 std::to_string(b) + " uses it");
    }
  }
}

HostFwdParams make_fwd_params(const TensorView& q, const TensorView& k, const TensorView& v,
                              const TensorView& out, const TensorView* lse, const Varlen* varlen,
                              const Options& options) {
  Shapes s;
  HostFwdParams p;
  static_cast<FwdParams&>(p) = fill_common(q, k, v, out, varlen, options, s);
  set_seqused_k(p, options, q);
  set_block_table(p, options, q, k);
  set_kv_new(p, options, q, k, v);
  if (lse != nullptr && lse->defined()) {
    check_lse("lse", *lse, s, q, varlen != nullptr);
    check_non_overlapping("lse", *lse);
    set_lse(p, *lse, varlen != nullptr);
  }
  Outputs outputs{{"out", &out}};
  if (lse != nullptr && lse->defined()) outputs.push_back({"lse", lse});
  if (options.k_new) outputs.insert(outputs.end(), {{"k", &k}, {"v", &v}});  // the caches take new rows
  if (options.seqused_k) check_index_apart("seqused_k", *options.seqused_k, outputs);
  if (options.block_table) check_index_apart("block_table", *options.block_table, outputs);
  if (varlen != nullptr) {
    check_index_apart("cu_seqlens_q", varlen->cu_seqlens_q, outputs);
    check_index_apart("cu_seqlens_k", varlen->cu_seqlens_k, outputs);
  }
  return p;
}

BwdParams make_bwd_params(const TensorView& dout, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out, const TensorView& lse,
                          const TensorView& dq, const TensorView& dk, const TensorView& dv,
                          const Varlen* varlen, const Options& options) {
  Shapes s;
  BwdParams p;
  if (options.seqused_k)
    fail(ErrorKind::unsupported, "seqused_k",
         "is a forward-only option (attention over a filled KV cache); the backward takes "
         "every key of k and v");
  if (options.block_table)
    fail(ErrorKind::unsupported, "block_table", "is a forward-only option (a paged KV cache)");
  if (options.k_new || options.v_new)
    fail(ErrorKind::unsupported, options.k_new ? "k_new" : "v_new",
         "is a forward-only option (a KV cache's new rows)");
  static_cast<FwdParams&>(p) = fill_common(q, k, v, out, varlen, options, s);
  const bool packed = varlen != nullptr;
  check_lse("lse", lse, s, q, packed);
  set_lse(p, lse, packed);

  const int nd = packed ? 3 : 4;
  struct Like {
    const char* name;
    const TensorView& t;
    const TensorView& like;
    const char* like_name;
    bool output;
  };
  const Like likes[] = {{"dout", dout, out, "out", false},
                        {"dq", dq, q, "q", true},
                        {"dk", dk, k, "k", true},
                        {"dv", dv, v, "v", true}};
  for (const Like& l : likes) {
    check_tensor(l.name, l.t, nd, "like its forward tensor");
    for (int d = 0; d < nd; ++d)
      if (l.t.shape[d] != l.like.shape[d])
        fail(ErrorKind::value, l.name,
             "must have the shape of " + std::string(l.like_name) + " " + shape_str(l.like) +
                 ", got " + shape_str(l.t));
    check_same_dtype(l.name, l.t, q.dtype);
    check_same_device(l.name, l.t, q.device);
    if (l.output) check_non_overlapping(l.name, l.t);
  }
  p.dout = dout.data;
  p.dq = dq.data;
  p.dk = dk.data;
  p.dv = dv.data;
  strides_of(dout, packed, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
  strides_of(dq, packed, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
  strides_of(dk, packed, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
  strides_of(dv, packed, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
  if (packed) {
    const Outputs outputs{{"dq", &dq}, {"dk", &dk}, {"dv", &dv}};
    check_index_apart("cu_seqlens_q", varlen->cu_seqlens_q, outputs);
    check_index_apart("cu_seqlens_k", varlen->cu_seqlens_k, outputs);
  }
  return p;
}

}  // namespace flashattn::detail
