// flashattn: exact attention, softmax(scale * Q K^T) V, computed the FlashAttention
// way. This is the whole public C++ API; see docs/contract.md for the meaning of
// every argument.
//
//   #include <flashattn/flashattn.h>
//   namespace fa = flashattn;
//   auto q = fa::TensorView::contiguous(q_ptr, fa::DType::f32, {B, Sq, Hq, D});
//   ...
//   fa::Options opt;
//   opt.causal = true;
//   fa::forward(q, k, v, out, &lse, opt);
//
// Callers own every buffer: outputs are written in place. Every call validates all
// of its arguments before any work and throws flashattn::Error naming the argument
// at fault; nothing is written then.
#pragma once

#include <cstdint>
#include <optional>

#include "flashattn/error.h"
#include "flashattn/params.h"
#include "flashattn/types.h"

#define FLASHATTN_VERSION_MAJOR 0
#define FLASHATTN_VERSION_MINOR 1
#define FLASHATTN_VERSION_PATCH 0

namespace flashattn {

const char* version();

struct Window {
  int64_t left = -1;   // keys visible to the left of the diagonal; -1: unbounded
  int64_t right = -1;  // keys visible to the right of the diagonal; -1: unbounded
};

// The most threads a CPU call may ask for (Options::num_threads): each thread keeps
// its own scratch, and OpenMP would try to start every one of them (a million
// crashed the process).
inline constexpr int kMaxThreads = 4096;

struct Options {
  std::optional<float> softmax_scale;  // default 1/sqrt(Dqk)
  bool causal = false;
  Window window{};
  float softcap = 0.f;                 // 0: off
  std::optional<TensorView> alibi_slopes;  // fp32 [Hq] or [B, Hq]
  float dropout_p = 0.f;               // in [0, 1)
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool deterministic = false;          // bitwise reproducible backward
  Backend backend = Backend::automatic;
  void* stream = nullptr;              // cudaStream_t; null: the default stream
  int num_threads = 0;                 // CPU backends; 0: OpenMP's default; at most kMaxThreads
  // int32 [B], forward only: sequence b attends to its first seqused_k[b] keys, the
  // filled part of a KV cache (masks align at that end). Unset: every key.
  std::optional<TensorView> seqused_k;
  // int32 [B, max_blocks], forward only, batched: a paged KV cache. k and v are then
  // pools [num_blocks, page_size, Hkv, D] (page_size a multiple of 64), and sequence b's
  // key j is row j % page_size of block block_table[b, j / page_size]; the sequence
  // holds max_blocks * page_size keys, or seqused_k[b]. Entries past the used keys are
  // never read (they may hold anything).
  std::optional<TensorView> block_table;
  // With seqused_k, forward only, batched, host memory: one decoding step's new keys
  // k_new [B, S_new, Hkv, Dqk] and values v_new [B, S_new, Hkv, Dv] (k's dtype), written
  // into k and v (the caches, paged or not) as sequence b's keys seqused_k[b] - S_new ..
  // seqused_k[b] - 1 before the attention, which sees them. Everything is checked before
  // the first write; k and v are then outputs too (no two indices may share memory).
  std::optional<TensorView> k_new;
  std::optional<TensorView> v_new;
};

// Packed variable-length batch description. cu_seqlens are int32 [B+1] on the
// device of q; max_seqlen_* are upper bounds of the per-sequence lengths.
struct Varlen {
  TensorView cu_seqlens_q;
  TensorView cu_seqlens_k;
  int64_t max_seqlen_q = 0;
  int64_t max_seqlen_k = 0;
};

// Batched: q [B, Sq, Hq, Dqk], k [B, Sk, Hkv, Dqk], v [B, Sk, Hkv, Dv] -> out [B, Sq, Hq, Dv],
// lse (optional, fp32) [B, Hq, Sq].
void forward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
             const TensorView* lse = nullptr, const Options& options = {});

// Packed: q [total_q, Hq, Dqk], k/v [total_k, Hkv, D] -> out [total_q, Hq, Dv], lse [Hq, total_q].
void forward_varlen(const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& out, const TensorView* lse, const Varlen& varlen,
                    const Options& options = {});

// Checks a forward call exactly as forward() / forward_varlen() would (the backend's
// refusals included) and runs nothing: for interfaces that must refuse before they
// change state of their own (a KV cache they append to). varlen may be null.
void validate_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                      const TensorView& out, const TensorView* lse, const Varlen* varlen,
                      const Options& options = {});

// Gradients of the forward with the same options (same seed/offset for dropout).
// lse is the forward's; dq, dk, dv have the shapes and dtype of q, k, v.
void backward(const TensorView& dout, const TensorView& q, const TensorView& k,
              const TensorView& v, const TensorView& out, const TensorView& lse,
              const TensorView& dq, const TensorView& dk, const TensorView& dv,
              const Options& options = {});

void backward_varlen(const TensorView& dout, const TensorView& q, const TensorView& k,
                     const TensorView& v, const TensorView& out, const TensorView& lse,
                     const TensorView& dq, const TensorView& dk, const TensorView& dv,
                     const Varlen& varlen, const Options& options = {});

// Runs an already filled parameter block (what the functions above build after
// validation). For interfaces that fill FwdParams themselves; they must respect
// the contract, since only cheap checks are repeated here.
void run_forward(const FwdParams& params);
void run_backward(const BwdParams& params);

// The dropout decision of the contract, identical in every backend: whether
// p[b, h, i, j] is kept for this seed/offset and probability.
bool dropout_keep(uint64_t seed, uint64_t offset, int64_t b, int64_t h, int64_t i, int64_t j,
                  float dropout_p);

// True when this build has the CUDA backend and a CUDA device is visible.
bool cuda_available();
// The backend `automatic` resolves to for tensors on `device`.
Backend resolve_backend(Backend requested, Device device);

}  // namespace flashattn
