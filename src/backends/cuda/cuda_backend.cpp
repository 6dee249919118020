// The CUDA backend's host side: refuses what the kernels cannot run (before any
// work), then launches on the caller's stream. No host synchronisation and only
// stream-ordered allocation on this path, so calls can be captured in a CUDA graph.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/kv_append.h"
#include "backends/cuda/scratch.h"
#include "backends/env.h"
#include "flashattn/error.h"
#include "kernels/common/kernel_params.h"
#include "kernels/decode/decode.h"
#include "kernels/sm80/fwd_kv.h"
#include "kernels/sm80/launch.h"
#include "kernels/sm90/bwd_order.h"
#include "kernels/sm90/fwd_kv.h"
#include "kernels/sm90/launch.h"

namespace flashattn::detail {
namespace {

std::string cuda_message(cudaError_t e) { return std::string(cudaGetErrorString(e)); }

// Restores the caller's current device when a call had to switch.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) {
      if (cudaSetDevice(device) != cudaSuccess)
        throw Error(ErrorKind::runtime, "q", "cannot use cuda:" + std::to_string(device));
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

void check_device_pointer(const char* name, const void* ptr, int device) {
  if (ptr == nullptr) return;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state of the query
    throw Error(ErrorKind::value, name, "is not a pointer the CUDA runtime knows");
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
    throw Error(ErrorKind::value, name,
                "points to host memory, but the cuda backend needs device memory");
  if (a.device != device)
    throw Error(ErrorKind::value, name,
                "is on cuda:" + std::to_string(a.device) + " but q is on cuda:" +
                    std::to_string(device));
}

// 16-byte vector loads need 16-byte aligned rows.
void check_alignment(const char* name, const void* ptr, int64_t elem, int64_t batch_stride,
                     int64_t row_stride, int64_t head_stride) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
    throw Error(ErrorKind::value, name, "base pointer must be 16-byte aligned for the cuda backend");
  const int64_t per16 = 16 / elem;
  for (int64_t s : {batch_stride, row_stride, head_stride})
    if (s % per16 != 0)
      throw Error(ErrorKind::value, name,
                  "strides must be multiples of " + std::to_string(per16) +
                      " elements (16 bytes) for the cuda backend, got " + std::to_string(s));
}

void check_head_dim(const char* name, int64_t d) {
  if (d % 8 != 0 || d > 256)
    throw Error(ErrorKind::value, name,
                "head dim must be a multiple of 8 and at most 256 on the cuda backend, got " +
                    std::to_string(d));
}

// A [B, S, H, D] operand: device memory of this device, 16-byte aligned rows,
// and row strides small enough for the kernels' 32-bit in-tile offsets.
struct TensorArg {
  const char* name;
  const void* ptr;
  int64_t batch_stride, row_stride, head_stride;
};

void check_tensor_arg(const TensorArg& t, int device, int64_t elem) {
  check_device_pointer(t.name, t.ptr, device);
  check_alignment(t.name, t.ptr, elem, t.batch_stride, t.row_stride, t.head_stride);
  if (t.row_stride >= (int64_t(1) << 24))
    throw Error(ErrorKind::value, t.name,
                "row strides of 2^24 elements or more are not supported on cuda, got " +
                    std::to_string(t.row_stride));
}

// What the host derives once per call for the kernels: the dropout stream and
// the scale that turns scores into exp2 exponents.
void derive_kernel_values(const FwdParams& p, DropoutRng& rng, float& scale_log2) {
  if (p.dropout_p > 0.f) rng = DropoutRng::make(p.seed, p.offset, p.dropout_p);
  constexpr float kLog2e = 1.4426950408889634f;
  scale_log2 = needs_score_mods(p) ? kLog2e : p.softmax_scale * kLog2e;
}

// The Hopper kernels run where they exist for the call (compute capability 9.0,
// sm_90a in the build, a supported problem); FLASHATTN_FORCE_SM80=1 picks the
// portable kernels anyway (tests and benchmarks compare the two).
bool on_sm90(int device) {
#ifdef FLASHATTN_WITH_SM90
  const char* force = std::getenv("FLASHATTN_FORCE_SM80");
  if (force != nullptr && force[0] != '\0' && force[0] != '0') return false;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
#else
  (void)device;
  return false;
#endif
}

// The backward's scratch (row dots, fp32 dQ accumulator) comes from a stream-ordered
// pool of flashattn's own per device that keeps freed memory for the next call. The
// device's default pool returns its memory to the driver at every synchronisation
// (release threshold 0), so each call after one re-mapped its whole scratch: a cost
// paid per call, largest next to short kernels. Held memory: the largest scratch
// of a call so far. Under graph capture the allocation becomes a graph node, as
// before (the pool only gives its properties).
cudaMemPool_t scratch_pool(int device) {
  static std::mutex mutex;
  static std::vector<cudaMemPool_t> pools;
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(pools.size())) pools.resize(device + 1, nullptr);
  if (pools[device] == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;  // no pools here: the caller falls back to cudaMallocAsync
    }
    // FLASHATTN_CUDA_POOL_KEEP_MB caps what the pool keeps across synchronisations
    // (0: hand everything back, as the default pool does); unset or unparsable:
    // no cap, the CPU backend's FLASHATTN_CPU_WORKSPACE_MB in spirit.
    uint64_t keep = env_mebibytes("FLASHATTN_CUDA_POOL_KEEP_MB").value_or(UINT64_MAX);
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    pools[device] = pool;
  }
  return pools[device];
}

