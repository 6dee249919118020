// flashattn._C: the library's forward/backward over DLPack arrays. Callers own
// every buffer (the Python layer allocates outputs with the input's framework);
// nothing here allocates, copies or includes a framework header.
#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "errors.h"
#include "flashattn/flashattn.h"
#include "views.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace flashattn::python {
namespace {

// The options every call shares, in the order the Python functions take them.
struct Opts {
  std::optional<double> softmax_scale;
  bool causal;
  int64_t window_left, window_right;
  double softcap;
  InArray alibi_slopes;
  double dropout_p;
  uint64_t seed, offset;
  std::string backend;
  int num_threads;
  uintptr_t stream;
  bool u16_is_bf16;
  InArray seqused_k;
  InArray block_table;
  InArray k_new;
  InArray v_new;

  Options make(bool deterministic = false) const {
    Options o;
    if (softmax_scale) o.softmax_scale = static_cast<float>(*softmax_scale);
    o.causal = causal;
    o.window = {window_left, window_right};
    o.softcap = static_cast<float>(softcap);
    o.alibi_slopes = optional_view(alibi_slopes, "alibi_slopes", false);
    o.dropout_p = static_cast<float>(dropout_p);
    o.seed = seed;
    o.offset = offset;
    o.deterministic = deterministic;
    o.backend = backend_from_string(backend.c_str());
    o.num_threads = num_threads;
    o.stream = reinterpret_cast<void*>(stream);
    o.seqused_k = optional_view(seqused_k, "seqused_k", false);
    o.block_table = optional_view(block_table, "block_table", false);
    o.k_new = optional_view(k_new, "k_new", u16_is_bf16);
    o.v_new = optional_view(v_new, "v_new", u16_is_bf16);
    return o;
  }
};

// nb::arg list of Opts, shared by the four bindings.
#define FA_OPTS_ARGS                                                                        \
  "softmax_scale"_a.none() = nb::none(), "causal"_a = false, "window_left"_a = -1,        \
  "window_right"_a = -1, "softcap"_a = 0.0, "alibi_slopes"_a.none() = nb::none(),         \
  "dropout_p"_a = 0.0, "seed"_a = 0, "offset"_a = 0, "backend"_a = "auto",                \
  "num_threads"_a = 0, "stream"_a = 0, "u16_is_bf16"_a = false,                          \
  "seqused_k"_a.none() = nb::none(), "block_table"_a.none() = nb::none(),                \
  "k_new"_a.none() = nb::none(), "v_new"_a.none() = nb::none()
#define FA_OPTS_PARAMS                                                                      \
  std::optional<double> scale, bool causal, int64_t wl, int64_t wr, double softcap,        \
      flashattn::python::InArray alibi, double p, uint64_t seed, uint64_t offset, std::string backend,         \
      int threads, uintptr_t stream, bool bf16, flashattn::python::InArray used,           \
      flashattn::python::InArray table, flashattn::python::InArray k_new, flashattn::python::InArray v_new
#define FA_OPTS_VALUES                                                                      \
  flashattn::python::Opts { scale, causal, wl, wr, softcap, alibi, p, seed, offset, backend, threads, stream, bf16, used, table, k_new, v_new }

// check_only: validate as the call would (backend refusals included) and run nothing.
void fwd(InArray q, InArray k, InArray v, OutArray out, OutArray lse, bool check_only, const Opts& a) {
  const bool b = a.u16_is_bf16;
  const TensorView qv = view(q, "q", b), kv = view(k, "k", b), vv = view(v, "v", b);
  const TensorView ov = view(out, "out", b);
  const std::optional<TensorView> lv = optional_view(lse, "lse", false);
  const Options o = a.make();
  if (check_only) return validate_forward(qv, kv, vv, ov, lv ? &*lv : nullptr, nullptr, o);
  nb::gil_scoped_release unlocked;
  forward(qv, kv, vv, ov, lv ? &*lv : nullptr, o);
}

void fwd_varlen(InArray q, InArray k, InArray v, OutArray out, OutArray lse, InArray cu_q,
                InArray cu_k, int64_t max_q, int64_t max_k, const Opts& a) {
  const bool b = a.u16_is_bf16;
  const TensorView qv = view(q, "q", b), kv = view(k, "k", b), vv = view(v, "v", b);
  const TensorView ov = view(out, "out", b);
  const std::optional<TensorView> lv = optional_view(lse, "lse", false);
  const Varlen vl{view(cu_q, "cu_seqlens_q", false), view(cu_k, "cu_seqlens_k", false), max_q,
                  max_k};
  const Options o = a.make();
  nb::gil_scoped_release unlocked;
  forward_varlen(qv, kv, vv, ov, lv ? &*lv : nullptr, vl, o);
}

struct BwdViews {
  TensorView dout, q, k, v, out, lse, dq, dk, dv;
};

BwdViews bwd_views(InArray dout, InArray q, InArray k, InArray v, InArray out, InArray lse,
                   OutArray dq, OutArray dk, OutArray dv, bool b) {
  return {view(dout, "dout", b), view(q, "q", b),   view(k, "k", b),
          view(v, "v", b),       view(out, "out", b), view(lse, "lse", false),
          view(dq, "dq", b),     view(dk, "dk", b), view(dv, "dv", b)};
}

void bwd(InArray dout, InArray q, InArray k, InArray v, InArray out, InArray lse, OutArray dq,
         OutArray dk, OutArray dv, bool deterministic, const Opts& a) {
  const BwdViews t = bwd_views(dout, q, k, v, out, lse, dq, dk, dv, a.u16_is_bf16);
  const Options o = a.make(deterministic);
  nb::gil_scoped_release unlocked;
  backward(t.dout, t.q, t.k, t.v, t.out, t.lse, t.dq, t.dk, t.dv, o);
}

void bwd_varlen(InArray dout, InArray q, InArray k, InArray v, InArray out, InArray lse,
                OutArray dq, OutArray dk, OutArray dv, InArray cu_q, InArray cu_k, int64_t max_q,
                int64_t max_k, bool deterministic, const Opts& a) {
  const BwdViews t = bwd_views(dout, q, k, v, out, lse, dq, dk, dv, a.u16_is_bf16);
  const Varlen vl{view(cu_q, "cu_seqlens_q", false), view(cu_k, "cu_seqlens_k", false), max_q,
                  max_k};
  const Options o = a.make(deterministic);
  nb::gil_scoped_release unlocked;
  backward_varlen(t.dout, t.q, t.k, t.v, t.out, t.lse, t.dq, t.dk, t.dv, vl, o);
}

using MaskArray = nb::ndarray<bool, nb::ndim<2>, nb::device::cpu>;

// The contract's keep decisions of one (sequence, head), for tests.
void dropout_mask(MaskArray mask, uint64_t seed, uint64_t offset, int64_t b, int64_t h, double p) {
  const auto m = mask.view();
  const float pf = static_cast<float>(p);
  nb::gil_scoped_release unlocked;
  for (size_t i = 0; i < m.shape(0); ++i)
    for (size_t j = 0; j < m.shape(1); ++j)
      m(i, j) = dropout_keep(seed, offset, b, h, static_cast<int64_t>(i), static_cast<int64_t>(j), pf);
}

}  // namespace
}  // namespace flashattn::python

