#include "harness.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

namespace fatest {

// ================================================================ elements

double load_elem(DType t, const void* p) {
  switch (t) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fa::fp16_to_float(h);
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fa::bf16_to_float(h);
    }
    case DType::i32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
  }
  return kNaN;
}

void store_elem(DType t, void* p, double x) {
  switch (t) {
    case DType::f32: {
      const float f = static_cast<float>(x);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::f16: {
      const uint16_t h = fa::float_to_fp16(static_cast<float>(x));
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::bf16: {
      const uint16_t h = fa::float_to_bf16(static_cast<float>(x));
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::i32: {
      const int32_t i = std::isfinite(x) ? static_cast<int32_t>(std::llround(x)) : -777;
      std::memcpy(p, &i, 4);
      return;
    }
  }
}

double round_to(DType t, double x) {
  unsigned char tmp[4];
  store_elem(t, tmp, x);
  return load_elem(t, tmp);
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::bf16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}

const char* short_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
  }
  return "?";
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::padded: return "padded";
  }
  return "?";
}

// ================================================================ tensors

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t HostTensor::offset_of(int64_t flat) const {
  int64_t off = 0;
  for (int d = ndim() - 1; d >= 0; --d) {
    off += (flat % shape[d]) * stride[d];
    flat /= shape[d];
  }
  return off;
}

double HostTensor::get(int64_t flat) const {
  return load_elem(dtype, static_cast<const unsigned char*>(data()) + offset_of(flat) * esize());
}

void HostTensor::set(int64_t flat, double x) {
  store_elem(dtype, static_cast<unsigned char*>(data()) + offset_of(flat) * esize(), x);
}

std::vector<double> HostTensor::values() const {
  std::vector<double> r(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) r[i] = get(i);
  return r;
}

void HostTensor::set_values(const std::vector<double>& x) {
  if (static_cast<int64_t>(x.size()) != numel()) throw std::logic_error("set_values: size");
  for (int64_t i = 0; i < numel(); ++i) set(i, x[i]);
}

fa::TensorView HostTensor::view(void* base, fa::Device device) const {
  fa::TensorView t;
  t.data = base ? base : const_cast<void*>(data());
  t.dtype = dtype;
  t.device = device;
  t.ndim = ndim();
  for (int d = 0; d < ndim(); ++d) {
    t.shape[d] = shape[d];
    t.stride[d] = stride[d];
  }
  return t;
}

bool HostTensor::gaps_intact() const {
  const int64_t n = buffer_elems();
  std::vector<char> covered(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < numel(); ++i) covered[kGuard + offset_of(i)] = 1;
  unsigned char want[4];
  store_elem(dtype, want, fill);
  for (int64_t e = 0; e < n; ++e)
    if (!covered[e] && std::memcmp(buf.data() + e * esize(), want, esize()) != 0) return false;
  return true;
}

HostTensor make_tensor(DType dtype, std::vector<int64_t> shape, Layout layout, double fill) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.fill = fill;
  const int n = t.ndim();
  t.stride.assign(n, 1);
  // Memory order of the dims, outermost first.
  std::vector<int> order(n);
  for (int d = 0; d < n; ++d) order[d] = d;
  if (layout == Layout::transposed && n >= 3) std::swap(order[n - 3], order[n - 2]);
  int64_t extent = 1;
  for (int m = n - 1; m >= 0; --m) {
    const int d = order[m];
    t.stride[d] = extent;
    extent = extent * t.shape[d];
    if (layout == Layout::padded) extent += 2 * (n - 1 - m) + 1;  // 1, 3, 5, 7 element gaps
  }
  int64_t span = 0;
  if (t.numel() > 0) {
    span = 1;
    for (int d = 0; d < n; ++d) span += (t.shape[d] - 1) * t.stride[d];
    if (layout == Layout::padded) span += 2;
  }
  const int64_t elems = 2 * HostTensor::kGuard + span;
  t.buf.assign(static_cast<size_t>(elems * t.esize()), 0);
  for (int64_t e = 0; e < elems; ++e) store_elem(dtype, t.buf.data() + e * t.esize(), fill);
  return t;
}

// ================================================================ cases

