// Tile shapes and CuTe building blocks of the Hopper (sm90a) forward kernel.
// One thread block: a producer warp group that streams Q, K and V with TMA (K and
// V through a ring of kStages shared-memory stages), and kConsumerGroups consumer
// warp groups, each owning 64 of the block's kBlockM query rows, that run
// S = Q K^T and O += P V on wgmma with the online softmax in between. The block
// is persistent: it walks several (query tile, head, batch) tiles in turn.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/numeric_types.h>

#include "kernels/sm90/hang_check.cuh"

namespace flashattn::sm90 {

using namespace cute;

// The tile table: query rows per block (64 per consumer warp group), keys per
// K/V tile and ring depth, per head dim. bench/gpu/sm90_tile_sweep.cu times other
// entries; change one here only with a measurement behind it.
// Measured with the sweep on the H200 (bf16, B = 16384 / N, H = 2048 / D, median
// of 15, interleaved runs; bench/results/2026-11-29_h200_sm90_tile_sweep_v3.log):
//   hd64: 192 x 128, three consumer groups, two stages: 541 / 519 TFLOP/s at 16k
//     (non-causal / causal) against 463 / 463 for 128 x 128 with two groups, and
//     470 / 359 against 423 / 350 at 2k; only causal N = 512 is slower (184 vs 205).
//   hd128: 128 x 128, two stages: 684-692 / 672 at 16k; three stages (Q holds O)
//     670-682 / 664. (That sweep's 128 x 176, 436 / 428, ran as 64 x 16 wgmmas:
//     see long_tile_config.)
//   hd256: 128 x 64, two stages: Q (64 KiB) and two K/V stages (128 KiB). (That
//     sweep's 128 x 80, 490-496, ran as 64 x 16 wgmmas too; with the right wgmma
//     it wins on long sequences: long_tile_config.)
// late_p: a key tile's P is formed at the top of the next loop turn (after the
// wait for the P V that reads P's registers) instead of right after its
// softmax, so that ptxas cannot hoist that wait above the softmax (kernel notes,
// sm90 forward v5). Alternating-process A/B on the H200 (bf16, N = 1k/4k/16k,
// bench/results/2026-11-29_h200_ab_fwd_v5_late_p.json): hd256 +5-10% at all six
// points; hd128 0.97-1.05 (no clear change); hd64 0.93-0.98, where three groups
// at 160 registers spill more with it.
// uniform_group, q_desc_in_loop: consumer registers (kernel notes, sm90 forward
// v6). uniform_group: the consumer group's index is broadcast from lane 0, so
// ptxas knows it is warp-uniform; what derives from it (barrier ids, Q's and O's
// shared addresses) and, apparently because the branches on it no longer look
// divergent, the per-tile values (schedule, tile bounds, mbarrier addresses)
// move to uniform registers (hd64 SASS: 432 -> 1000 uniform-datapath
// instructions of ~3.7k). q_desc_in_loop: Q's wgmma descriptors (one per
// 16-wide k slice) are derived at each key tile from one base (desc_here)
// instead of held across the key loop, two registers each. ptxas spill stores /
// loads in bytes, plain and score-modifier kernels: hd64 96/164 and 152/260 with
// neither; 12/12 and 12/16 with uniform_group; 0 with both. hd256 68/88 and
// 88/128 -> 0 with uniform_group alone (q_desc_in_loop would add 28 instructions
// to its key loop, whose 16 Q slices fit in its 240 registers). Both off in
// hd128's table entry, whose plain kernel has no spills (uniform_group there:
// score-modifier kernel 12/44 -> 12/16, not measured on the GPU); both on in its
// long-sequence entry, whose 160-key tile spills 12/44 B without them and 0 with.
struct TileConfig {
  int block_m, block_n, stages;
  bool late_p, uniform_group, q_desc_in_loop;
  // long_tile_config only: the fewest keys (seqlen_k; for packed batches the
  // caller's max_seqlen_k) that take it without a mask and under a causal one.
  int min_keys = 0, min_keys_causal = 0;
  // Where Q's descriptors come from the group's first thread (uniform values: the
  // plain kernels, fwd_kernel.cuh), q_desc_in_loop's re-derivation is left out and
  // they stay in uniform registers across the key loop, unless this is set (kernel
  // notes, sm90 forward v27 / v28: hd128's 128 x 128 entry measured 1.5-3% faster
  // re-deriving them at N = 1k-4k without a mask; the 128 x 192 entry 3-6% faster at
  // 16k, and hd64's 192-row blocks ~1%, holding them).
  bool q_desc_rederive_uniform = false;
};
// hd96 and hd192 (session 14, not swept): hd96 takes hd128's tile shape (with P in
// registers, three groups of 160 would not hold 64 x 128 scores, 64 x 96 of O
// and P); hd192 128 x 112 with hd256's switches: Q 48 KiB and two K/V stages
// 168 KiB fill shared memory (O staged in Q), and O's 96 registers with 56 of
// scores fit the 240.
// hd128's entry takes late_p, uniform_group and q_desc_in_loop since session 43
// (sm90_tile_sweep on the H100, kernel time, two runs,
// bench/results/2026-12-06_h100_s43_sm90_tile_sweep_hd128_late_p.txt; kernel notes,
// sm90 forward v23): against the entry without them non-causal N = 1k +1-3%, 2k +4%,
// 4k +3%, 16k +3%; causal 1k +1.5%, 2k +3.5%, 3k +2.5%, 4k +14%, 8k +7%; against the
// 128 x 192 long entry non-causal 2k +4%, 4k +1%, 8k level, 16k -3%, causal 8k +10%,
// 16k -3% (hence its thresholds below). hd96 keeps the entry without them (not
// measured). Per call on the H200 (A/B, three rounds,
// bench/results/2026-12-06_h200_ab_s44_sm90_fwd_v23.txt): +2-4% at N = 512-4096, level
// from 8192. The other entries with switches they lack (session 44's sweep, H200,
// ..._s44_sm90_tile_sweep_switches.txt): hd64 with late_p 1-3% slower, hd192 / hd256
// with q_desc_in_loop level or slower.
constexpr TileConfig tile_config(int head_dim) {
  return head_dim <= 64    ? TileConfig{192, 128, 2, false, true, true}
         : head_dim <= 96  ? TileConfig{128, 128, 2, false, false, false}
         : head_dim <= 128 ? TileConfig{128, 128, 2, true, true, true, 0, 0, true}
         : head_dim <= 192 ? TileConfig{128, 112, 2, true, true, false}
                           : TileConfig{128, 64, 2, true, true, false};
}

// Long sequences: wider key tiles for plain attention (no score modifiers) once
// seqlen_k reaches the entry's min_keys (min_keys_causal under a causal mask
// without a left bound; sliding windows keep tile_config's). Each tile costs the
// block's last, partly masked key tile more and the wgmma issue per key less.
// block_m == 0: none. Kernel time on the H200 (bf16, B = 16384 / N, H = 2048 / D,
// median of 15, two runs; bench/results/2026-11-30_h200_sm90_tile_sweep_s8.txt):
//   hd128 128 x 160 against 128 x 128: non-causal N = 2k 634-640 vs 627-632,
//     4k 671 vs 662-667, 8k 689-692 vs 679-681, 16k 704 vs 663-682; causal 8k
//     660-662 vs 639-652, 16k 698-699 vs 682; slower below (N = 512 407 vs 480).
//     128 x 176 is level with it from 8k (707 at 16k) and slower below 8k.
//   hd256 128 x 80 against 128 x 64: non-causal N = 1k 632-633 vs 612, 4k
//     744-748 vs 726, 16k 770-794 vs 743-761; causal from 2k (579 vs 535-573,
//     16k 782 vs 758-760); level or slower at N = 512 and causal 1k.
// These are burst numbers (the GPU boosts for ~0.1 s after idling, then holds its
// power cap; kernel notes, sm90 forward v8). Per call under the cap, alternating
// processes, three rounds (bench/results/2026-11-30_h200_ab_s8_fwd_long_bwd_fma.txt;
// hd64, the same code on both sides, moved 0.99-1.02): hd128 non-causal +2-3% at
// N = 2k-16k, causal 8k +1.6% (16k within noise); hd256 non-causal +1-3% from 2k,
// causal 2k 0.976, 8k 1.007, 16k 1.032, hence 8192 for its causal threshold.
// hd256's non-causal threshold of 1024 rests on the sweep alone (the A/B started
// at 2k).
// hd128's entry became 128 x 192 with late_p in session 19 (kernel notes, sm90
// forward v15). Against 128 x 160 without late_p, per call under the cap, two
// alternating rounds (bench/results/2026-12-02_h200_ab_s19_sm90_fwd_hd128_long.txt):
//   128 x 160 late_p: non-causal +1.2 / +1.6 / +1.9 / +2.3% at N = 2k / 4k / 8k
//     / 16k; causal 8k / 16k +0.9 / +0.5%;
//   128 x 192: -3.1 / -0.6 / +2.0 / +1.6%; causal +0.8 / 0.0%;
//   128 x 192 late_p: -1.2 / +3.4 / +6.6 / +5.3% (16k 620 -> 654 TFLOP/s);
//     causal +5.9 / +3.9%;
//   128 x 176: -0.5 / 0.0 / +2.5 / +2.6%; causal -0.6 / +1.6%.
// (Rows running the same kernel on both sides moved -0.8..+2.1%.) 192 keys are
// the widest two K/V stages leave room for: 192 KiB beside Q's 32 KiB.
// Its thresholds moved from 2048 / 8192 keys to 8192 / 16384 in session 43, when
// the 128 x 128 entry took the same switches (tile_config's comment).
// Key-tile widths other than 8, 16, 32, 64, 96, 128, 192 and 256 need CuTe's
// extended wgmma shapes (CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED, which
// src/CMakeLists.txt sets for the forward files; CuTe must see it before its
// first header). Without them its op selector silently falls back to the
// widest listed divisor: 64 x 16 x 16 for 176 keys, eleven wgmmas where one
// would do, which is what session 3's sweep measured for 128 x 176 (436 TFLOP/s)
// and 128 x 80 at hd256, and took for a spill problem. FwdTraits asserts the
// width it got.
constexpr TileConfig long_tile_config(int head_dim) {
  return head_dim == 128   ? TileConfig{128, 192, 2, true, true, true, 8192, 16384}
         : head_dim == 256 ? TileConfig{128, 80, 2, true, true, false, 1024, 8192}
                           : TileConfig{0, 0, 0, false, false, false};
}

// Short calls: query rows per block for plain attention on short sequences; 0
// keeps the table's. Taken (takes_short_rows) with a causal-like mask
// (window_right >= 0) on at most kShortMaxSeqlen queries, or without one on at
// most kShortMaxSeqlen queries and keys.
// - Causal: at hd64 the 192-row blocks compute about a third more masked products
//   than 128-row ones at N <= 1024 (the diagonal tiles are taller); kernel time,
//   two runs (bench/results/2026-11-29_h200_sm90_hd64_short_causal_s7.txt): causal
//   N = 512 184-187 -> 196-205 TFLOP/s, 1024 257 -> 283-287; from N = 2048 on,
//   192 rows are ahead (376 vs 361 at 2048).
// - No causal mask (v25): 512 and 1024 rows are not multiples of 192, so a head's
//   last 192-row block held 128 rows; H100 sweep, two runs, N = 512 347 / 332
//   against 336 / 331, 1024 412 / 389 against 387 / 387, 2048 422 against 443-449
//   (bench/results/2026-12-07_h100_s48_sm90_tile_sweep_short_causal.txt). Longer
//   keys keep the 192-row blocks' better rate per key tile.
constexpr int kShortMaxSeqlen = 1024;
constexpr int short_rows(int head_dim) { return head_dim <= 64 ? 128 : 0; }
constexpr bool takes_short_rows(int seqlen_q, int seqlen_k, bool causal_like) {
  return seqlen_q <= kShortMaxSeqlen && (causal_like || seqlen_k <= kShortMaxSeqlen);
}
static_assert(takes_short_rows(1024, 1024, false) && takes_short_rows(512, 16384, true) &&
              !takes_short_rows(1024, 2048, false) && !takes_short_rows(2048, 2048, true));
// Their switches: hd64's table entry spills without uniform_group and
// q_desc_in_loop at three groups of 160 registers; the 128-row blocks' two groups
// have 240, so Q's descriptors stay in registers across the key loop instead of
// being re-derived at every key tile (4 instructions per wgmma; ncu of causal N =
// 512 beside cuDNN, kernel notes, sm90 forward v10).
constexpr TileConfig kShortSwitches{128, 128, 2, false, true, false};

// The switches (late_p, uniform_group, q_desc_in_loop) of a tile shape: the
// long-sequence entry's or the short blocks' for their shapes, the head
// dim's table entry's otherwise.
constexpr TileConfig tile_switches(int head_dim, int block_m, int block_n) {
  return long_tile_config(head_dim).block_m == block_m && long_tile_config(head_dim).block_n == block_n
             ? long_tile_config(head_dim)
         : short_rows(head_dim) == block_m && tile_config(head_dim).block_n == block_n ? kShortSwitches
                                                                                      : tile_config(head_dim);
}

// Largest dynamic shared memory of one block on sm90 (227 KiB).
constexpr int kMaxSmemBytes = 232448;

template <int kHeadDim_, typename Element_, int kBlockM_ = tile_config(kHeadDim_).block_m,
          int kBlockN_ = tile_config(kHeadDim_).block_n, int kStages_ = tile_config(kHeadDim_).stages,
          int kSwitchBits_ = -1>  // sweep only: 1 late_p | 2 uniform_group | 4 q_desc_in_loop; -1 the table's
struct FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr TileConfig kSwitches = tile_switches(kHeadDim_, kBlockM_, kBlockN_);
  static constexpr bool kLateP = kSwitchBits_ < 0 ? kSwitches.late_p : (kSwitchBits_ & 1) != 0;
  static constexpr bool kUniformGroup = kSwitchBits_ < 0 ? kSwitches.uniform_group : (kSwitchBits_ & 2) != 0;
  static constexpr bool kQDescInLoop = kSwitchBits_ < 0 ? kSwitches.q_desc_in_loop : (kSwitchBits_ & 4) != 0;
  static constexpr bool kQDescRederiveUniform = kSwitches.q_desc_rederive_uniform;
  // Lazy rescaling (fwd_softmax.cuh): O is rescaled only on key tiles that move a
  // row's reference max by more than 2^8. On at hd128 and hd256, where O holds 64 and
  // 128 fp32 registers a thread. A/B against always rescaling (H100, three rounds,
  // bench/results/2026-12-07_h100_s55_sm90_fwd_v32_v33_ab.txt; kernel notes, sm90
  // forward v33): hd256 +1.6-6.7% at every N; hd128 level to +2.5%; hd64, whose O
  // is no bigger than its score tile, 5% slower at N <= 1024 (the vote and branch
  // cost more than its 32 multiplies). hd192 (O 96 registers a thread) +1.6-2.4%
  // at N >= 4096, within 2% below (bench/results/2026-12-07_h100_s56_sm90_fwd_
  // hd192_lazy_ab.txt). hd96 (O 48 registers) keeps rescaling every tile: with it
  // 2-8% slower at N <= 1024, level from 4096 (..._s56_sm90_fwd_hd96_lazy_ab.txt).
  static constexpr bool kLazyRescale = kHeadDim_ >= 128;
  static constexpr int kGroupRows = 64;  // rows of one wgmma, one consumer group
  static constexpr int kConsumerGroups = kBlockM / kGroupRows;
  static_assert(kBlockM % kGroupRows == 0 && kConsumerGroups >= 2 && kConsumerGroups <= 3,
                "two or three consumer groups (pingpong needs a partner)");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "keys per tile: the k of P V is 16-wide");
  static constexpr int kConsumerThreads = kConsumerGroups * 128;
  static constexpr int kThreads = kConsumerThreads + 128;  // + the producer group
  // setmaxnreg only moves registers within what the block got at launch: ptxas
  // gives each thread the launch bound's share of the 64K, rounded down to a
  // multiple of 8 (168 at 384 threads, 128 at 512), and setmaxnreg.inc waits
  // until the block's pool holds what it asks for. A split over that total
  // never starts the consumers (v3's first split, 32 x 128 + 240 x 256 = 65536
  // > 168 x 384 = 64512, hung every launch). 24 x 128 + 240 x 256 and
  // 32 x 128 + 160 x 384 fill the block exactly.
  static constexpr int kEntryRegs = (65536 / kThreads) / 8 * 8;
  static constexpr int kProducerRegs = kConsumerGroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumerGroups == 2 ? 240 : 160;
  static constexpr int kBlockRegs = kProducerRegs * 128 + kConsumerRegs * kConsumerThreads;
  static_assert(kBlockRegs <= kEntryRegs * kThreads,
                "setmaxnreg split exceeds the block's registers: setmaxnreg.inc would wait forever");

  using TileS = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;  // S = Q K^T: (M, N, K)
  using TileO = Shape<Int<kBlockM>, Int<kHeadDim>, Int<kBlockN>>;  // O = P V:   (M, N, K)
  // One 64-row warp group per consumer, stacked along M.
  using AtomLayout = Layout<Shape<Int<kConsumerGroups>, _1, _1>>;
  using TiledMmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, TileS>(), AtomLayout{}));
  // P stays in registers (A operand); V is read as (D, keys), head dim contiguous.
  using TiledMmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, TileO, GMMA::Major::K, GMMA::Major::MN>(), AtomLayout{}));
  // One wgmma covers a whole key tile (see long_tile_config on CuTe's extended
  // shapes).
  static_assert(size<1>(typename TiledMmaS::AtomShape_MNK{}) == kBlockN,
                "S = Q K^T would take several wgmmas per k slice: enable CuTe's extended wgmma shapes");

  // 128-byte swizzled rows (64 elements), the layout TMA writes and wgmma reads;
  // 64-byte ones (32 elements) where the head dim is not a multiple of 64 (96).
  static constexpr int kAtomCols = kHeadDim % 64 == 0 ? 64 : 32;
  static_assert(kHeadDim % kAtomCols == 0, "head dim: a multiple of 32");
  using SmemAtom = std::conditional_t<kAtomCols == 64, GMMA::Layout_K_SW128_Atom<Element>,
                                      GMMA::Layout_K_SW64_Atom<Element>>;
  // Q, and O when staged: consumer group g alone reads (and writes) rows
  // [64 g, 64 g + 64); those rows are the unit of the epilogue's TMA store.
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  // Rows [64 g, 64 g + 64) of a Q-shaped tile: the first 64 rows' layout at an
  // offset of g * 64 * kAtomCols elements (the row atoms are stacked first, and
  // the offset is a whole number of swizzle periods). Each 64 x kAtomCols column
  // strip is contiguous, so a TMA box covers one.
  using SmemLayoutGroup = decltype(composition(
      SmemLayoutQ{}, make_layout(Shape<Int<kGroupRows>, Int<kHeadDim>>{}, make_stride(_1{}, Int<kBlockM>{}))));
  static constexpr int kGroupOffset = kGroupRows * kAtomCols;  // elements between groups' rows
  using SmemLayoutKV = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));
  // V seen as (head dim, keys, stage): the B operand of P V, head dim contiguous.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{})));

  // Global tensors as TMA sees them: (rows, head dim, heads, batch).
  using GmemShape = Shape<int32_t, int32_t, int32_t, int32_t>;
  using GmemStride = Stride<int64_t, _1, int64_t, int64_t>;
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemShape{}, GmemStride{}));
  using GmemTensorO = decltype(make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)), GmemShape{}, GmemStride{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutQ{},
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutKV{}),
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));
  // O leaves one consumer group (64 rows) at a time.
  using TmaO = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensorO{}, SmemLayoutGroup{},
                                      Shape<Int<kGroupRows>, Int<kHeadDim>>{}, _1{}));

  static constexpr int kQBytes = kBlockM * kHeadDim * int(sizeof(Element));
  static constexpr int kKVBytes = 2 * kStages * kBlockN * kHeadDim * int(sizeof(Element));
  // O is staged in its own tile when it fits; otherwise group g writes its O
  // rows over its own Q rows (read by no one else), and the next tile's Q waits
  // until the TMA store has read them.
  static constexpr bool kOInQ = kQBytes * 2 + kKVBytes + 1024 > kMaxSmemBytes;

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> k;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> v;
    alignas(1024) cute::array_aligned<Element, kOInQ ? 1 : cosize_v<SmemLayoutQ>> o;
    alignas(16) uint64_t q_full, q_empty;
    uint64_t k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
#ifdef FLASHATTN_SM90_HANG_CHECK
    HangMarks hang;  // what each role last waited for (hang_check.cuh)
#endif
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= kMaxSmemBytes, "tile shape does not fit in shared memory");
  static constexpr uint32_t kTmaBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kTmaBytesKV = kBlockN * kHeadDim * sizeof(Element);
};

}  // namespace flashattn::sm90
