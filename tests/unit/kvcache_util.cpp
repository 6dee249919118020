#include "kvcache_util.h"

#include <algorithm>
#include <optional>
#include <random>

namespace fatest {

Paged page_out(const Problem& p, int64_t page) {
  const Case& c = p.c;
  const int64_t max_blocks = c.Sk / page, pool = p.B * max_blocks + 3;
  Paged r{make_tensor(c.dtype, {pool, page, c.Hkv, c.Dqk}), make_tensor(c.dtype, {pool, page, c.Hkv, c.Dv}),
          make_tensor(DType::i32, {p.B, max_blocks})};
  for (HostTensor* t : {&r.k, &r.v})
    for (int64_t e = 0; e < t->numel(); ++e) t->set(e, kNaN);
  std::vector<int64_t> ids(static_cast<size_t>(pool));
  for (int64_t i = 0; i < pool; ++i) ids[static_cast<size_t>(i)] = i;
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(pool * 31 + page));
  int64_t next = 0;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < max_blocks; ++i) {
      const bool used = i * page < p.len_k[b];
      const int64_t id = used ? ids[static_cast<size_t>(next++)] : -1;
      r.table.set(b * max_blocks + i, static_cast<double>(id));
      if (!used) continue;
      for (int64_t j = i * page; j < std::min((i + 1) * page, p.len_k[b]); ++j)
        for (int64_t hk = 0; hk < c.Hkv; ++hk) {
          const int64_t src = (b * c.Sk + j) * c.Hkv + hk, dst = (id * page + j % page) * c.Hkv + hk;
          for (int64_t x = 0; x < c.Dqk; ++x) r.k.set(dst * c.Dqk + x, p.k.get(src * c.Dqk + x));
          for (int64_t x = 0; x < c.Dv; ++x) r.v.set(dst * c.Dv + x, p.v.get(src * c.Dv + x));
        }
    }
  return r;
}

Step take_last_rows(const Problem& p, int64_t s_new) {
  const Case& c = p.c;
  Step s{p.k, p.v, make_tensor(c.dtype, {p.B, s_new, c.Hkv, c.Dqk}), make_tensor(c.dtype, {p.B, s_new, c.Hkv, c.Dv})};
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < s_new; ++i)
      for (int64_t hk = 0; hk < c.Hkv; ++hk) {
        const int64_t src = (b * c.Sk + p.len_k[b] - s_new + i) * c.Hkv + hk, dst = (b * s_new + i) * c.Hkv + hk;
        for (int64_t x = 0; x < c.Dqk; ++x) {
          s.k_new.set(dst * c.Dqk + x, p.k.get(src * c.Dqk + x));
          s.k_cache.set(src * c.Dqk + x, kNaN);
        }
        for (int64_t x = 0; x < c.Dv; ++x) {
          s.v_new.set(dst * c.Dv + x, p.v.get(src * c.Dv + x));
          s.v_cache.set(src * c.Dv + x, kNaN);
        }
      }
  return s;
}

Paged page_out(const Problem& p, const Step& s, int64_t page) {
  Problem holed = p;
  holed.k = s.k_cache;
  holed.v = s.v_cache;
  return page_out(holed, page);
}

namespace {

// One forward on t over caches kc / vc (copied to t's memory and back), optionally paged
// and with new rows.
HostTensor run_kv(const Problem& p, const Target& t, HostTensor& kc, HostTensor& vc, const HostTensor* table,
                  const Step* step, int threads, bool with_used) {
  HostTensor out = make_tensor(p.c.dtype, p.out_shape());
  HostTensor q = p.q;
  std::optional<HostTensor> alibi = p.alibi, used = p.used_k, tab, kn, vn;
  if (table != nullptr) tab = *table;
  if (step != nullptr) {
    kn = step->k_new;
    vn = step->v_new;
  }
  Bound bq(t, q), bk(t, kc), bv(t, vc), bo(t, out);
  std::optional<Bound> ba, bu, bt, bkn, bvn;
  fa::Options opt = p.options(t);
  opt.num_threads = threads;
  if (alibi) opt.alibi_slopes = ba.emplace(t, *alibi).view();
  if (used && with_used) opt.seqused_k = bu.emplace(t, *used).view();
  if (tab) opt.block_table = bt.emplace(t, *tab).view();
  if (kn) {
    opt.k_new = bkn.emplace(t, *kn).view();
    opt.v_new = bvn.emplace(t, *vn).view();
  }
  fa::forward(bq.view(), bk.view(), bv.view(), bo.view(), nullptr, opt);
  bo.fetch();
  bk.fetch();
  bv.fetch();
  return out;
}

}  // namespace

HostTensor kv_forward(const Problem& p, const Target& t, const Paged* paged, int threads, bool with_used) {
  HostTensor k = paged ? paged->k : p.k, v = paged ? paged->v : p.v;
  return run_kv(p, t, k, v, paged ? &paged->table : nullptr, nullptr, threads, with_used);
}

HostTensor kv_step(const Problem& p, const Target& t, const Step& s, HostTensor& kc, HostTensor& vc,
                   const HostTensor* table, int threads) {
  return run_kv(p, t, kc, vc, table, &s, threads, true);
}

}  // namespace fatest