std::string Case::id() const { return name + "_" + short_name(dtype); }

std::string Case::describe() const {
  std::ostringstream s;
  s << "case " << id() << ": B=" << B << " Sq=" << Sq << " Sk=" << Sk << " Hq=" << Hq
    << " Hkv=" << Hkv << " Dqk=" << Dqk << " Dv=" << Dv << " dtype=" << short_name(dtype)
    << " causal=" << causal << " window=(" << window.left << "," << window.right << ")"
    << " softcap=" << softcap << " alibi=" << static_cast<int>(alibi) << " dropout=" << dropout
    << " (seed " << dropout_seed << ", offset " << dropout_offset << ")";
  if (varlen()) {
    s << " lens_q={";
    for (int l : lens_q) s << l << ",";
    s << "} lens_k={";
    for (int l : lens_k) s << l << ",";
    s << "}";
  }
  if (!used_k.empty()) {
    s << " used_k={";
    for (int u : used_k) s << u << ",";
    s << "}";
  }
  s << " layout=" << layout_name(layout) << " out_layout=" << layout_name(out_layout)
    << " input_scale=" << input_scale;
  if (softmax_scale) s << " softmax_scale=" << *softmax_scale;
  s << " fill=" << static_cast<int>(fill) << " seed=" << seed;
  return s.str();
}

bool visible(const Case& c, int64_t sq, int64_t sk, int64_t i, int64_t j) {
  if (j < 0 || j >= sk || i < 0 || i >= sq) return false;
  const int64_t diag = i + sk - sq;  // bottom-right alignment
  if (c.causal && j > diag) return false;
  if (c.window.left >= 0 && j < diag - c.window.left) return false;
  if (c.window.right >= 0 && j > diag + c.window.right) return false;
  return true;
}

// ================================================================ targets

Target host_target(std::string name, fa::Backend backend) {
  Target t;
  t.name = std::move(name);
  t.backend = backend;
  t.device = fa::Device{fa::DeviceType::cpu, 0};
  t.alloc = [](size_t n) { return std::malloc(n ? n : 1); };
  t.release = [](void* p) { std::free(p); };
  t.to_device = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
  t.to_host = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
  t.supports = [](const Case&) { return true; };
  return t;
}

const Target& cpu_target() {
  static const Target t = host_target("cpu", fa::Backend::cpu);
  return t;
}
const Target& auto_target() {
  static const Target t = host_target("auto", fa::Backend::automatic);
  return t;
}
const Target& reference_target() {
  static const Target t = host_target("reference", fa::Backend::reference);
  return t;
}

std::vector<Target> targets_under_test() { return {cpu_target(), auto_target()}; }

Bound::Bound(const Target& t, HostTensor& host) : target_(t), host_(host) {
  dev_ = target_.alloc(host_.buf.size());
  target_.to_device(dev_, host_.buf.data(), host_.buf.size());
}

Bound::~Bound() { target_.release(dev_); }

fa::TensorView Bound::view() const {
  return host_.view(static_cast<unsigned char*>(dev_) + HostTensor::kGuard * host_.esize(),
                    target_.device);
}

void Bound::fetch() { target_.to_host(host_.buf.data(), dev_, host_.buf.size()); }

// ================================================================ problems

std::vector<int64_t> Problem::out_shape() const {
  if (c.varlen()) return {rows_q, c.Hq, c.Dv};
  return {B, c.Sq, c.Hq, c.Dv};
}

std::vector<int64_t> Problem::lse_shape() const {
  if (c.varlen()) return {c.Hq, rows_q};
  return {B, c.Hq, c.Sq};
}

int64_t Problem::lse_index(int64_t b, int64_t h, int64_t i) const {
  if (c.varlen()) return h * rows_q + start_q[b] + i;
  return (b * c.Hq + h) * c.Sq + i;
}

float Problem::slope(int64_t b, int64_t h) const {
  if (!alibi) return 0.f;
  return static_cast<float>(c.alibi == Alibi::per_head ? alibi->get(h) : alibi->get(b * c.Hq + h));
}

