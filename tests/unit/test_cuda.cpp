// The suite's cases on the CUDA backend (device buffers), plus what only a GPU
// backend has: refusals of host or misaligned pointers, CUDA-graph capture.
// Skipped when the build has no CUDA backend or no GPU is visible.
#include "flashattn/flashattn.h"

#if defined(FLASHATTN_WITH_CUDA)

#include <cuda_runtime_api.h>

#include <stdexcept>

#include "cases.h"

namespace fatest {
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

const Target& cuda_target() {
  static const Target target = [] {
    Target t;
    t.name = "cuda";
    t.backend = fa::Backend::cuda;
    t.device = {fa::DeviceType::cuda, 0};
    t.alloc = [](size_t n) {
      void* p = nullptr;
      cuda_ok(cudaMalloc(&p, n > 0 ? n : 16), "cudaMalloc");
      return p;
    };
    t.release = [](void* p) { cudaFree(p); };
    t.to_device = [](void* d, const void* s, size_t n) {
      cuda_ok(cudaMemcpy(d, s, n, cudaMemcpyHostToDevice), "upload");
    };
    t.to_host = [](void* d, const void* s, size_t n) {
      cuda_ok(cudaDeviceSynchronize(), "kernel");
      cuda_ok(cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost), "download");
    };
    // fp16/bf16, head dims that are multiples of 8 up to 256, 16-byte rows.
    t.supports = [](const Case& c) {
      return c.dtype != DType::f32 && c.Dqk % 8 == 0 && c.Dv % 8 == 0 && c.Dqk <= 256 &&
             c.Dv <= 256 && c.layout != Layout::padded && c.out_layout != Layout::padded;
    };
    return t;
  }();
  return target;
}

bool have_gpu() { return fa::cuda_available(); }

std::vector<CaseParam> on_cuda(const std::vector<Case>& cases) {
  std::vector<CaseParam> out;
  for (const Case& c : cases)
    if (cuda_target().supports(c)) out.emplace_back(c, cuda_target());
  return out;
}

std::vector<Case> low_precision(std::vector<Case> cases) {
  std::vector<Case> out;
  for (Case c : cases) {
    if (c.dtype == DType::f32) continue;
    out.push_back(std::move(c));
  }
  return out;
}

class CudaForward : public ::testing::TestWithParam<CaseParam> {};

