// Host side of the Hopper forward: TMA descriptors for Q, K, V and O (built per
// call on the host: no device work, so a call stays capturable in a CUDA graph)
// and the persistent launch on the caller's stream.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>

#include "backends/cuda/scratch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/sm90/fwd_kernel.cuh"
#include "kernels/sm90/fwd_kv.h"
#include "kernels/sm90/fwd_merge.cuh"
#include "kernels/sm90/fwd_sections.h"
#include "kernels/sm90/fwd_split.h"
#include "kernels/sm90/launch.h"

namespace flashattn::sm90 {

// FLASHATTN_SM90_FWD_SPLIT: unset, the cost model decides where the last round is
// cut (fwd_split.h); 0 or 1, never; k >= 2, k pieces wherever a cut can be made
// (tests, sweeps). Read once.
inline int fwd_split_setting() {
  static const int setting = [] {
    const char* v = std::getenv("FLASHATTN_SM90_FWD_SPLIT");
    return v == nullptr || *v == '\0' ? -1 : std::atoi(v);
  }();
  return setting;
}

// The cut of p's last round for a tile shape: only where every tile sees the same
// keys (no mask, no packed batch, no KV cache).
inline FwdSplit plan_split(const FwdKernelParams& p, const int32_t* seqused_k, int block_m, int block_n, int sms) {
  const int setting = fwd_split_setting();
  if (setting == 0 || setting == 1 || p.is_varlen() || p.is_local() || seqused_k != nullptr) return {};
  const int64_t tiles = (p.seqlen_q + block_m - 1) / block_m * p.heads_q * p.batch;
  const int64_t key_tiles = (p.seqlen_k + block_n - 1) / block_n;
  return plan_fwd_split(tiles, key_tiles, sms, block_m, block_n, int(p.head_dim_qk), std::max(setting, 0));
}

// Launches the kernel of one tile configuration (the sweep calls this with
// configurations outside the table); kMods: with score modifiers.
// seqused_k: a batched KV cache's keys in use (fwd_kv.h), or null. kMaySplit:
// the last round may be cut (fwd_split.h; its scratch comes from the CUDA
// backend's pool, so the sweep, built without the library, leaves it off).
template <typename Traits, bool kMods = false, bool kMaySplit = false>
cudaError_t launch_fwd(const FwdKernelParams& p, cudaStream_t stream, const int32_t* seqused_k = nullptr) {
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  using Shape4 = typename Traits::GmemShape;
  using Stride4 = typename Traits::GmemStride;
  auto gmem = [](auto* ptr, int64_t rows, int64_t heads, int64_t batch_stride, int64_t row_stride,
                 int64_t head_stride, int64_t batch) {
    return make_tensor(make_gmem_ptr(ptr), Shape4(int32_t(rows), int32_t(kHeadDim), int32_t(heads), int32_t(batch)),
                       Stride4(row_stride, _1{}, head_stride, batch_stride));
  };
  // Packed batches: one "batch" of total rows (the kernel offsets each sequence);
  // its batch stride only has to be a valid one.
  const bool packed = p.is_varlen();
  const int64_t rows_q = packed ? p.total_q : p.seqlen_q, rows_k = packed ? p.total_k : p.seqlen_k;
  const int64_t batches = packed ? 1 : p.batch;
  auto batch_stride = [&](int64_t s, int64_t rows, int64_t row_stride) { return packed ? rows * row_stride : s; };
  const auto* q = static_cast<const Element*>(p.q);
  const auto* k = static_cast<const Element*>(p.k);
  const auto* v = static_cast<const Element*>(p.v);
  auto* o = static_cast<Element*>(p.out);
  using Group = Shape<Int<Traits::kGroupRows>, Int<kHeadDim>>;
  FwdArgs<Traits> args{
      p,
      make_tma_copy(SM90_TMA_LOAD{},
                    gmem(q, rows_q, p.heads_q, batch_stride(p.q_batch_stride, rows_q, p.q_row_stride), p.q_row_stride,
                         p.q_head_stride, batches),
                    typename Traits::SmemLayoutQ{}, Shape<Int<Traits::kBlockM>, Int<kHeadDim>>{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{},
                    gmem(k, rows_k, p.heads_kv, batch_stride(p.k_batch_stride, rows_k, p.k_row_stride), p.k_row_stride,
                         p.k_head_stride, batches),
                    take<0, 2>(typename Traits::SmemLayoutKV{}), Shape<Int<Traits::kBlockN>, Int<kHeadDim>>{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{},
                    gmem(v, rows_k, p.heads_kv, batch_stride(p.v_batch_stride, rows_k, p.v_row_stride), p.v_row_stride,
                         p.v_head_stride, batches),
                    take<0, 2>(typename Traits::SmemLayoutKV{}), Shape<Int<Traits::kBlockN>, Int<kHeadDim>>{}, _1{}),
      make_tma_copy(SM90_TMA_STORE{},
                    gmem(o, rows_q, p.heads_q, batch_stride(p.o_batch_stride, rows_q, p.o_row_stride), p.o_row_stride,
                         p.o_head_stride, batches),
                    typename Traits::SmemLayoutGroup{}, Group{}, _1{}),
      TileScheduler(p, Traits::kBlockM),
      seqused_k};

  auto kernel = fwd_kernel<Traits, kMods>;
  constexpr int smem = Traits::kSmemBytes;
  static const cudaError_t ready = prepare_kernel<Traits>(reinterpret_cast<const void*>(kernel));
  if (ready != cudaSuccess) return ready;
  // One block per SM (a device attribute: no synchronisation, allowed during graph
  // capture), never more than there are tiles or pieces.
  int sms = 0;
  if (const cudaError_t err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, p.device.index);
      err != cudaSuccess)
    return err;
  void* scratch = nullptr;
  if constexpr (kMaySplit) {
    const FwdSplit split = plan_split(p, seqused_k, Traits::kBlockM, Traits::kBlockN, sms);
    const size_t floats = size_t(split.pieces()) * Traits::kBlockM * (kHeadDim + 1);
    if (split.on()) {
      // The scheduler keeps the cut only where its list matches the plan's tiles;
      // without scratch the whole tiles run, as without a cut.
      const TileScheduler cut(p, Traits::kBlockM, split);
      if (cut.whole < cut.total) {
        if (detail::cuda_scratch(&scratch, floats * sizeof(float), p.device.index, stream) == cudaSuccess) {
          args.sched = cut;
          args.o_part = static_cast<float*>(scratch);
          args.lse_part = args.o_part + size_t(split.pieces()) * Traits::kBlockM * kHeadDim;
        } else {
          cudaGetLastError();
          scratch = nullptr;
        }
      }
    }
  }
  const unsigned blocks = unsigned(std::max(1, std::min(sms, args.sched.total)));
  // Short causal-like calls: sections whose K/V stay in L2 (fwd_sections.h).
  if (seqused_k == nullptr) fit_sections(args.sched, p, int(blocks), Traits::kBlockM, Traits::kBlockN);
  kernel<<<blocks, Traits::kThreads, smem, stream>>>(args);
  cudaError_t err = cudaGetLastError();
  if constexpr (kMaySplit) {
    if (scratch != nullptr) {
      if (err == cudaSuccess) {
        const int rows = (args.sched.total - args.sched.whole) / args.sched.parts * Traits::kBlockM;
        err = detail::launch_early(programmatic_launch_enabled(), fwd_merge<kHeadDim, Traits::kBlockM, Element>,
                                   dim3(unsigned((rows + kMergeWarps - 1) / kMergeWarps)), dim3(kMergeWarps * 32), 0,
                                   stream, FwdMergeArgs{p, args.sched, args.o_part, args.lse_part});
      }
      cudaFreeAsync(scratch, stream);
    }
  }
  return err;
}

// Softcap and ALiBi (and a non-positive scale) take the kernel with per-score
// work; dropout never reaches this kernel (dispatch.cpp). Plain attention on
// short sequences takes shorter blocks where the table says so (short_rows and
// takes_short_rows, fwd_traits.h); long sequences without a sliding
// window take wider key tiles where the table has them (long_tile_config). For
// packed batches seqlen_k is the caller's max_seqlen_k, so one long sequence (or
// a loose bound) moves every sequence of the batch to the wide tiles: still
// correct, only their speed differs.
template <int kHeadDim, typename Element>
cudaError_t run_fwd_used(const FwdKernelParams& p, const int32_t* seqused_k, cudaStream_t stream) {
  using Traits = FwdTraits<kHeadDim, Element>;
  if (detail::needs_score_mods(p)) return launch_fwd<Traits, true, true>(p, stream, seqused_k);
  constexpr TileConfig kLong = long_tile_config(kHeadDim);
  if constexpr (kLong.block_m > 0) {
    if (p.window_left < 0 && p.seqlen_k >= (p.window_right >= 0 ? kLong.min_keys_causal : kLong.min_keys))
      return launch_fwd<FwdTraits<kHeadDim, Element, kLong.block_m, kLong.block_n, kLong.stages>, false, true>(
          p, stream, seqused_k);
  }
  constexpr int kShortRows = short_rows(kHeadDim);
  if constexpr (kShortRows > 0) {
    if (takes_short_rows(p.seqlen_q, p.seqlen_k, p.window_right >= 0))
      return launch_fwd<FwdTraits<kHeadDim, Element, kShortRows>, false, true>(p, stream, seqused_k);
  }
  return launch_fwd<Traits, false, true>(p, stream, seqused_k);
}

template <int kHeadDim, typename Element>
cudaError_t run_fwd(const FwdKernelParams& p, cudaStream_t stream) {
  return run_fwd_used<kHeadDim, Element>(p, nullptr, stream);
}

}  // namespace flashattn::sm90
