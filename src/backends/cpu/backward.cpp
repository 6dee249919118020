// CPU flash backward: five tile products per (query tile, key tile) pair. The
// probabilities are recomputed from the saved LSE, never stored.
//   0. d_i = dO_i . O_i for every query row (fp32, O(Sq) per head).
//   1. Work items are (sequence, kv head, group of key tiles). For each key tile
//      and each visible query tile of each query head of the group, the tiles are
//      held transposed (keys x queries): S^T = K Q^T and dP^T = V dO^T, so
//      P^T and dS^T come out in the layout the next products read, and the
//      per-query statistics (lse, d) are vectors along each row. Then
//        dV += P^T dO,  dK += dS^T Q   (kept per key tile, stored when it ends),
//        dQ^T += K^T dS^T              (into the chain's fp32 block).
//      An item is a run of consecutive key groups (in the last eighth of a
//      sequence's keys, one single-tile group: kTailShare); run r adds to
//      dQ^T copy (chain) r % chains, which has one fp32 block per (query head, query
//      tile): in key order, each group after the chain's previous group that
//      sees the block (a per-block counter). The previous run of a chain was
//      handed out a full wave earlier, so its turn has nearly always passed.
//   2. Per query tile: dQ = its chains' blocks summed in order, transposed.
// Every output element is written by one work item or summed in an order fixed
// by the shape, so gradients are bitwise reproducible for any thread count
// (`deterministic` costs nothing). The dQ sums cost 1-4 fp32 copies of dQ (by
// the shape, never the thread count), and there are about 128 items of whole
// groups when the key groups allow (8 per thread at 16 threads), then the
// tail's single tiles. Items are handed out in order, and an item waits only for earlier ones, so the waits cannot
// deadlock. B operands are packed once per call (pack.h); the two pipelines
// (fp32, bf16) are the forward's.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/pack.h"
#include "backends/cpu/tile_io.h"
#include "backends/cpu/tile_ops.h"
#include "backends/cpu/workspace.h"
#include "backends/threads.h"

