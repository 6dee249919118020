// Shared test harness of the GoogleTest suite.
//
//  * Case: one attention problem as data (sizes, dtype, every mask and score
//    option, dropout, packed lengths, memory layout, input magnitude). Cases are
//    listed in cases.cpp and reused by every test file and, later, every backend.
//  * HostTensor: a strided host buffer with guard elements before and after it
//    and NaN in every gap, so a backend that reads padding sees NaN and one that
//    writes outside a view is caught.
//  * Target: a backend plus where its tensors live. Host targets use heap memory;
//    a CUDA target only has to supply alloc/free/copy hooks and a device.
//  * run_forward / run_backward: one call of the public API on a Target.
//  * naive_attention: the harness's own float64 implementation of the contract
//    (an independent check of the reference backend), and the same computation
//    done naively in fp16/bf16 (what the accuracy rule measures against).
//  * check_forward / check_backward: the runner. Compares a Target against
//    Backend::reference with the contract's accuracy rule and checks the
//    structural promises (fully masked rows, dead keys, no NaN, padding and
//    inputs untouched).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "flashattn/flashattn.h"
#include "flashattn/numeric.h"

namespace fatest {

namespace fa = flashattn;
using fa::DType;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------- elements
double load_elem(DType t, const void* p);
void store_elem(DType t, void* p, double x);  // rounds to the dtype (through float)
double round_to(DType t, double x);           // x after a store/load in dtype t
double unit_roundoff(DType t);                // 2^-24, 2^-11, 2^-8
const char* short_name(DType t);              // "f32", "f16", "bf16", "i32"

// ---------------------------------------------------------------- tensors
enum class Layout {
  contiguous,  // row-major
  transposed,  // [B, S, H, D] viewed from a [B, H, S, D] buffer ([T, H, D] from [H, T, D])
  padded,      // row-major with gaps after every dim (odd element counts)
};
const char* layout_name(Layout l);

struct HostTensor {
  static constexpr int64_t kGuard = 8;  // NaN elements before and after the view

  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;     // in elements
  std::vector<unsigned char> buf;  // guards + view + gaps
  double fill = kNaN;              // value of every element outside the view

  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  int64_t esize() const { return fa::dtype_size(dtype); }
  int64_t buffer_elems() const { return static_cast<int64_t>(buf.size()) / esize(); }
  void* data() { return buf.data() + kGuard * esize(); }
  const void* data() const { return buf.data() + kGuard * esize(); }
  // Element offset from data() of the element with this row-major logical index.
  int64_t offset_of(int64_t flat) const;
  double get(int64_t flat) const;
  void set(int64_t flat, double x);
  std::vector<double> values() const;  // logical row-major order
  void set_values(const std::vector<double>& x);
  // A view of this tensor's layout whose data starts at `base` (default: data()).
  fa::TensorView view(void* base = nullptr, fa::Device device = {}) const;
  // True when every buffer element outside the view still holds `fill`.
  bool gaps_intact() const;
};

HostTensor make_tensor(DType dtype, std::vector<int64_t> shape, Layout layout = Layout::contiguous,
                       double fill = kNaN);

// ---------------------------------------------------------------- cases
enum class Alibi { none, per_head, per_batch_head };
enum class Fill {
  normal,    // q, k, v, dout ~ N(0, 1) (q, k times input_scale)
  zeros_qk,  // q = k = 0: uniform softmax; v, dout random
  zeros,     // q = k = v = 0; dout random
};

struct Case {
  std::string name;
  int64_t B = 1, Sq = 16, Sk = 16, Hq = 1, Hkv = 1, Dqk = 16, Dv = 16;
  DType dtype = DType::f32;
  bool causal = false;
  fa::Window window{-1, -1};
  float softcap = 0.f;
  Alibi alibi = Alibi::none;
  float dropout = 0.f;
  uint64_t dropout_seed = 1234, dropout_offset = 0;
  std::vector<int> lens_q, lens_k;  // non-empty: packed varlen with these sequence lengths
  // Non-empty: seqused_k, the keys sequence b uses (at most its key rows); the rows
  // after them hold NaN, which no backend may read.
  std::vector<int> used_k;
  Layout layout = Layout::contiguous;      // q, k, v, dout
  Layout out_layout = Layout::contiguous;  // out, lse, dq, dk, dv
  float input_scale = 1.f;
  std::optional<float> softmax_scale;
  Fill fill = Fill::normal;
  uint64_t seed = 0;  // 0: derived from the name