NB_MODULE(_C, m) {
  namespace py = flashattn::python;
  m.doc() = "flashattn's compiled core over DLPack arrays (use the flashattn package instead)";
  py::register_errors(m);
  m.attr("__version__") = flashattn::version();
#if defined(FLASHATTN_WITH_CUDA)
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def("cuda_available", &flashattn::cuda_available,
        "True when this build has the CUDA backend and a CUDA device is visible.");

  m.def(
      "fwd",
      [](py::InArray q, py::InArray k, py::InArray v, py::OutArray out, py::OutArray lse,
         FA_OPTS_PARAMS, bool check_only) { py::fwd(q, k, v, out, lse, check_only, FA_OPTS_VALUES); },
      "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(), FA_OPTS_ARGS, "check_only"_a = false,
      "Batched forward: writes out [B, Sq, Hq, Dv] and, unless None, lse [B, Hq, Sq] "
      "(with check_only, validates the call and writes nothing).");
  m.def(
      "fwd_varlen",
      [](py::InArray q, py::InArray k, py::InArray v, py::OutArray out, py::OutArray lse,
         py::InArray cu_q, py::InArray cu_k, int64_t max_q, int64_t max_k, FA_OPTS_PARAMS) {
        py::fwd_varlen(q, k, v, out, lse, cu_q, cu_k, max_q, max_k, FA_OPTS_VALUES);
      },
      "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(), "cu_seqlens_q"_a, "cu_seqlens_k"_a,
      "max_seqlen_q"_a, "max_seqlen_k"_a, FA_OPTS_ARGS,
      "Packed forward: writes out [total_q, Hq, Dv] and, unless None, lse [Hq, total_q].");
  m.def(
      "bwd",
      [](py::InArray dout, py::InArray q, py::InArray k, py::InArray v, py::InArray out,
         py::InArray lse, py::OutArray dq, py::OutArray dk, py::OutArray dv, bool deterministic,
         FA_OPTS_PARAMS) { py::bwd(dout, q, k, v, out, lse, dq, dk, dv, deterministic, FA_OPTS_VALUES); },
      "dout"_a, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dq"_a, "dk"_a, "dv"_a,
      "deterministic"_a = false, FA_OPTS_ARGS, "Batched backward: writes dq, dk, dv.");
  m.def(
      "bwd_varlen",
      [](py::InArray dout, py::InArray q, py::InArray k, py::InArray v, py::InArray out,
         py::InArray lse, py::OutArray dq, py::OutArray dk, py::OutArray dv, py::InArray cu_q,
         py::InArray cu_k, int64_t max_q, int64_t max_k, bool deterministic, FA_OPTS_PARAMS) {
        py::bwd_varlen(dout, q, k, v, out, lse, dq, dk, dv, cu_q, cu_k, max_q, max_k, deterministic,
                       FA_OPTS_VALUES);
      },
      "dout"_a, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dq"_a, "dk"_a, "dv"_a, "cu_seqlens_q"_a,
      "cu_seqlens_k"_a, "max_seqlen_q"_a, "max_seqlen_k"_a, "deterministic"_a = false, FA_OPTS_ARGS,
      "Packed backward: writes dq, dk, dv.");
  m.def("dropout_mask", &py::dropout_mask, "mask"_a, "seed"_a, "offset"_a, "b"_a, "h"_a,
        "dropout_p"_a, "Writes the keep decisions of (sequence b, query head h) into mask [Sq, Sk].");
}
