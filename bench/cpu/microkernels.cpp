// The CPU backend's tile products against the libraries that could replace
// them (issue 7 asks for a BLAS-grade micro-kernel, a library's or our own if
// it measures faster). One thread, operands in cache, the shapes the forward
// and backward loops call (docs/cpu_notes.md, "Library or our own"):
//
//   fwd S      C[M][64]  = Q tile [M][D]   . K^T tile [D][64]
//   fwd PV     C[M][D]  += P [M][128]      . V [128][D]
//   bwd S^T    C[64][64] = K tile [64][D]  . Q^T tile [D][64]
//   bwd dV     C[64][D] += P^T [64][64]    . dO tile [64][D]
//   bwd dQ^T   C[D][64] += K^T [D][64]     . dS^T [64][64]
//
// Each library gets its preferred operand layout, packed once outside the
// timing (the backend packs its B operands once per call too), and its result
// is checked against ours. Printed: GFLOP/s per shape and implementation.
//
//   ours       the backend's table (kernels.h): fp32 AVX-512 register blocks;
//              bf16 on AVX512-BF16 (vdpbf16ps) and, where present, AMX
//   libxsmm    JIT small-matrix kernels (fp32 smm; bf16 bsmm, VNNI B)
//   oneDNN     a matmul primitive per shape, created once (fp32; bf16 with
//              weights in the primitive's own blocked layout)
//   OpenBLAS   cblas_sgemm (loaded at run time, single-threaded)
//   BLIS       bli_sgemm, row strides (loaded at run time, single-threaded)
//   Eigen      Map<RowMajor> noalias products (compiled for AVX-512)
//
// Built when CMake finds libxsmm and oneDNN (bench/cpu/CMakeLists.txt; Debian:
// libxsmm-dev libdnnl-dev libeigen3-dev libopenblas-dev libblis-dev).
//
//   flashattn_microkernels [--seconds 0.3] [--hdims 64,128] [--rows 128]
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <dnnl.hpp>
#include <libxsmm.h>

#include "backends/cpu/kernels/isa.h"
#include "backends/cpu/kernels/kernels.h"
#include "microkernels_eigen.h"

namespace {

namespace cpu = flashattn::detail::cpu;

struct Shape {
  std::string name;
  int64_t M, N, K;
  bool accumulate;
};

uint16_t to_bf16(float x) {  // round to nearest even (finite inputs)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Calls per second of `once` over `seconds`, the best of three rounds.
double rate(const std::function<void()>& once, double seconds) {
  for (int i = 0; i < 50; ++i) once();
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    int64_t n = 0;
    double el = 0;
    do {
      for (int i = 0; i < 20; ++i) once();
      n += 20;
      el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (el < seconds / 3);
    best = std::max(best, static_cast<double>(n) / el);
  }
  return best;
}

// The operands of one shape: A [M][K], B [K][N] row-major (fp32 and their bf16
// rounding), C [M][N]; the fp32 values are bf16-exact, so both pipelines
// multiply the same numbers.
struct Operands {
  Shape s;
  std::vector<float> a, b, c0;
  std::vector<uint16_t> a16, b16;
  explicit Operands(const Shape& sh) : s(sh) {
    uint32_t x = 12345;
    auto next = [&] {
      x = x * 1664525u + 1013904223u;
      return from_bf16(to_bf16(static_cast<float>(x >> 8) / 16777216.f - 0.5f));
    };
    a.resize(static_cast<size_t>(s.M * s.K));
    b.resize(static_cast<size_t>(s.K * s.N));
    c0.resize(static_cast<size_t>(s.M * s.N));
    for (float& v : a) v = next();
    for (float& v : b) v = next();
    for (float& v : c0) v = next();
    for (float v : a) a16.push_back(to_bf16(v));
    for (float v : b) b16.push_back(to_bf16(v));
  }
  // B as VNNI pairs: panels of `width` columns, [N/width][K/2][width][2].
  std::vector<uint16_t> vnni(int64_t width) const {
    std::vector<uint16_t> y(static_cast<size_t>(s.K * s.N));
    for (int64_t p = 0; p < s.N / width; ++p)
      for (int64_t k = 0; k < s.K; ++k)
        for (int64_t j = 0; j < width; ++j)
          y[static_cast<size_t>(p * s.K * width + (k / 2) * width * 2 + j * 2 + k % 2)] =
              b16[static_cast<size_t>(k * s.N + p * width + j)];
    return y;
  }
  double flops() const { return 2.0 * static_cast<double>(s.M * s.N * s.K); }
};

// One implementation on one shape: `once` computes C into `c` (adding to it
// when the shape accumulates).
struct Impl {
  std::string name;
  std::function<void()> once;
  void (*begin)() = nullptr;  // around the calls (AMX: the tile configuration)
  void (*end)() = nullptr;
};

double max_rel_diff(const std::vector<float>& x, const std::vector<float>& ref) {
  double worst = 0, scale = 1e-30;
  for (float r : ref) scale = std::max(scale, static_cast<double>(std::fabs(r)));
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - ref[i]) / scale);
  return worst;
}