fa::Options Problem::options(const Target& t) const {
  fa::Options o;
  o.softmax_scale = c.softmax_scale;
  o.causal = c.causal;
  o.window = c.window;
  o.softcap = c.softcap;
  o.dropout_p = c.dropout;
  o.seed = c.dropout_seed;
  o.offset = c.dropout_offset;
  o.backend = t.backend;
  return o;
}

namespace {

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

Problem make_problem(const Case& c) {
  Problem p;
  p.c = c;
  if (c.varlen()) {
    if (c.lens_q.size() != c.lens_k.size()) throw std::logic_error("lens_q/lens_k sizes differ");
    p.B = static_cast<int64_t>(c.lens_q.size());
    for (int64_t b = 0; b < p.B; ++b) {
      p.start_q.push_back(p.rows_q);
      p.start_k.push_back(p.rows_k);
      p.len_q.push_back(c.lens_q[b]);
      p.len_k.push_back(c.lens_k[b]);
      p.rows_q += c.lens_q[b];
      p.rows_k += c.lens_k[b];
      p.max_q = std::max<int64_t>(p.max_q, c.lens_q[b]);
      p.max_k = std::max<int64_t>(p.max_k, c.lens_k[b]);
    }
  } else {
    p.B = c.B;
    for (int64_t b = 0; b < p.B; ++b) {
      p.start_q.push_back(b * c.Sq);
      p.start_k.push_back(b * c.Sk);
      p.len_q.push_back(c.Sq);
      p.len_k.push_back(c.Sk);
    }
    p.rows_q = c.B * c.Sq;
    p.rows_k = c.B * c.Sk;
    p.max_q = c.Sq;
    p.max_k = c.Sk;
  }
  p.scale = c.softmax_scale ? *c.softmax_scale
                            : static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.Dqk)));

  auto shape_of = [&](int64_t rows, int64_t seq, int64_t h, int64_t d) -> std::vector<int64_t> {
    if (c.varlen()) return {rows, h, d};
    return {p.B, seq, h, d};
  };
  p.q = make_tensor(c.dtype, shape_of(p.rows_q, c.Sq, c.Hq, c.Dqk), c.layout);
  p.k = make_tensor(c.dtype, shape_of(p.rows_k, c.Sk, c.Hkv, c.Dqk), c.layout);
  p.v = make_tensor(c.dtype, shape_of(p.rows_k, c.Sk, c.Hkv, c.Dv), c.layout);
  p.dout = make_tensor(c.dtype, shape_of(p.rows_q, c.Sq, c.Hq, c.Dv), c.layout);

  std::mt19937_64 rng(c.seed ? c.seed : hash_name(c.id()));
  std::normal_distribution<double> normal(0.0, 1.0);
  auto fill = [&](HostTensor& t, double scale, bool zero) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, zero ? 0.0 : scale * normal(rng));
  };
  fill(p.q, c.input_scale, c.fill != Fill::normal);
  fill(p.k, c.input_scale, c.fill != Fill::normal);
  fill(p.v, 1.0, c.fill == Fill::zeros);
  fill(p.dout, 1.0, false);

  if (c.alibi != Alibi::none) {
    std::uniform_real_distribution<double> u(0.05, 1.0);
    const Layout al = c.layout == Layout::padded ? Layout::padded : Layout::contiguous;
    p.alibi = c.alibi == Alibi::per_head ? make_tensor(DType::f32, {c.Hq}, al)
                                         : make_tensor(DType::f32, {p.B, c.Hq}, al);
    for (int64_t i = 0; i < p.alibi->numel(); ++i) p.alibi->set(i, u(rng));
  }
  if (!c.used_k.empty()) {
    if (static_cast<int64_t>(c.used_k.size()) != p.B) throw std::logic_error("used_k needs B entries");
    p.used_k = make_tensor(DType::i32, {p.B});
    for (int64_t b = 0; b < p.B; ++b) {
      if (c.used_k[b] > p.len_k[b]) throw std::logic_error("used_k above the key rows");
      p.used_k->set(b, c.used_k[b]);
      // Rows past the used keys: NaN, so a backend that reads them shows it.
      for (int64_t j = c.used_k[b]; j < p.len_k[b]; ++j)
        for (int64_t hk = 0; hk < c.Hkv; ++hk) {
          for (int64_t x = 0; x < c.Dqk; ++x) p.k.set((p.row_k(b, j) * c.Hkv + hk) * c.Dqk + x, kNaN);
          for (int64_t x = 0; x < c.Dv; ++x) p.v.set((p.row_k(b, j) * c.Hkv + hk) * c.Dv + x, kNaN);
        }
      p.len_k[b] = c.used_k[b];
    }
  }
  if (c.varlen()) {
    p.cu_q = make_tensor(DType::i32, {p.B + 1});
    p.cu_k = make_tensor(DType::i32, {p.B + 1});
    for (int64_t b = 0; b <= p.B; ++b) {
      p.cu_q->set(b, b < p.B ? p.start_q[b] : p.rows_q);
      p.cu_k->set(b, b < p.B ? p.start_k[b] : p.rows_k);
    }
  }
  return p;
}