// The kv_append kernel's arguments for p's new rows (validated: batched, seqused_k given).
KvAppend append_args(const HostFwdParams& p) {
  const KvCache& kv = p.kv;
  const int64_t elem = dtype_size(p.dtype);
  KvAppend a{};
  a.side[0] = {const_cast<void*>(p.k), kv.k_new.data, p.k_batch_stride, p.k_row_stride, p.k_head_stride,
               kv.k_new.batch_stride, kv.k_new.row_stride, kv.k_new.head_stride, int(p.head_dim_qk * elem)};
  a.side[1] = {const_cast<void*>(p.v), kv.v_new.data, p.v_batch_stride, p.v_row_stride, p.v_head_stride,
               kv.v_new.batch_stride, kv.v_new.row_stride, kv.v_new.head_stride, int(p.head_dim_v * elem)};
  a.element_bytes = int(elem);
  a.batch = int(p.batch);
  a.new_rows = int(kv.new_rows);
  a.heads_kv = int(p.heads_kv);
  a.seqlen_k = int(p.seqlen_k);
  a.seqused_k = kv.seqused_k;
  a.block_table = kv.block_table;
  a.block_table_stride = kv.block_table_stride;
  a.page_size = int(kv.page_size);
  a.num_blocks = int(kv.num_blocks);
  return a;
}

// The decoding path: its kernels, with the splits' partial results in scratch from the
// pool when there is more than one split.
void decode_forward(const HostFwdParams& p, const FwdKernelParams& kp, const decode::Plan& plan, cudaStream_t stream) {
  decode::DecodeArgs a;
  static_cast<FwdKernelParams&>(a) = kp;
  a.seqused_k = p.kv.seqused_k;
  a.block_table = p.kv.block_table;
  a.block_table_stride = p.kv.block_table_stride;
  a.page_size = int(p.kv.page_size);
  a.num_blocks = int(p.kv.num_blocks);
  a.row_groups = plan.row_groups;
  a.splits = plan.splits;
  a.stages = plan.stages;
  a.score_mods = needs_score_mods(p);
  void* scratch = nullptr;
  cudaError_t err = cudaSuccess;
  if (plan.scratch_bytes > 0) {
    err = cuda_scratch(&scratch, plan.scratch_bytes, p.device.index, stream);
    if (err != cudaSuccess) {
      cudaGetLastError();  // not left for the next call's launch check
      throw Error(ErrorKind::runtime, "", "CUDA forward could not get " + std::to_string(plan.scratch_bytes) +
                                              " bytes of scratch: " + cuda_message(err));
    }
    a.o_part = static_cast<float*>(scratch);
    a.lse_part = reinterpret_cast<float*>(static_cast<char*>(scratch) + plan.lse_offset);
  }
  err = decode::run(a, plan, stream);
  if (scratch != nullptr) cudaFreeAsync(scratch, stream);
  if (err != cudaSuccess)
    throw Error(ErrorKind::runtime, "", "CUDA forward launch failed: " + cuda_message(err));
}

}  // namespace