TEST_P(CudaForward, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  check_forward(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Features, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(feature_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Lengths, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(length_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Special, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(special_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Masks, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(mask_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Varlen, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(varlen_cases()))), CaseParamName());
INSTANTIATE_TEST_SUITE_P(Layouts, CudaForward, ::testing::ValuesIn(on_cuda(low_precision(layout_cases()))), CaseParamName());

// Every instantiated head dim, odd dims padded up to the next one, and Dv != Dqk.
std::vector<Case> head_dim_cases() {
  std::vector<Case> cases;
  for (int64_t d : {8, 32, 40, 64, 72, 96, 128, 136, 160, 192, 200, 256})
    for (bool causal : {false, true})
      cases.push_back(Case("hdim" + std::to_string(d) + (causal ? "_causal" : ""))
                          .batch(2).seq(173, 301).heads(4, 2).dims(d, d).causal_mask(causal));
  cases.push_back(Case("dqk128_dv64").batch(2).seq(130, 200).heads(2, 1).dims(128, 64));
  cases.push_back(Case("dqk64_dv128").batch(2).seq(130, 200).heads(2, 2).dims(64, 128).causal_mask());
  cases.push_back(Case("dqk192_dv128").seq(300, 300).heads(2, 1).dims(192, 128).win(64, 16));
  return in_dtypes(cases, {DType::f16, DType::bf16});
}
INSTANTIATE_TEST_SUITE_P(HeadDims, CudaForward, ::testing::ValuesIn(on_cuda(head_dim_cases())), CaseParamName());

// Device buffers for a small contiguous [B, S, H, D] problem.
struct DeviceProblem {
  int64_t B = 2, S = 64, H = 2, D = 64;
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  DeviceProblem() {
    const size_t bytes = static_cast<size_t>(B * S * H * D * 2);
    for (void** p : {&q, &k, &v, &o}) {
      cuda_ok(cudaMalloc(p, bytes + 16), "cudaMalloc");
      cuda_ok(cudaMemset(*p, 0, bytes + 16), "memset");
    }
  }
  ~DeviceProblem() {
    for (void* p : {q, k, v, o}) cudaFree(p);
  }
  fa::TensorView view(void* p, int64_t offset_bytes = 0) const {
    return fa::TensorView::contiguous(static_cast<char*>(p) + offset_bytes, DType::bf16, {B, S, H, D},
                                      {fa::DeviceType::cuda, 0});
  }
};

void expect_refused(const std::function<void()>& call, const std::string& argument) {
  try {
    call();
    ADD_FAILURE() << "expected a refusal naming '" << argument << "'";
  } catch (const fa::Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

TEST(CudaErrors, RefusesWhatTheKernelsCannotRun) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  DeviceProblem d;
  fa::Options opt;
  opt.backend = fa::Backend::cuda;
  std::vector<uint16_t> host(static_cast<size_t>(d.B * d.S * d.H * d.D));
  auto host_view = fa::TensorView::contiguous(host.data(), DType::bf16, {d.B, d.S, d.H, d.D},
                                              {fa::DeviceType::cuda, 0});
  // Host memory labelled as CUDA memory.
  expect_refused([&] { fa::forward(host_view, d.view(d.k), d.view(d.v), d.view(d.o), nullptr, opt); }, "q");
  // Base pointer off the 16-byte grid.
  expect_refused([&] { fa::forward(d.view(d.q, 2), d.view(d.k), d.view(d.v), d.view(d.o), nullptr, opt); }, "q");
  // Host tensors with backend cuda.
  auto cpu_view = fa::TensorView::contiguous(host.data(), DType::bf16, {d.B, d.S, d.H, d.D});
  expect_refused([&] { fa::forward(cpu_view, cpu_view, cpu_view, cpu_view, nullptr, opt); }, "backend");
  // Head dim that is not a multiple of 8.
  auto odd = fa::TensorView::contiguous(d.q, DType::bf16, {1, 8, 1, 12}, {fa::DeviceType::cuda, 0});
  auto odd_o = fa::TensorView::contiguous(d.o, DType::bf16, {1, 8, 1, 12}, {fa::DeviceType::cuda, 0});
  expect_refused([&] { fa::forward(odd, odd, odd, odd_o, nullptr, opt); }, "q");
  // float32 is a CPU dtype.
  auto f32 = fa::TensorView::contiguous(d.q, DType::f32, {1, 8, 1, 16}, {fa::DeviceType::cuda, 0});
  auto f32_o = fa::TensorView::contiguous(d.o, DType::f32, {1, 8, 1, 16}, {fa::DeviceType::cuda, 0});
  try {
    fa::forward(f32, f32, f32, f32_o, nullptr, opt);
    ADD_FAILURE() << "float32 accepted";
  } catch (const fa::Error& e) {
    EXPECT_EQ(e.kind(), fa::ErrorKind::type) << e.what();
  }
  // A device that does not exist.
  auto far = d.view(d.q);
  far.device.index = 999;
  expect_refused([&] {
    auto k = d.view(d.k), v = d.view(d.v), o = d.view(d.o);
    k.device.index = v.device.index = o.device.index = 999;
    fa::forward(far, k, v, o, nullptr, opt);
  }, "q");
}

TEST(CudaGraph, ForwardCapturesAndReplays) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  DeviceProblem d;
  cudaStream_t stream;
  cuda_ok(cudaStreamCreate(&stream), "stream");
  fa::Options opt;
  opt.backend = fa::Backend::cuda;
  opt.causal = true;
  opt.stream = stream;
  fa::forward(d.view(d.q), d.view(d.k), d.view(d.v), d.view(d.o), nullptr, opt);  // warm-up outside capture
  cudaGraph_t graph;
  cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  fa::forward(d.view(d.q), d.view(d.k), d.view(d.v), d.view(d.o), nullptr, opt);
  cuda_ok(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec;
  cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (int i = 0; i < 3; ++i) cuda_ok(cudaGraphLaunch(exec, stream), "replay");
  cuda_ok(cudaStreamSynchronize(stream), "sync");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace fatest

#endif  // FLASHATTN_WITH_CUDA