Problem identity_v_problem(Case c) {
  int64_t max_k = c.Sk;
  if (c.varlen()) {
    max_k = 0;
    for (int l : c.lens_k) max_k = std::max<int64_t>(max_k, l);
  }
  c.Dv = std::max<int64_t>(max_k, 1);
  Problem p = make_problem(c);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t j = 0; j < p.len_k[b]; ++j)
      for (int64_t hk = 0; hk < c.Hkv; ++hk)
        for (int64_t x = 0; x < c.Dv; ++x) p.v.set((p.row_k(b, j) * c.Hkv + hk) * c.Dv + x, x == j ? 1.0 : 0.0);
  return p;
}

double prob_at(const Problem& p, const HostTensor& out, int64_t b, int64_t h, int64_t i, int64_t j) {
  return out.get((p.row_q(b, i) * p.c.Hq + h) * p.c.Dv + j);
}

Problem convert_problem(const Problem& p, DType dtype) {
  Problem r = p;
  r.c.dtype = dtype;
  r.c.layout = Layout::contiguous;
  r.c.out_layout = Layout::contiguous;
  for (auto [dst, src] : {std::pair{&r.q, &p.q}, {&r.k, &p.k}, {&r.v, &p.v}, {&r.dout, &p.dout}}) {
    *dst = make_tensor(dtype, src->shape);
    dst->set_values(src->values());
  }
  return r;
}

// ================================================================ running

namespace {

struct BoundInputs {
  HostTensor q, k, v;
  std::optional<HostTensor> alibi, cu_q, cu_k, used_k;
  std::optional<Bound> bq, bk, bv, ba, bcq, bck, bu;

  BoundInputs(const Problem& p, const Target& t)
      : q(p.q), k(p.k), v(p.v), alibi(p.alibi), cu_q(p.cu_q), cu_k(p.cu_k), used_k(p.used_k) {
    bq.emplace(t, q);
    bk.emplace(t, k);
    bv.emplace(t, v);
    if (alibi) ba.emplace(t, *alibi);
    if (used_k) bu.emplace(t, *used_k);
    if (cu_q) {
      bcq.emplace(t, *cu_q);
      bck.emplace(t, *cu_k);
    }
  }
  fa::Options options(const Problem& p, const Target& t, const RunOpts& o) const {
    fa::Options opt = p.options(t);
    if (ba) opt.alibi_slopes = ba->view();
    if (bu) opt.seqused_k = bu->view();
    opt.num_threads = o.num_threads;
    opt.deterministic = o.deterministic;
    return opt;
  }
  fa::Varlen varlen(const Problem& p) const {
    return fa::Varlen{bcq->view(), bck->view(), p.max_q, p.max_k};
  }
  // The backend must not have written to any input.
  bool intact(const Problem& p) {
    bq->fetch();
    bk->fetch();
    bv->fetch();
    bool ok = bitwise_equal(q, p.q) && bitwise_equal(k, p.k) && bitwise_equal(v, p.v);
    if (ba) {
      ba->fetch();
      ok = ok && bitwise_equal(*alibi, *p.alibi);
    }
    if (bu) {
      bu->fetch();
      ok = ok && bitwise_equal(*used_k, *p.used_k);
    }
    if (bcq) {
      bcq->fetch();
      bck->fetch();
      ok = ok && bitwise_equal(*cu_q, *p.cu_q) && bitwise_equal(*cu_k, *p.cu_k);
    }
    return ok;
  }
};

}  // namespace