  Case() = default;
  explicit Case(std::string n) : name(std::move(n)) {}
  // Fluent setters so case tables read as one line each.
  Case& batch(int64_t b) { B = b; return *this; }
  Case& seq(int64_t q, int64_t k) { Sq = q; Sk = k; return *this; }
  Case& heads(int64_t q, int64_t kv) { Hq = q; Hkv = kv; return *this; }
  Case& dims(int64_t qk, int64_t v) { Dqk = qk; Dv = v; return *this; }
  Case& type(DType t) { dtype = t; return *this; }
  Case& causal_mask(bool c = true) { causal = c; return *this; }
  Case& win(int64_t left, int64_t right) { window = {left, right}; return *this; }
  Case& cap(float c) { softcap = c; return *this; }
  Case& slopes(Alibi a) { alibi = a; return *this; }
  Case& drop(float p, uint64_t s = 1234, uint64_t o = 0) {
    dropout = p; dropout_seed = s; dropout_offset = o; return *this;
  }
  Case& packed(std::vector<int> q, std::vector<int> k) {
    lens_q = std::move(q); lens_k = std::move(k); return *this;
  }
  Case& used(std::vector<int> u) { used_k = std::move(u); return *this; }
  Case& in_layout(Layout l) { layout = l; return *this; }
  Case& outputs_layout(Layout l) { out_layout = l; return *this; }
  Case& magnitude(float s) { input_scale = s; return *this; }
  Case& scale(float s) { softmax_scale = s; return *this; }
  Case& filled(Fill f) { fill = f; return *this; }
  Case& with_seed(uint64_t s) { seed = s; return *this; }

  bool varlen() const { return !lens_q.empty(); }
  // The case name with the dtype appended: unique in a table, and a valid test name.
  std::string id() const;
  std::string describe() const;  // every field, for failure messages
};

// Visibility of key j to query i in a sequence of sq queries and sk keys,
// written from the contract (independently of the library's Mask).
bool visible(const Case& c, int64_t sq, int64_t sk, int64_t i, int64_t j);

// ---------------------------------------------------------------- targets
struct Target {
  std::string name;
  fa::Backend backend = fa::Backend::cpu;
  fa::Device device{};
  // Device memory hooks. Host targets: heap memory and memcpy.
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> release;
  std::function<void(void* dst, const void* src, size_t)> to_device;
  std::function<void(void* dst, const void* src, size_t)> to_host;
  // Whether this target runs the case at all (e.g. head dims a GPU backend lacks).
  std::function<bool(const Case&)> supports;
};

// Adding a backend: build a Target with its Backend, its Device, memory hooks
// that allocate and copy device buffers (guards and gaps included, so the
// checks for writes outside a view keep working), and `supports` returning false
// for what it does not run (e.g. fp32, head dims not a multiple of 8); then
// instantiate the suites with it next to on_cpu(...) (see cases.h).
Target host_target(std::string name, fa::Backend backend);
const Target& cpu_target();
const Target& auto_target();
const Target& reference_target();
// The targets the main suites run: the CPU flash backend, and `automatic` on a subset.
std::vector<Target> targets_under_test();

// A host tensor mirrored in a target's memory. fetch() copies the device buffer
// (guards and gaps included) back into the host tensor.
class Bound {
 public:
  Bound(const Target& t, HostTensor& host);
  ~Bound();
  Bound(const Bound&) = delete;
  Bound& operator=(const Bound&) = delete;
  fa::TensorView view() const;
  void fetch();

 private:
  const Target& target_;
  HostTensor& host_;
  void* dev_ = nullptr;
};

// ---------------------------------------------------------------- problems
struct Problem {
  Case c;
  int64_t B = 0;
  std::vector<int64_t> len_q, len_k, start_q, start_k;  // per sequence (len_k: keys in use)
  int64_t rows_q = 0, rows_k = 0;    // batched: B*Sq, B*Sk; packed: totals
  int64_t max_q = 0, max_k = 0;      // batched: Sq, Sk; packed: the largest lengths
  float scale = 0.f;                 // the softmax scale in effect
  HostTensor q, k, v, dout;
  std::optional<HostTensor> alibi;
  std::optional<HostTensor> cu_q, cu_k;
  std::optional<HostTensor> used_k;  // seqused_k, int32 [B]