namespace flashattn::detail {
namespace cpu {
namespace {

constexpr int64_t kBlockQ = kPackRows;  // query rows per tile (one packed tile)
constexpr int64_t kBlockK = kPackRows;  // keys per tile
constexpr int64_t kLd = 64;             // leading dimension of the score tiles
static_assert(kBlockQ <= kLd && kBlockK <= kLd);
// Work items wanted: 8 per thread on a 16-core host. An item is a run of
// consecutive key groups of one (sequence, kv head), as few as give that many
// (one group at B = 1, 4 heads, N = 8192): within an item a query tile's packs
// and dQ^T block pass from one group to the next in L2.
constexpr int64_t kItems = 128;
// Chains: item (run) r adds to dQ^T copy r % chains, each copy summed in key
// order, the copies summed in order at the end. An item then waits only for
// the item chains * (sequence, kv head) pairs before it in hand-out order: at
// least kChainDistance (a full wave on a 16-core host), so a thread never
// follows the previous group of its head in lockstep, and one delayed thread
// (another job on its core) rarely stalls the others. Up to 4 copies of dQ in
// fp32; a function of the shape alone, never of the thread count.
constexpr int64_t kChainDistance = 16;
constexpr int64_t kMaxChains = 4;
// The last 1/kTailShare of each sequence's key groups are split into single
// key tiles, each its own item: the last items handed out are then a quarter
// of a group (or less, when items are runs of several groups) and the threads
// finish closer together. Items of whole groups ended up to one item apart,
// 8-12% of a call at 16 threads (docs/cpu_notes.md, session 10). A function of
// the shape alone, as everything that orders the dQ sums must be.
constexpr int64_t kTailShare = 8;

// Row index into the per-row vector d (same layout as a contiguous LSE).
inline int64_t row_slot(const FwdParams& p, const HostSeqLen& sl, int64_t b, int64_t h, int64_t i) {
  return p.is_varlen() ? h * p.total_q + sl.q_offset + i : (b * p.heads_q + h) * p.seqlen_q + i;
}

// Key tiles processed together (key_group); fewer for wide heads, so that their
// K, V, K^T and fp32 dK, dV (about 450-650 KiB at D = 128) stay in L2.
constexpr int64_t kMaxGroup = 4;
inline int64_t group_tiles(int64_t dqk_p, int64_t dv_p) {
  return std::clamp<int64_t>(512 / std::max(dqk_p, dv_p), 1, kMaxGroup);
}

// One key tile of a group: its keys and the query rows that see them.
struct KeyTile {
  int64_t c0, nc, mc, r_begin, r_end;
  bool k_finite;
  bool sees(int64_t qt) const { return !(qt < r_begin / kBlockQ || qt * kBlockQ >= r_end); }
};

// The key tiles of one group and the query tiles [q_lo, q_hi) they may see.
// visits() is the one test of whether the group adds to a query tile's dQ^T:
// the loop and the ordering of the dQ^T sums both use it.
struct GroupPlan {
  KeyTile t[kMaxGroup];
  int64_t n = 0, q_lo = INT64_MAX, q_hi = 0;
  bool visits(int64_t qt) const {
    if (qt < q_lo || qt >= q_hi) return false;
    for (int64_t i = 0; i < n; ++i)
      if (t[i].sees(qt)) return true;
    return false;
  }
};

// Spin briefly, then yield (more threads than cores must not starve the item waited for).
inline void wait_step(int& spins) {
  if (++spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

// The fp16 split backward's widths (isa.h, f16_split; pack.h, split_row and its
// segments): K and V tiles in kSegsQk head-dim segments (A of S^T, dP^T), dK and
// dV accumulators of kSegsV (double) width, and K^T in 3 key segments
// [Kh | Kh | Kl] against dS^T's [hi; lo; hf] (dQ^T).
template <bool kSplit>
constexpr int64_t kSegsKt = kSplit ? 3 : 1;

template <typename PT, bool kSplit = false>
struct BwdScratch {
  // Per key tile of the group: A operands K and V (of S^T, dP^T), K^T (of dQ^T),
  // and the fp32 dK, dV accumulators.
  std::vector<PT> k, v, kt;
  std::vector<float> dk, dv;
  std::vector<PT> pa, da;    // P^T and dS^T rounded to bf16, row-major (bf16 only)
  std::vector<PT> pl, dl;    // their low halves (split only)
  std::vector<PT> df;        // dS^T's high half, non-finite values zeroed (split only)
  std::vector<PT> db;        // dS^T rounded to bf16 as a B operand (bf16 only)
  std::vector<float> s, dp, tanh, lse, d, row, f;
  std::vector<float> dqsum;  // one dQ^T block, summed over chains
  std::vector<float> dst3;   // split, dropout / softcap: dS^T as [hi; lo; hf] rows for the B operand
  int64_t ke, ve, kte, dke, dve;  // elements per key tile
  BwdScratch(int64_t dqk, int64_t dv_, int64_t group)
      : pa(sizeof(PT) == 2 ? kLd * kLd : 0), da(sizeof(PT) == 2 ? kLd * kLd : 0),
        pl(kSplit ? kLd * kLd : 0), dl(kSplit ? kLd * kLd : 0), df(kSplit ? kLd * kLd : 0),
        db(sizeof(PT) == 2 ? kSegsKt<kSplit> * kLd * kLd : 0), s(kLd * kLd), dp(kLd * kLd), tanh(kLd * kLd),
        lse(kLd), d(kLd), row(3 * std::max(padded<PT>(dqk), padded<PT>(dv_))), f(kLd * std::max(dqk, dv_)),
        dqsum(dqk * kLd), dst3(kSplit ? 3 * kLd * kLd : 0) {
    ke = kLd * padded<PT>(dqk) * kSegsQk<kSplit>, ve = kLd * padded<PT>(dv_) * kSegsQk<kSplit>;
    kte = padded<PT>(dqk) * kLd * kSegsKt<kSplit>;
    dke = kLd * padded<PT>(dqk) * kSegsV<kSplit>, dve = kLd * padded<PT>(dv_) * kSegsV<kSplit>;
    k.resize(group * ke), v.resize(group * ve), kt.resize(group * kte);
    dk.resize(group * dke), dv.resize(group * dve);
  }
  PT* k_at(int64_t i) { return k.data() + i * ke; }
  PT* v_at(int64_t i) { return v.data() + i * ve; }
  PT* kt_at(int64_t i) { return kt.data() + i * kte; }
  float* dk_at(int64_t i) { return dk.data() + i * dke; }
  float* dv_at(int64_t i) { return dv.data() + i * dve; }
};

template <typename Elem, typename PT, bool kSplit = false>
struct Backward {
  static constexpr bool kBf16 = sizeof(PT) == 2;
  static_assert(!kSplit || (kBf16 && std::is_same_v<Elem, F16>), "the split pipeline is fp16 on bf16 products");
  using Scratch = BwdScratch<PT, kSplit>;
  const BwdParams& p;
  const Kernels& k;
  DropoutRng rng;
  std::vector<float> dvec;
  HeadView qv, kv, vv, ov, dov;
  Packed<PT> q_t, do_t, q_n, do_n;  // B operands: Q and dO, transposed and natural
  // Groups [0, n_big) hold `group` key tiles each, the rest one (kTailShare).
  // Runs (work items of one sequence and kv head): [0, n_big_runs) are `span`
  // consecutive big groups each, every later run one single-tile group.
  int64_t group = 1, n_big = 1, span = 1, n_big_runs = 1, chains = 1;
  int64_t group_first_tile(int64_t g) const { return g < n_big ? g * group : n_big * group + (g - n_big); }
  int64_t tiles_of_group(int64_t g) const { return g < n_big ? group : 1; }
  int64_t run_of(int64_t g) const { return g < n_big ? g / span : n_big_runs + (g - n_big); }
  int64_t run_first(int64_t r) const { return r < n_big_runs ? r * span : n_big + (r - n_big_runs); }
  int64_t run_end(int64_t r) const { return r < n_big_runs ? std::min(n_big, (r + 1) * span) : run_first(r) + 1; }
  // dQ^T, fp32, one block [padded dqk][kLd] per (chain, query head, query tile):
  // contiguous blocks, since a strided [dqk][all queries] layout put every row of
  // a product's C in the same L1 set (strides of 8 KiB and more).
  Workspace dqt_buf;
  // Per block: 1 + the last key group that added to it (0: none yet).
  std::unique_ptr<std::atomic<int32_t>[]> turns;

  Backward(const BwdParams& params, const Kernels& kern)
      : p(params),
        k(kern),
        rng(p.dropout_p > 0.f ? DropoutRng::make(p.seed, p.offset, p.dropout_p) : DropoutRng{}),
        qv{p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride},
        kv{p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride},
        vv{p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride},
        ov{p.out, p.o_batch_stride, p.o_row_stride, p.o_head_stride},
        dov{p.dout, p.do_batch_stride, p.do_row_stride, p.do_head_stride} {}

  int64_t block_index(int64_t c, int64_t h, int64_t b, int64_t qt) const {
    return (c * p.heads_q + h) * q_t.tiles + q_t.tile0[b] + qt;
  }
  // The dQ^T block of chain c, query tile qt of head h of sequence b, and its counter.
  float* dqt(int64_t c, int64_t h, int64_t b, int64_t qt) const {
    return static_cast<float*>(dqt_buf.data()) + block_index(c, h, b, qt) * padded<PT>(p.head_dim_qk) * kLd;
  }
  std::atomic<int32_t>& turn(int64_t c, int64_t h, int64_t b, int64_t qt) const {
    return turns[block_index(c, h, b, qt)];
  }

  void run() {
    const int64_t rows = p.is_varlen() ? p.total_q : p.batch * p.seqlen_q;
    dvec.assign(static_cast<size_t>(p.heads_q * rows), 0.f);
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v, hq = p.heads_q, hkv = p.heads_kv;
    plan_pack(q_t, p, true, hq, dqk, PackKind::transposed, kSegsQk<kSplit>, &k);
    plan_pack(do_t, p, true, hq, dv, PackKind::transposed, kSegsQk<kSplit>, &k);
    plan_pack(q_n, p, true, hq, dqk, PackKind::natural, kSegsV<kSplit>, &k);
    plan_pack(do_n, p, true, hq, dv, PackKind::natural, kSegsV<kSplit>, &k);
    const int nt = thread_count(p);
    const int64_t n_kt = ceil_div(p.seqlen_k, kBlockK);
    group = group_tiles(padded<PT>(dqk), padded<PT>(dv));
    const int64_t whole_groups = std::max<int64_t>(1, ceil_div(n_kt, group));
    const int64_t pairs = std::max<int64_t>(1, p.batch * hkv);
    span = ceil_div(whole_groups, std::min(whole_groups, ceil_div(kItems, pairs)));
    n_big = group > 1 && n_kt > group ? whole_groups - ceil_div(whole_groups, kTailShare) : whole_groups;
    n_big_runs = ceil_div(n_big, span);
    // One run per single-tile group after the big ones (none without a tail).
    const int64_t runs = n_big_runs + std::max<int64_t>(0, n_kt - n_big * group);
    chains = std::clamp<int64_t>(ceil_div(kChainDistance, pairs), 1, std::min(kMaxChains, runs));
    const int64_t blocks = chains * hq * q_t.tiles;
    dqt_buf.acquire(static_cast<size_t>(blocks * padded<PT>(dqk) * kLd) * sizeof(float));
    turns.reset(new std::atomic<int32_t>[static_cast<size_t>(std::max<int64_t>(1, blocks))]);
    for (int64_t i = 0; i < blocks; ++i) turns[i].store(0, std::memory_order_relaxed);
    const int64_t n_qt = ceil_div(p.seqlen_q, kBlockQ);
    const int64_t n_items = runs * p.batch * hkv;
    std::atomic<int64_t> next_item{0};
#pragma omp parallel num_threads(nt)
    {
      Scratch w(dqk, dv, group);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < p.batch * hq * n_qt; ++t)
        row_dots(t / n_qt / hq, t / n_qt % hq, t % n_qt, w);
      pack_all<Elem>(q_t, p, qv, true, w.row.data());
      pack_all<Elem>(do_t, p, dov, true, w.row.data());
      pack_all<Elem>(q_n, p, qv, true, w.row.data());
      pack_all<Elem>(do_n, p, dov, true, w.row.data());
      if (kBf16 && k.thread_begin) k.thread_begin();
      // Run-major (under a causal mask the first groups are the longest),
      // handed out strictly in order: an item waits only for earlier items,
      // which are running or done, so some item always makes progress.
      for (int64_t t; (t = next_item.fetch_add(1, std::memory_order_relaxed)) < n_items;)
        key_item(t % p.batch, t / p.batch % hkv, t / p.batch / hkv, w);
      if (kBf16 && k.thread_end) k.thread_end();
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < p.batch * hq * n_qt; ++t)
        store_dq(t / n_qt / hq, t / n_qt % hq, t % n_qt, w);
    }
  }

  void product(int64_t M, int64_t N, int64_t K, const PT* A, int64_t lda, const PT* B, int64_t ldb,
               float* C, int64_t ldc, bool acc) const {
    if constexpr (kBf16) k.gemm_bf16(M, N, K, A, lda, B, ldb, C, ldc, acc);
    else k.gemm_f32(M, N, K, A, lda, B, ldb, C, ldc, acc);
  }

  // x (rows x cols, ld kLd) rounded to bf16 as an A operand, columns zero-padded
  // to cols_p.
  void round_rows(const float* x, PT* buf, int64_t rows, int64_t cols, int64_t cols_p) const {
    for (int64_t r = 0; r < rows; ++r) k.to_bf16(x + r * kLd, buf + r * kLd, cols, cols_p);
  }

  // Loads lse and d for rows [r0, r0+nr). A row that saw no key has lse = -inf;
  // +inf makes every p of it exp(-inf) = 0 instead of exp(-inf - -inf) = NaN.
  void load_row_stats(const HostSeqLen& sl, int64_t b, int64_t h, int64_t r0, int64_t nr,
                      Scratch& w) const {
    for (int64_t r = 0; r < nr; ++r) {
      const float l = p.lse[sl.lse_index(p, b, h, r0 + r)];
      w.lse[r] = l == kNegInf ? -kNegInf : l;
      w.d[r] = dvec[row_slot(p, sl, b, h, r0 + r)];
    }
  }

  // Pass 0: d_i = dO_i . O_i.
  void row_dots(int64_t b, int64_t h, int64_t qt, Scratch& w) {
    const HostSeqLen sl(p, b);
    const int64_t r0 = qt * kBlockQ;
    if (r0 >= sl.seqlen_q) return;
    const int64_t nr = std::min(kBlockQ, sl.seqlen_q - r0), dv = p.head_dim_v;
    load_tile<Elem>(dov, sl, true, b, h, r0, nr, dv, w.f.data(), dv);
    for (int64_t r = 0; r < nr; ++r) {
      load_row<Elem>(p.out, sl.q_row(b, p.o_batch_stride, p.o_row_stride, p.o_head_stride, h, r0 + r),
                     dv, w.row.data());
      dvec[row_slot(p, sl, b, h, r0 + r)] = k.dot(w.f.data() + r * dv, w.row.data(), dv);
    }
  }

  // K^T of keys [c0, c0+nc) as the A operand of dQ^T += K^T dS^T ([dqk_p][kLd],
  // zero-padded), with NaN/inf stored as 0: they are added back separately so
  // they reach only the rows that see their key (pack.h).
  // Split: [dqk_p][3 kLd], each row's keys as [hi | hi | lo] over 3 mc columns.
  bool load_kt(const HostSeqLen& sl, int64_t b, int64_t hk, int64_t c0, int64_t nc, int64_t mc, PT* kt,
               Scratch& w) const {
    const int64_t dqk = p.head_dim_qk, dqk_p = padded<PT>(dqk), ld = kLd * kSegsKt<kSplit>;
    std::fill(kt, kt + dqk_p * ld, PT{});
    bool finite = true;
    for (int64_t j = 0; j < nc; ++j) {
      load_row<Elem>(p.k, sl.k_row(b, p.k_batch_stride, p.k_row_stride, p.k_head_stride, hk, c0 + j), dqk,
                     w.row.data());
      for (int64_t c = 0; c < dqk; ++c) {
        const float x = w.row[c];
        const bool ok = x - x == 0.f;
        finite = finite && ok;
        if constexpr (kSplit) {
          if (!ok) continue;
          const uint16_t hi = float_to_bf16(x);
          kt[c * ld + j] = kt[c * ld + mc + j] = hi;
          kt[c * ld + 2 * mc + j] = float_to_bf16(x - bf16_to_float(hi));  // exact: x is an fp16 number
        } else {
          kt[c * ld + j] = ok ? to_packed<PT>(x) : PT{};
        }
      }
    }
    return finite;
  }

  // The key tiles of group g of sequence sl (none past its end).
  GroupPlan plan_group(const HostSeqLen& sl, const Mask& mask, int64_t g) const {
    GroupPlan pl;
    for (int64_t kt = group_first_tile(g); pl.n < tiles_of_group(g) && kt * kBlockK < sl.seqlen_k; ++kt) {
      KeyTile& t = pl.t[pl.n++];
      t.c0 = kt * kBlockK;
      t.nc = std::min(kBlockK, sl.seqlen_k - t.c0);
      t.mc = padded<PT>(t.nc);
      t.r_begin = mask.row_begin(t.c0);
      t.r_end = mask.row_end(t.c0 + t.nc - 1);
      t.k_finite = true;
      if (t.r_begin < t.r_end) {
        pl.q_lo = std::min(pl.q_lo, t.r_begin / kBlockQ);
        pl.q_hi = std::max(pl.q_hi, ceil_div(t.r_end, kBlockQ));
      }
    }
    return pl;
  }

  // The last group of g's chain before g that adds to query tile qt's dQ^T
  // (-1: none).
  int32_t prev_group(const HostSeqLen& sl, const Mask& mask, int64_t g, int64_t qt) const {
    const int64_t c = chain_of(g);
    for (int64_t gp = g - 1; gp >= 0;) {
      const int64_t r = run_of(gp);
      if (r % chains != c) {  // to the last group of the chain's previous run
        const int64_t rp = r - ((r - c) % chains + chains) % chains;
        if (rp < 0) break;
        gp = run_end(rp) - 1;
        continue;
      }
      const GroupPlan pl = plan_group(sl, mask, gp);
      if (pl.visits(qt)) return static_cast<int32_t>(gp);
      // The mask is a band: the rows that see a key end no earlier for later
      // keys, so no earlier group reaches qt either.
      if (pl.q_hi <= qt) break;
      --gp;
    }
    return -1;
  }
  int64_t chain_of(int64_t g) const { return run_of(g) % chains; }

  // Pass 1: dK, dV of the key groups of run r of kv head hk, and their share
  // of dQ for every query head of the group.
  void key_item(int64_t b, int64_t hk, int64_t r, Scratch& w) const {
    const HostSeqLen sl(p, b);
    for (int64_t g = run_first(r); g < run_end(r) && group_first_tile(g) * kBlockK < sl.seqlen_k; ++g)
      key_group(sl, b, hk, g, w);
  }

  // Key group g: query tiles outer, key tiles inner, so each query tile's packed
  // operands are read once per group, not once per key tile (the traffic that
  // kept 16 threads from scaling), while the group's K, V and dK, dV stay in L2.
  // dK/dV sum by head, then query tile, then key tile order; dQ^T by key tile
  // within its chain: the bits do not depend on the threads.
  void key_group(const HostSeqLen& sl, int64_t b, int64_t hk, int64_t g, Scratch& w) const {
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
    const int64_t dqk_p = padded<PT>(dqk), dv_p = padded<PT>(dv);
    const Mask mask(sl.seqlen_q, sl.seqlen_k, p.window_left, p.window_right);
    GroupPlan pl = plan_group(sl, mask, g);
    const int64_t n = pl.n;
    for (int64_t i = 0; i < n; ++i) {
      KeyTile& t = pl.t[i];
      std::fill(w.dk_at(i), w.dk_at(i) + t.mc * dqk_p * kSegsV<kSplit>, 0.f);
      std::fill(w.dv_at(i), w.dv_at(i) + t.mc * dv_p * kSegsV<kSplit>, 0.f);
      if constexpr (kSplit) {
        load_split_rows(k, kv, sl, false, b, hk, t.c0, t.nc, t.mc, dqk, dqk_p, w.k_at(i), w.row.data());
        load_split_rows(k, vv, sl, false, b, hk, t.c0, t.nc, t.mc, dv, dv_p, w.v_at(i), w.row.data());
      } else {
        load_a_tile<Elem>(kv, sl, false, b, hk, t.c0, t.nc, t.mc, dqk, dqk_p, w.k_at(i), w.row.data());
        load_a_tile<Elem>(vv, sl, false, b, hk, t.c0, t.nc, t.mc, dv, dv_p, w.v_at(i), w.row.data());
      }
      t.k_finite = load_kt(sl, b, hk, t.c0, t.nc, t.mc, w.kt_at(i), w);
    }
    for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
      const ScoreContext ctx(p, sl, b, h, rng);
      for (int64_t qt = pl.q_lo; qt < pl.q_hi; ++qt) {
        if (!pl.visits(qt)) continue;
        const int64_t r0 = qt * kBlockQ;
        load_row_stats(sl, b, h, r0, std::min(kBlockQ, sl.seqlen_q - r0), w);
        // This chain's block, once the previous item that sees it is done.
        const int64_t c = chain_of(g);
        std::atomic<int32_t>& tn = turn(c, h, b, qt);
        const int32_t prev = prev_group(sl, mask, g, qt);
        for (int spins = 0; tn.load(std::memory_order_acquire) != prev + 1;) wait_step(spins);
        float* dq_cols = dqt(c, h, b, qt);
        if (prev < 0) std::fill(dq_cols, dq_cols + dqk_p * kLd, 0.f);
        for (int64_t i = 0; i < n; ++i)
          if (pl.t[i].sees(qt)) key_pair(ctx, sl, b, h, hk, qt, pl.t[i], i, dq_cols, w);
        tn.store(static_cast<int32_t>(g) + 1, std::memory_order_release);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (kSplit) {  // the accumulators' halves: P hi [dO hi | dO lo] + P lo dO hi
        for (int64_t j = 0; j < pl.t[i].nc; ++j) {
          float* dkr = w.dk_at(i) + j * 2 * dqk_p;
          float* dvr = w.dv_at(i) + j * 2 * dv_p;
          for (int64_t c = 0; c < dqk; ++c) dkr[c] += dkr[dqk_p + c];
          for (int64_t c = 0; c < dv; ++c) dvr[c] += dvr[dv_p + c];
        }
      }
      store_tile<Elem>(p.dk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, sl, false, b, hk,
                       pl.t[i].c0, pl.t[i].nc, dqk, w.dk_at(i), dqk_p * kSegsV<kSplit>);
      store_tile<Elem>(p.dv, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, sl, false, b, hk,
                       pl.t[i].c0, pl.t[i].nc, dv, w.dv_at(i), dv_p * kSegsV<kSplit>);
    }
  }

  // P^T = exp(S^T - lse) and dS^T = P^T (dP^T - d) scale in place, with dropout
  // and softcap (the path of fp32, and of bf16 where the one-pass kernel does
  // not apply). S^T is scaled already unless `plain`.
  void elementwise(const ScoreContext& ctx, bool plain, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                   const float* tanh_buf, Scratch& w) const {
    float* st = w.s.data();
    float* dpt = w.dp.data();
    for (int64_t j = 0; j < nc; ++j) {
      if (plain) k.scale_row(st + j * kLd, nr, p.softmax_scale);
      k.exp_sub_vec(st + j * kLd, w.lse.data(), nr);
    }
    if (ctx.dropout) ctx.dropout_t(dpt, kLd, r0, nr, c0, nc);  // dP through the multiplier
    for (int64_t j = 0; j < nc; ++j)
      k.softmax_grad_vec(st + j * kLd, dpt + j * kLd, w.d.data(), nr, p.softmax_scale);
    if (ctx.dropout) ctx.dropout_t(st, kLd, r0, nr, c0, nc);  // the same multiplier on P, for dV
    if (tanh_buf)
      for (int64_t j = 0; j < nc; ++j)
        for (int64_t r = 0; r < nr; ++r) dpt[j * kLd + r] *= 1.f - tanh_buf[j * kLd + r] * tanh_buf[j * kLd + r];
  }

  // Split, after elementwise(): P^T and dS^T as bf16 pairs (A operands, with
  // dS^T's finite high half) and dS^T as the [hi; lo; hf] B operand of dQ^T, from
  // the fp32 tiles (dS^T's padded columns zeroed by the caller).
  void split_operands(int64_t nc, int64_t mc, int64_t nr, int64_t nr_p, Scratch& w) const {
    const float* st = w.s.data();
    const float* dpt = w.dp.data();
    float* t3 = w.dst3.data();  // [3 mc][kLd]
    std::fill(t3, t3 + 3 * mc * kLd, 0.f);
    for (int64_t j = 0; j < nc; ++j) {
      k.to_bf16_split(st + j * kLd, w.pa.data() + j * kLd, w.pl.data() + j * kLd, nr, nr_p);
      k.to_bf16_split(dpt + j * kLd, w.da.data() + j * kLd, w.dl.data() + j * kLd, nr, nr_p);
      for (int64_t r = 0; r < nr_p; ++r) {
        const float x = dpt[j * kLd + r];
        const float h = bf16_to_float(w.da[j * kLd + r]);
        const bool fin = h - h == 0.f;
        w.df[j * kLd + r] = fin ? w.da[j * kLd + r] : PT{};
        t3[j * kLd + r] = x;
        t3[(mc + j) * kLd + r] = fin ? x - h : 0.f;
        t3[(2 * mc + j) * kLd + r] = fin ? x : 0.f;
      }
    }
    k.to_bf16_vnni(t3, kLd, 3 * mc, 3 * mc, nr_p, w.db.data());
  }

  // The five products of query tile qt of head h and key tile t (group slot i).
  void key_pair(const ScoreContext& ctx, const HostSeqLen& sl, int64_t b, int64_t h, int64_t hk, int64_t qt,
                const KeyTile& t, int64_t i, float* dq_cols, Scratch& w) const {
    const int64_t c0 = t.c0, nc = t.nc, mc = t.mc;
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
    const int64_t dqk_p = padded<PT>(dqk), dv_p = padded<PT>(dv);
    const int64_t r0 = qt * kBlockQ, nr = std::min(kBlockQ, t.r_end - r0), nr_p = padded<PT>(nr);
    const Mask& mask = ctx.mask;
    float* dk = w.dk_at(i);
    float* dvv = w.dv_at(i);
    float* st = w.s.data();
    float* dpt = w.dp.data();
    constexpr int64_t sa = kSegsQk<kSplit>, sacc = kSegsV<kSplit>;
    product(mc, nr_p, sa * dqk_p, w.k_at(i), sa * dqk_p, q_t.tile(b, h, qt), q_t.ld(b), st, kLd, false);
    product(mc, nr_p, sa * dv_p, w.v_at(i), sa * dv_p, do_t.tile(b, h, qt), do_t.ld(b), dpt, kLd, false);
    // P^T and dS^T (times the softmax scale), row j holding key c0 + j.
    const bool plain = ctx.softcap <= 0.f && !ctx.alibi && mask.tile_full(r0, r0 + nr, c0, c0 + nc);
    if (!plain) {
      for (int64_t j = 0; j < nc; ++j) k.scale_row(st + j * kLd, nr, p.softmax_scale);
    }
    float* tanh_buf = ctx.softcap > 0.f ? w.tanh.data() : nullptr;
    if (!plain) ctx.apply_t(st, kLd, r0, nr, c0, nc, tanh_buf);
    const PT* pa;  // the A operands of dV (P^T) and dK (dS^T)
    const PT* da;
    if constexpr (kBf16) {
      if (k.bwd_tile_bf16 && !ctx.dropout && !tanh_buf) {
        // One pass from the products' fp32 tiles to the three bf16 operands;
        // fp32 P and dS are kept only for the rare non-finite corrections.
        const bool keep = !do_n.tile_finite(b, h, qt) || !q_n.tile_finite(b, h, qt) || !t.k_finite;
        k.bwd_tile_bf16({st, dpt, kLd, nc, mc, nr, nr_p, w.lse.data(), w.d.data(), plain ? p.softmax_scale : 1.f,
                         p.softmax_scale, w.pa.data(), w.da.data(), w.db.data(), keep,
                         kSplit ? w.pl.data() : nullptr, kSplit ? w.dl.data() : nullptr,
                         kSplit ? w.df.data() : nullptr});
        pa = w.pa.data(), da = w.da.data();
      } else {
        elementwise(ctx, plain, r0, nr, c0, nc, tanh_buf, w);
        // The padded columns belong to rows this key tile may not see: zero.
        if (nr < nr_p)
          for (int64_t j = 0; j < nc; ++j) std::fill(dpt + j * kLd + nr, dpt + j * kLd + nr_p, 0.f);
        if constexpr (kSplit) {
          split_operands(nc, mc, nr, nr_p, w);
        } else {
          round_rows(st, w.pa.data(), nc, nr, nr_p);
          round_rows(dpt, w.da.data(), nc, nr, nr_p);
          k.to_bf16_vnni(dpt, kLd, nc, mc, nr_p, w.db.data());
        }
        pa = w.pa.data(), da = w.da.data();
      }
    } else {
      elementwise(ctx, plain, r0, nr, c0, nc, tanh_buf, w);
      pa = st, da = dpt;
    }
    // dV += P^T dO, dK += dS^T Q; NaN/inf in dO or Q reach only the keys
    // their rows see (pack.h).
    // Split: P hi [dO hi | dO lo] into both halves of dV's row, P lo dO hi into
    // the first (the halves are summed when stored). P is finite or NaN (at most
    // 1, or NaN where its row met one), so no inf meets dO's zero low halves.
    product(mc, sacc * dv_p, nr_p, pa, kLd, do_n.tile(b, h, qt), do_n.ld(b), dvv, sacc * dv_p, true);
    if constexpr (kSplit) product(mc, dv_p, nr_p, w.pl.data(), kLd, do_n.tile(b, h, qt), do_n.ld(b), dvv, 2 * dv_p, true);
    if (!do_n.tile_finite(b, h, qt))
      add_nonfinite<Elem>(dov, sl, true, b, h, r0, nr, dv, st, kLd, nc, dvv, sacc * dv_p, w.row.data());
    // Split: dS hi Q hi and dS lo Q hi into the first half, and Q lo against dS's
    // finite high half into the second (an inf dS is common: inf * a zero lo is NaN).
    product(mc, dqk_p, nr_p, da, kLd, q_n.tile(b, h, qt), q_n.ld(b), dk, sacc * dqk_p, true);
    if constexpr (kSplit) {
      product(mc, dqk_p, nr_p, w.df.data(), kLd, q_n.tile(b, h, qt) + (dqk_p / 16) * q_n.ld(b), q_n.ld(b),
              dk + dqk_p, 2 * dqk_p, true);
      product(mc, dqk_p, nr_p, w.dl.data(), kLd, q_n.tile(b, h, qt), q_n.ld(b), dk, 2 * dqk_p, true);
    }
    if (!q_n.tile_finite(b, h, qt))
      add_nonfinite<Elem>(qv, sl, true, b, h, r0, nr, dqk, dpt, kLd, nc, dk, sacc * dqk_p, w.row.data());
    // dQ^T += K^T dS^T, into this chain's block of this query tile (split:
    // [Kh | Kh | Kl] against [dS hi; dS lo; dS hf] over 3 mc keys).
    constexpr int64_t skt = kSegsKt<kSplit>;
    if constexpr (kBf16)
      product(dqk_p, nr_p, skt * mc, w.kt_at(i), skt * kLd, w.db.data(), skt * mc * 16, dq_cols, kLd, true);
    else product(dqk, nr, nc, w.kt_at(i), kLd, dpt, kLd, dq_cols, kLd, true);
    if (!t.k_finite) add_nonfinite_kt(sl, b, hk, c0, nc, nr, dpt, dq_cols, w);
  }

  // dQ^T[c][i] += dS^T[j][i] * k[j][c] for the non-finite k[j][c] and dS^T != 0.
  void add_nonfinite_kt(const HostSeqLen& sl, int64_t b, int64_t hk, int64_t c0, int64_t nc, int64_t nr,
                        const float* dst, float* dq_cols, Scratch& w) const {
    const int64_t dqk = p.head_dim_qk;
    for (int64_t j = 0; j < nc; ++j) {
      load_row<Elem>(p.k, sl.k_row(b, p.k_batch_stride, p.k_row_stride, p.k_head_stride, hk, c0 + j), dqk,
                     w.row.data());
      for (int64_t c = 0; c < dqk; ++c) {
        const float x = w.row[c];
        if (x - x == 0.f) continue;
        for (int64_t i = 0; i < nr; ++i)
          if (dst[j * kLd + i] != 0.f) dq_cols[c * kLd + i] += dst[j * kLd + i] * x;
      }
    }
  }

  // Pass 2: dQ of query rows [r0, r0+nr) of head h: its dQ^T block (0 where no
  // key is seen), transposed.
  void store_dq(int64_t b, int64_t h, int64_t qt, Scratch& w) const {
    const HostSeqLen sl(p, b);
    const int64_t r0 = qt * kBlockQ;
    if (r0 >= sl.seqlen_q) return;
    const int64_t nr = std::min(kBlockQ, sl.seqlen_q - r0), dqk = p.head_dim_qk;
    // The chains summed in order in the blocks' own layout (contiguous,
    // vectorises), then transposed.
    float* out = w.f.data();  // [nr][dqk]
    float* acc = w.dqsum.data();
    const int64_t block = dqk * kLd;
    bool any = false;
    for (int64_t c = 0; c < chains; ++c) {
      if (turn(c, h, b, qt).load(std::memory_order_relaxed) == 0) continue;
      const float* x = dqt(c, h, b, qt);
      if (!any) std::copy(x, x + block, acc);
      else
        for (int64_t e = 0; e < block; ++e) acc[e] += x[e];
      any = true;
    }
    if (!any) {
      std::fill(out, out + nr * dqk, 0.f);
    } else {
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t c = 0; c < dqk; ++c) out[r * dqk + c] = acc[c * kLd + r];
    }
    store_tile<Elem>(p.dq, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, sl, true, b, h, r0,
                     nr, dqk, out, dqk);
  }
};

}  // namespace
}  // namespace cpu

void cpu_backward(const BwdParams& p) {
  const cpu::Kernels& k = cpu::active_kernels();
  with_elem(p.dtype, [&](auto e) {
    using Elem = decltype(e);
    if constexpr (std::is_same_v<Elem, F16>) {
      if (k.gemm_bf16 != nullptr && k.to_bf16_split != nullptr && cpu::f16_split(k.isa, /*backward=*/true)) {
        cpu::Backward<Elem, uint16_t, true>(p, k).run();
        return;
      }
    }
    if (std::is_same_v<Elem, BF16> && k.gemm_bf16 != nullptr)
      cpu::Backward<Elem, uint16_t>(p, k).run();
    else
      cpu::Backward<Elem, float>(p, k).run();
  });
}

}  // namespace flashattn::detail