FwdResult run_forward(const Problem& p, const Target& t, const RunOpts& o) {
  const Layout ol = o.out_layout.value_or(p.c.out_layout);
  FwdResult r;
  r.out = make_tensor(p.c.dtype, p.out_shape(), ol);
  r.lse = make_tensor(DType::f32, p.lse_shape(), ol);
  BoundInputs in(p, t);
  Bound bo(t, r.out), bl(t, r.lse);
  const fa::Options opt = in.options(p, t, o);
  const fa::TensorView lse = bl.view();
  if (p.c.varlen())
    fa::forward_varlen(in.bq->view(), in.bk->view(), in.bv->view(), bo.view(),
                       o.with_lse ? &lse : nullptr, in.varlen(p), opt);
  else
    fa::forward(in.bq->view(), in.bk->view(), in.bv->view(), bo.view(), o.with_lse ? &lse : nullptr,
                opt);
  bo.fetch();
  bl.fetch();
  r.inputs_intact = in.intact(p);
  return r;
}

BwdResult run_backward(const Problem& p, const Target& t, const FwdResult& fwd, const RunOpts& o) {
  const Layout ol = o.out_layout.value_or(p.c.out_layout);
  BwdResult r;
  r.dq = make_tensor(p.c.dtype, p.q.shape, ol);
  r.dk = make_tensor(p.c.dtype, p.k.shape, ol);
  r.dv = make_tensor(p.c.dtype, p.v.shape, ol);
  BoundInputs in(p, t);
  HostTensor dout = p.dout, out = fwd.out, lse = fwd.lse;
  Bound bdo(t, dout), bo(t, out), bl(t, lse);
  Bound bdq(t, r.dq), bdk(t, r.dk), bdv(t, r.dv);
  const fa::Options opt = in.options(p, t, o);
  if (p.c.varlen())
    fa::backward_varlen(bdo.view(), in.bq->view(), in.bk->view(), in.bv->view(), bo.view(),
                        bl.view(), bdq.view(), bdk.view(), bdv.view(), in.varlen(p), opt);
  else
    fa::backward(bdo.view(), in.bq->view(), in.bk->view(), in.bv->view(), bo.view(), bl.view(),
                 bdq.view(), bdk.view(), bdv.view(), opt);
  bdq.fetch();
  bdk.fetch();
  bdv.fetch();
  bdo.fetch();
  bo.fetch();
  bl.fetch();
  r.inputs_intact = in.intact(p) && bitwise_equal(dout, p.dout) && bitwise_equal(out, fwd.out) &&
                    bitwise_equal(lse, fwd.lse);
  return r;
}

// ================================================================ accuracy

double max_abs(const std::vector<double>& x) {
  double m = 0.0;
  for (double v : x)
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  return m;
}

double fp32_bound(const std::vector<double>& ref, double max_s, bool gradient) {
  const double rel = gradient ? 1e-4 : 1e-5;
  const double per_s = gradient ? 2e-6 : 2e-7;
  return (rel + per_s * max_s) * std::max(1.0, max_abs(ref));
}

double max_err(const std::vector<double>& got, const std::vector<double>& want) {
  double m = 0.0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (std::isfinite(got[i]) && std::isfinite(want[i])) m = std::max(m, std::fabs(got[i] - want[i]));
  return m;
}

double lowp_bound(DType t, const std::vector<double>& ref, const std::vector<double>& naive) {
  double atol = 0.0;
  for (double r : ref)
    if (std::isfinite(r)) atol = std::max(atol, std::fabs(round_to(t, r + 0.3) - 0.3 - r));
  return 2.0 * max_err(naive, ref) + 2.0 * atol;
}