  std::vector<int64_t> out_shape() const;
  std::vector<int64_t> lse_shape() const;
  // Logical flat indices: rows are global (b*Sq + i batched, cu[b] + i packed).
  int64_t row_q(int64_t b, int64_t i) const { return start_q[b] + i; }
  int64_t row_k(int64_t b, int64_t j) const { return start_k[b] + j; }
  int64_t lse_index(int64_t b, int64_t h, int64_t i) const;
  float slope(int64_t b, int64_t h) const;
  fa::Options options(const Target& t) const;  // without alibi (bound separately)
};

Problem make_problem(const Case& c);
// A problem whose values are the identity: v[b, j, hk, :] = e_j, with Dv set to
// the longest key length. Then out[b, i, h, j] is p_ij (after dropout), so tests
// can read the attention probabilities, the mask and the dropout pattern.
Problem identity_v_problem(Case c);
// p_ij as read from the out of an identity_v_problem.
double prob_at(const Problem& p, const HostTensor& out, int64_t b, int64_t h, int64_t i, int64_t j);
// The same problem with inputs stored as `dtype` (values converted), contiguous.
Problem convert_problem(const Problem& p, DType dtype);

// ---------------------------------------------------------------- running
struct RunOpts {
  int num_threads = 0;
  bool deterministic = false;
  bool with_lse = true;
  std::optional<Layout> out_layout;  // default: the case's
};

struct FwdResult {
  HostTensor out, lse;
  bool inputs_intact = true;
};
struct BwdResult {
  HostTensor dq, dk, dv;
  bool inputs_intact = true;
};

FwdResult run_forward(const Problem& p, const Target& t, const RunOpts& o = {});
// Gradients with the forward's out and lse (as a user would call it).
BwdResult run_backward(const Problem& p, const Target& t, const FwdResult& fwd,
                       const RunOpts& o = {});

// ---------------------------------------------------------------- oracles
struct Naive {
  std::vector<double> out, lse, dq, dk, dv;
  double max_s = 0.0;  // largest |scale * q.k| over visible pairs
};
// The contract computed by the harness. lowp empty: float64 throughout. lowp =
// f16/bf16: the naive low-precision computation of the accuracy rule (fp32
// accumulation, S, P, O, dP, dS, dQ, dK, dV rounded to the dtype).
Naive naive_attention(const Problem& p, std::optional<DType> lowp, bool backward);

// Backend::reference on the problem with inputs widened to fp32 (exact for
// f16/bf16), so its outputs are the float64 result rounded once to fp32.
struct Truth {
  std::vector<double> out, lse, dq, dk, dv;
};
Truth reference_truth(const Problem& p, bool backward);

// ---------------------------------------------------------------- accuracy
double max_abs(const std::vector<double>& x);  // finite entries only
// fp32 rule: (1e-5 + 2e-7 max|s|) * max(1, max|ref|); gradients 1e-4 and 2e-6.
double fp32_bound(const std::vector<double>& ref, double max_s, bool gradient);
// Low-precision rule: 2 * max|naive - ref| + 2 * max|round(ref + 0.3) - 0.3 - ref|.
double lowp_bound(DType t, const std::vector<double>& ref, const std::vector<double>& naive);
double max_err(const std::vector<double>& got, const std::vector<double>& want);
// |got - want| <= bound everywhere; NaN and infinities must sit in the same places.
// With FATEST_VERBOSE set in the environment every comparison prints its error
// and bound (useful when tuning a new backend).
::testing::AssertionResult close(const std::string& what, const std::vector<double>& got,
                                 const std::vector<double>& want, double bound);
bool bitwise_equal(const HostTensor& a, const HostTensor& b);
bool any_nan(const std::vector<double>& x);

// ---------------------------------------------------------------- runner
// Runs forward (and backward) of the case on the target and checks everything
// against the reference with the contract's rule.
void check_forward(const Case& c, const Target& t);
void check_backward(const Case& c, const Target& t, const RunOpts& o = {});

// gtest parameter name: case id + target, sanitised.
std::string test_name(const Case& c, const Target& t);

}  // namespace fatest

namespace fatest {

// Readable gtest parameter printing.
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.describe(); }
inline void PrintTo(const Target& t, std::ostream* os) { *os << "target " << t.name; }

using CaseParam = std::tuple<Case, Target>;
struct CaseParamName {
  std::string operator()(const ::testing::TestParamInfo<CaseParam>& info) const {
    return test_name(std::get<0>(info.param), std::get<1>(info.param));
  }
};

}  // namespace fatest