// Libraries loaded at run time, so OpenBLAS and BLIS (both export cblas_*) do
// not clash, and the binary runs where either is missing.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using BliSgemm = void (*)(int, int, int64_t, int64_t, int64_t, const float*, const float*, int64_t,
                          int64_t, const float*, int64_t, int64_t, const float*, float*, int64_t,
                          int64_t);
struct Dyn {
  CblasSgemm openblas = nullptr;
  BliSgemm blis = nullptr;
  std::string openblas_core, blis_arch;
  Dyn() {
    if (void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL)) {
      openblas = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
      if (auto set = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))) set(1);
      if (auto core = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"))) openblas_core = core();
    }
    if (void* h = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL)) {
      blis = reinterpret_cast<BliSgemm>(dlsym(h, "bli_sgemm"));
      if (auto set = reinterpret_cast<void (*)(int64_t)>(dlsym(h, "bli_thread_set_num_threads"))) set(1);
      auto id = reinterpret_cast<int (*)()>(dlsym(h, "bli_arch_query_id"));
      auto str = reinterpret_cast<const char* (*)(int)>(dlsym(h, "bli_arch_string"));
      if (id && str) blis_arch = str(id());
    }
  }
};

// A oneDNN matmul C (+)= A B with A, C row-major and B in `b_tag` (any: the
// primitive's choice, reordered once from row-major).
struct OneDnnMatmul {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  OneDnnMatmul(const Shape& s, dnnl::memory::data_type dt, void* a_ptr, void* b_rowmajor, float* c_ptr) {
    using dims = dnnl::memory::dims;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc a_md(dims{s.M, s.K}, dt, tag::ab),
        b_any(dims{s.K, s.N}, dt, tag::any), b_plain(dims{s.K, s.N}, dt, tag::ab),
        c_md(dims{s.M, s.N}, dnnl::memory::data_type::f32, tag::ab);
    dnnl::primitive_attr attr;
    if (s.accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.f);
      attr.set_post_ops(po);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), attr, eng);
    prim = dnnl::matmul(pd);
    a = dnnl::memory(a_md, eng, a_ptr);
    c = dnnl::memory(c_md, eng, c_ptr);
    dnnl::memory src(b_plain, eng, b_rowmajor);
    b = dnnl::memory(pd.weights_desc(), eng);
    dnnl::reorder(src, b).execute(strm, src, b);
    strm.wait();
  }
  void run() {
    prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  }
};

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoll(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.3;
  std::vector<int64_t> hdims = {64, 128};
  int64_t rows = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--hdims")) hdims = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rows")) rows = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown argument %s (see the header of bench/cpu/microkernels.cpp)\n", argv[i]);
      return 2;
    }
  }
  for (int64_t d : hdims)
    if (d <= 0 || d % 64 != 0) {
      std::fprintf(stderr, "--hdims: each must be a positive multiple of 64\n");
      return 2;
    }
  if (rows <= 0 || rows % 64 != 0) {
    std::fprintf(stderr, "--rows must be a positive multiple of 64\n");
    return 2;
  }
  omp_set_num_threads(1);  // oneDNN's OpenMP runtime: one thread, like every other side
  libxsmm_init();
  const Dyn dyn;
  std::printf("one thread; GFLOP/s (best of 3 rounds of %.2f s); libraries: libxsmm %s, oneDNN %d.%d.%d",
              seconds, LIBXSMM_VERSION, dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch);
  std::printf(", OpenBLAS %s, BLIS %s, Eigen %s\n", dyn.openblas ? dyn.openblas_core.c_str() : "absent",
              dyn.blis ? dyn.blis_arch.c_str() : "absent", eigen_version().c_str());
  std::printf("backend level on this CPU: %s\n", cpu::isa_name(cpu::supported_isa()));

  std::vector<Shape> shapes;
  for (int64_t d : hdims) {
    const std::string D = std::to_string(d);
    shapes.push_back({"fwd S   " + std::to_string(rows) + "x64x" + D, rows, 64, d, false});
    shapes.push_back({"fwd PV  " + std::to_string(rows) + "x" + D + "x128", rows, d, 128, true});
    shapes.push_back({"bwd S^T 64x64x" + D, 64, 64, d, false});
    shapes.push_back({"bwd dV  64x" + D + "x64", 64, d, 64, true});
    shapes.push_back({"bwd dQ^T " + D + "x64x64", d, 64, 64, true});
  }

  for (const bool bf16 : {false, true}) {
    std::printf("\n%s products (%s):\n", bf16 ? "bf16" : "fp32",
                bf16 ? "bf16 inputs, fp32 accumulation and output" : "fp32 throughout");
    bool header = false;
    for (const Shape& s : shapes) {
      Operands op(s);
      std::vector<float> c(op.c0), ref;
      const int64_t M = s.M, N = s.N, K = s.K;
      const float one = 1.f, beta = s.accumulate ? 1.f : 0.f;
      std::vector<Impl> impls;
      std::vector<uint16_t> b_ours = op.vnni(16), b_xsmm = op.vnni(N);

      if (!bf16) {
        const cpu::Kernels& k = cpu::kernels(cpu::Isa::avx512);
        if (k.isa == cpu::Isa::avx512)
          impls.push_back({"ours", [&] { k.gemm_f32(M, N, K, op.a.data(), K, op.b.data(), N, c.data(), N, s.accumulate); }});
      } else {
        for (const cpu::Isa isa : {cpu::Isa::avx512_bf16, cpu::Isa::amx}) {
          const cpu::Kernels& k = cpu::kernels(isa);
          if (k.isa != isa || !k.gemm_bf16) continue;
          impls.push_back({std::string("ours ") + cpu::isa_name(isa),
                           [&k, &op, &c, &b_ours, s] {
                             k.gemm_bf16(s.M, s.N, s.K, op.a16.data(), s.K, b_ours.data(), s.K * 16, c.data(),
                                         s.N, s.accumulate);
                           },
                           k.thread_begin, k.thread_end});
        }
      }
      // libxsmm is column-major: C^T [N][M] = B^T [N][K] . A^T [K][M], so its
      // A is our B (leading dimension N) and its B our A (leading dimension K).
      const libxsmm_blasint xm = N, xn = M, xk = K, lda = N, ldb = K, ldc = N;
      if (!bf16) {
        const libxsmm_smmfunction f = libxsmm_smmdispatch(xm, xn, xk, &lda, &ldb, &ldc, &one, &beta, nullptr, nullptr);
        if (f) impls.push_back({"libxsmm", [&, f] { f(op.b.data(), op.a.data(), c.data()); }});
      } else {
        const int flags = LIBXSMM_GEMM_FLAG_VNNI_A;
        const libxsmm_bsmmfunction f = libxsmm_bsmmdispatch(xm, xn, xk, &lda, &ldb, &ldc, &one, &beta, &flags, nullptr);
        if (f)
          impls.push_back({"libxsmm", [&, f] {
                             f(reinterpret_cast<const libxsmm_bfloat16*>(b_xsmm.data()),
                               reinterpret_cast<const libxsmm_bfloat16*>(op.a16.data()), c.data());
                           }});
      }
      std::unique_ptr<OneDnnMatmul> dn;
      try {
        if (bf16)
          dn = std::make_unique<OneDnnMatmul>(s, dnnl::memory::data_type::bf16, op.a16.data(), op.b16.data(), c.data());
        else
          dn = std::make_unique<OneDnnMatmul>(s, dnnl::memory::data_type::f32, op.a.data(), op.b.data(), c.data());
        impls.push_back({"oneDNN", [&] { dn->run(); }});
      } catch (const dnnl::error& e) {
        std::printf("  (oneDNN: %s)\n", e.what());
      }
      if (!bf16) {
        if (dyn.openblas)
          impls.push_back({"OpenBLAS", [&] {
                             dyn.openblas(101, 111, 111, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.f,
                                          op.a.data(), static_cast<int>(K), op.b.data(), static_cast<int>(N), beta,
                                          c.data(), static_cast<int>(N));
                           }});
        if (dyn.blis)
          impls.push_back({"BLIS", [&] {
                             dyn.blis(0, 0, M, N, K, &one, op.a.data(), K, 1, op.b.data(), N, 1, &beta, c.data(), N, 1);
                           }});
        impls.push_back({"Eigen", [&] { eigen_gemm(M, N, K, op.a.data(), op.b.data(), c.data(), s.accumulate); }});
      }

      if (!header) {
        std::printf("%-22s", "shape");
        for (const Impl& im : impls) std::printf(" %16s", im.name.c_str());
        std::printf("\n");
        header = true;
      }
      std::printf("%-22s", s.name.c_str());
      for (size_t i = 0; i < impls.size(); ++i) {
        // Correctness first: one call from c0 against the first (ours).
        if (impls[i].begin) impls[i].begin();
        c = op.c0;
        impls[i].once();
        if (i == 0) ref = c;
        const double diff = max_rel_diff(c, ref);
        if (diff > (bf16 ? 1e-2 : 1e-5)) {
          std::printf(" %16s", "WRONG");
        } else {
          // Timing: accumulating shapes keep adding into c (same work per call).
          const double r = rate(impls[i].once, seconds);
          std::printf(" %16.1f", r * op.flops() / 1e9);
        }
        if (impls[i].end) impls[i].end();
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
  return 0;
}