::testing::AssertionResult close(const std::string& what, const std::vector<double>& got,
                                 const std::vector<double>& want, double bound) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": sizes differ " << got.size() << " vs " << want.size();
  double worst = 0.0;
  size_t worst_i = 0;
  size_t special_mismatch = 0, first_special = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(g) || std::isnan(w) || std::isinf(g) || std::isinf(w)) {
      const bool same = (std::isnan(g) && std::isnan(w)) || g == w;
      if (!same && special_mismatch++ == 0) first_special = i;
      continue;
    }
    const double e = std::fabs(g - w);
    if (e > worst) {
      worst = e;
      worst_i = i;
    }
  }
  static const bool verbose = std::getenv("FATEST_VERBOSE") != nullptr;
  if (verbose)
    std::printf("  [accuracy] %-34s max|err| %.3e  bound %.3e  (%.1f%% of bound)\n", what.c_str(), worst,
                bound, bound > 0 ? 100.0 * worst / bound : 0.0);
  if (special_mismatch == 0 && worst <= bound) return ::testing::AssertionSuccess();
  auto f = ::testing::AssertionFailure();
  f << what << ": ";
  if (special_mismatch)
    f << special_mismatch << " NaN/Inf mismatches (first at flat index " << first_special << ": got "
      << got[first_special] << ", want " << want[first_special] << "); ";
  f << "max |err| = " << worst << " at flat index " << worst_i;
  if (!got.empty()) f << " (got " << got[worst_i] << ", want " << want[worst_i] << ")";
  f << ", bound " << bound;
  return f;
}

bool bitwise_equal(const HostTensor& a, const HostTensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.stride == b.stride && a.buf == b.buf;
}

bool any_nan(const std::vector<double>& x) {
  return std::any_of(x.begin(), x.end(), [](double v) { return std::isnan(v); });
}

// ================================================================ runner

namespace {

int64_t visible_count(const Problem& p, int64_t b, int64_t i) {
  int64_t n = 0;
  for (int64_t j = 0; j < p.len_k[b]; ++j) n += visible(p.c, p.len_q[b], p.len_k[b], i, j);
  return n;
}

bool key_used(const Problem& p, int64_t b, int64_t j) {
  for (int64_t i = 0; i < p.len_q[b]; ++i)
    if (visible(p.c, p.len_q[b], p.len_k[b], i, j)) return true;
  return false;
}

// Rows that see no key: out exactly 0, lse exactly -inf, dq exactly 0.
void expect_masked_rows(const Problem& p, const std::vector<double>& out,
                        const std::vector<double>& lse, const std::vector<double>* dq) {
  const Case& c = p.c;
  int64_t bad = 0;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < p.len_q[b]; ++i) {
      if (visible_count(p, b, i) > 0) continue;
      for (int64_t h = 0; h < c.Hq; ++h) {
        for (int64_t x = 0; x < c.Dv; ++x) bad += out[(p.row_q(b, i) * c.Hq + h) * c.Dv + x] != 0.0;
        bad += lse[p.lse_index(b, h, i)] != -kInf;
        if (dq)
          for (int64_t x = 0; x < c.Dqk; ++x) bad += (*dq)[(p.row_q(b, i) * c.Hq + h) * c.Dqk + x] != 0.0;
      }
    }
  EXPECT_EQ(bad, 0) << "elements of fully masked rows that are not exactly 0 / -inf";
}

// Keys no query sees: dk and dv exactly 0.
void expect_dead_keys(const Problem& p, const std::vector<double>& dk, const std::vector<double>& dv) {
  const Case& c = p.c;
  int64_t bad = 0;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t j = 0; j < p.len_k[b]; ++j) {
      if (key_used(p, b, j)) continue;
      for (int64_t hk = 0; hk < c.Hkv; ++hk) {
        for (int64_t x = 0; x < c.Dqk; ++x) bad += dk[(p.row_k(b, j) * c.Hkv + hk) * c.Dqk + x] != 0.0;
        for (int64_t x = 0; x < c.Dv; ++x) bad += dv[(p.row_k(b, j) * c.Hkv + hk) * c.Dv + x] != 0.0;
      }
    }
  EXPECT_EQ(bad, 0) << "gradient elements of keys no query sees that are not exactly 0";
}

double oracle_bound(const std::vector<double>& x) { return 1e-6 * std::max(1.0, max_abs(x)); }

}  // namespace