cudaError_t cuda_scratch(void** ptr, size_t bytes, int device, cudaStream_t stream) {
  cudaMemPool_t pool = scratch_pool(device);
  return pool != nullptr ? cudaMallocFromPoolAsync(ptr, bytes, pool, stream) : cudaMallocAsync(ptr, bytes, stream);
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void cuda_check(const FwdParams& p, bool backward) {
  const int n = cuda_device_count();
  if (n == 0)
    throw Error(ErrorKind::unsupported, "backend",
                "'cuda' was asked for but no CUDA device is visible (driver missing or no GPU)");
  const int device = p.device.index;
  if (device < 0 || device >= n)
    throw Error(ErrorKind::value, "q", "is on cuda:" + std::to_string(device) + " but only " +
                                           std::to_string(n) + " CUDA devices are visible");
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (major < 8)
    throw Error(ErrorKind::unsupported, "backend",
                "the cuda backend needs compute capability 8.0 or newer (A100, RTX 30xx, H100), "
                "cuda:" + std::to_string(device) + " has " + std::to_string(major) + ".x");
  if (p.dtype != DType::f16 && p.dtype != DType::bf16)
    throw Error(ErrorKind::type, "q",
                std::string("the cuda backend computes float16 and bfloat16, got ") +
                    to_string(p.dtype));
  check_head_dim("q", p.head_dim_qk);
  check_head_dim("v", p.head_dim_v);
  if (sm80::forward_head_dim(p) == 0)
    throw Error(ErrorKind::unsupported, "q",
                "no kernel for head dim " + std::to_string(std::max(p.head_dim_qk, p.head_dim_v)) +
                    " and " + to_string(p.dtype) +
                    " in this build (see FLASHATTN_CUDA_HEAD_DIMS / FLASHATTN_CUDA_DTYPES)");
  if (p.batch > 65535) throw Error(ErrorKind::value, "q", "batch above 65535 is not supported on cuda");
  if (p.heads_q > 65535) throw Error(ErrorKind::value, "q", "more than 65535 heads are not supported on cuda");
  if (p.seqlen_q > (int64_t(1) << 30) || p.seqlen_k > (int64_t(1) << 30))
    throw Error(ErrorKind::value, "q", "sequence lengths above 2^30 are not supported on cuda");

  for (auto [name, ptr] : {std::pair<const char*, const void*>{"lse", p.lse},
                            {"cu_seqlens_q", p.cu_seqlens_q},
                            {"cu_seqlens_k", p.cu_seqlens_k},
                            {"alibi_slopes", p.alibi_slopes}})
    check_device_pointer(name, ptr, device);
  std::vector<TensorArg> tensors = {
      {"q", p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride},
      {"k", p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride},
      {"v", p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride},
      {"out", p.out, p.o_batch_stride, p.o_row_stride, p.o_head_stride}};
  if (backward) {
    const auto& b = static_cast<const BwdParams&>(p);
    tensors.insert(tensors.end(),
                   {{"dout", b.dout, b.do_batch_stride, b.do_row_stride, b.do_head_stride},
                    {"dq", b.dq, b.dq_batch_stride, b.dq_row_stride, b.dq_head_stride},
                    {"dk", b.dk, b.dk_batch_stride, b.dk_row_stride, b.dk_head_stride},
                    {"dv", b.dv, b.dv_batch_stride, b.dv_row_stride, b.dv_head_stride}});
  }
  for (const TensorArg& t : tensors) check_tensor_arg(t, device, dtype_size(p.dtype));
}

void cuda_check_kv(const HostFwdParams& p) {
  const KvCache& kv = p.kv;
  check_device_pointer("seqused_k", kv.seqused_k, p.device.index);
  check_device_pointer("block_table", kv.block_table, p.device.index);
  if (kv.num_blocks > std::numeric_limits<int32_t>::max())  // 0 when not paged
    throw Error(ErrorKind::value, "k", "pools of 2^31 blocks or more are not supported on cuda, got " +
                                           std::to_string(kv.num_blocks));
  if (kv.new_rows == 0) return;
  const int64_t elem = dtype_size(p.dtype);
  check_tensor_arg({"k_new", kv.k_new.data, kv.k_new.batch_stride, kv.k_new.row_stride, kv.k_new.head_stride},
                   p.device.index, elem);
  check_tensor_arg({"v_new", kv.v_new.data, kv.v_new.batch_stride, kv.v_new.row_stride, kv.v_new.head_stride},
                   p.device.index, elem);
}

void cuda_forward(const HostFwdParams& p) {
  DeviceGuard guard(p.device.index);
  FwdKernelParams kp;
  static_cast<FwdParams&>(kp) = p;
  derive_kernel_values(p, kp.rng, kp.scale_log2);
  const auto stream = static_cast<cudaStream_t>(p.stream);
  const KvCache& kv = p.kv;
  if (kv.new_rows > 0) {  // the step's rows first, on the same stream
    const cudaError_t err = kv_append(append_args(p), stream);
    if (err != cudaSuccess)
      throw Error(ErrorKind::runtime, "", "CUDA launch writing k_new / v_new failed: " + cuda_message(err));
  }
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return;  // nothing to attend
  // Few query rows per kv head (decoding): the split-KV kernels (kernels/decode).
  if (const decode::Plan plan = decode::plan(p, p.device.index); plan.ok) {
    decode_forward(p, kp, plan, stream);
    return;
  }
  // A KV cache: used keys of a batched cache on the Hopper forward where it runs (its
  // first key tile ends at the last used key: sm90/fwd_kv.h); paged or packed caches on
  // the sm80 forward.
  cudaError_t err;
  const bool hopper = on_sm90(p.device.index) && sm90::supports_forward(p);
  if (kv.seqused_k != nullptr && kv.block_table == nullptr && !p.is_varlen() && hopper) {
    err = sm90::forward_used(kp, kv.seqused_k, stream);
  } else if (kv.seqused_k != nullptr || kv.block_table != nullptr) {
    sm80::FwdKvArgs a(kp, kv.seqused_k);
    a.block_table = kv.block_table;
    a.block_table_stride = kv.block_table_stride;
    a.page_size = int(kv.page_size);
    a.num_blocks = int(kv.num_blocks);
    err = sm80::forward_kv(a, stream);
  } else {
    err = hopper ? sm90::forward(kp, stream) : sm80::forward(kp, stream);
  }
  if (err != cudaSuccess)
    throw Error(ErrorKind::runtime, "", "CUDA forward launch failed: " + cuda_message(err));
}

void cuda_backward(const BwdParams& p) {
  DeviceGuard guard(p.device.index);
  BwdKernelParams kp;
  static_cast<BwdParams&>(kp) = p;
  derive_kernel_values(p, kp.rng, kp.scale_log2);
  // Scratch, stream-ordered so the call stays capturable in a graph: d_i = dO_i . O_i
  // per query row and, unless deterministic, the fp32 dQ accumulator the atomics
  // add into (head_dim_qk floats per row).
  const auto stream = static_cast<cudaStream_t>(p.stream);
  const int64_t rows = p.heads_q * (p.is_varlen() ? p.total_q : p.batch * p.seqlen_q);
  const size_t dot_bytes = (static_cast<size_t>(std::max<int64_t>(1, rows)) * sizeof(float) + 255) / 256 * 256;
  const bool hopper = on_sm90(p.device.index) && sm90::supports_backward(p);
  // The Hopper backward keeps the accumulator when deterministic too: its key
  // blocks add into it in a fixed order, kept by counters after it
  // (sm90/bwd_order.h), zeroed here.
  // With dQ apart (hd192 / hd256 without score modifiers, when built in) the Hopper
  // kernels write dQ themselves: no accumulator, no counters.
  const bool apart = hopper && !sm90::backward_needs_dq_accum(p);
  const bool order = hopper && p.deterministic && !apart;
  const int64_t accum_floats = rows * p.head_dim_qk;
  const int64_t order_count = order ? std::max<int64_t>(1, p.batch) * p.heads_q * sm90::dq_order_per_head(p.seqlen_q) : 0;
  const int64_t order_at = sm90::dq_order_offset(accum_floats);  // floats
  const bool accum = (!p.deterministic || hopper) && !apart;
  const size_t dq_bytes = accum ? static_cast<size_t>(order ? order_at + order_count : accum_floats) * sizeof(float) : 0;
  const size_t lse_bytes = dot_bytes;  // the LSE in log2 units (kp.lse_log2), read by both backwards
  const size_t bytes = dot_bytes + lse_bytes + dq_bytes;
  void* scratch = nullptr;
  cudaError_t err = cuda_scratch(&scratch, bytes, p.device.index, stream);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not left for the next call's launch check
    throw Error(ErrorKind::runtime, "", "CUDA backward could not get " + std::to_string(bytes) +
                                            " bytes of scratch: " + cuda_message(err));
  }
  kp.row_dot = static_cast<float*>(scratch);
  kp.lse_log2 = reinterpret_cast<float*>(static_cast<char*>(scratch) + dot_bytes);
  if (dq_bytes > 0) kp.dq_accum = reinterpret_cast<float*>(static_cast<char*>(scratch) + dot_bytes + lse_bytes);
  if (order) err = cudaMemsetAsync(kp.dq_accum + order_at, 0, static_cast<size_t>(order_count) * sizeof(int), stream);
  if (err == cudaSuccess) err = hopper ? sm90::backward(kp, stream) : sm80::backward(kp, stream);
  cudaFreeAsync(scratch, stream);
  if (err != cudaSuccess)
    throw Error(ErrorKind::runtime, "", "CUDA backward launch failed: " + cuda_message(err));
}

}  // namespace flashattn::detail