void check_forward(const Case& c, const Target& t) {
  SCOPED_TRACE(c.describe() + " | target " + t.name);
  if (t.supports && !t.supports(c)) GTEST_SKIP() << "target does not run this case";
  const Problem p = make_problem(c);
  const Naive exact = naive_attention(p, std::nullopt, false);
  const Truth ref = reference_truth(p, false);
  // The oracle itself agrees with the harness's independent float64 computation.
  EXPECT_TRUE(close("reference out vs harness float64", ref.out, exact.out, oracle_bound(exact.out)));
  EXPECT_TRUE(close("reference lse vs harness float64", ref.lse, exact.lse, oracle_bound(exact.lse)));

  const FwdResult f = run_forward(p, t);
  const std::vector<double> out = f.out.values(), lse = f.lse.values();
  double out_bound;
  if (c.dtype == DType::f32) {
    out_bound = fp32_bound(ref.out, exact.max_s, false);
  } else {
    const Naive low = naive_attention(p, c.dtype, false);
    out_bound = lowp_bound(c.dtype, ref.out, low.out);
  }
  EXPECT_TRUE(close("out", out, ref.out, out_bound));
  EXPECT_TRUE(close("lse", lse, ref.lse, fp32_bound(ref.lse, exact.max_s, false)));
  EXPECT_FALSE(any_nan(out)) << "NaN in out";
  EXPECT_FALSE(any_nan(lse)) << "NaN in lse";
  expect_masked_rows(p, out, lse, nullptr);
  EXPECT_TRUE(f.out.gaps_intact()) << "out: written outside the view";
  EXPECT_TRUE(f.lse.gaps_intact()) << "lse: written outside the view";
  EXPECT_TRUE(f.inputs_intact) << "an input was modified";
}

void check_backward(const Case& c, const Target& t, const RunOpts& o) {
  SCOPED_TRACE(c.describe() + " | target " + t.name);
  if (t.supports && !t.supports(c)) GTEST_SKIP() << "target does not run this case";
  const Problem p = make_problem(c);
  const Naive exact = naive_attention(p, std::nullopt, true);
  const Truth ref = reference_truth(p, true);
  EXPECT_TRUE(close("reference dq vs harness float64", ref.dq, exact.dq, oracle_bound(exact.dq)));
  EXPECT_TRUE(close("reference dk vs harness float64", ref.dk, exact.dk, oracle_bound(exact.dk)));
  EXPECT_TRUE(close("reference dv vs harness float64", ref.dv, exact.dv, oracle_bound(exact.dv)));

  const FwdResult f = run_forward(p, t, o);
  const BwdResult g = run_backward(p, t, f, o);
  const std::vector<double> dq = g.dq.values(), dk = g.dk.values(), dv = g.dv.values();
  double bq, bk, bv;
  if (c.dtype == DType::f32) {
    bq = fp32_bound(ref.dq, exact.max_s, true);
    bk = fp32_bound(ref.dk, exact.max_s, true);
    bv = fp32_bound(ref.dv, exact.max_s, true);
  } else {
    const Naive low = naive_attention(p, c.dtype, true);
    bq = lowp_bound(c.dtype, ref.dq, low.dq);
    bk = lowp_bound(c.dtype, ref.dk, low.dk);
    bv = lowp_bound(c.dtype, ref.dv, low.dv);
  }
  EXPECT_TRUE(close("dq", dq, ref.dq, bq));
  EXPECT_TRUE(close("dk", dk, ref.dk, bk));
  EXPECT_TRUE(close("dv", dv, ref.dv, bv));
  EXPECT_FALSE(any_nan(dq)) << "NaN in dq";
  EXPECT_FALSE(any_nan(dk)) << "NaN in dk";
  EXPECT_FALSE(any_nan(dv)) << "NaN in dv";
  expect_masked_rows(p, f.out.values(), f.lse.values(), &dq);
  expect_dead_keys(p, dk, dv);
  EXPECT_TRUE(g.dq.gaps_intact()) << "dq: written outside the view";
  EXPECT_TRUE(g.dk.gaps_intact()) << "dk: written outside the view";
  EXPECT_TRUE(g.dv.gaps_intact()) << "dv: written outside the view";
  EXPECT_TRUE(g.inputs_intact) << "an input of the backward was modified";
}

std::string test_name(const Case& c, const Target& t) {
  std::string s = c.id() + "_" + t.name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

}  // namespace fatest
