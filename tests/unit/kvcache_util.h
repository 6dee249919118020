// KV-cache fixtures shared by the host tests (test_kvcache.cpp) and the GPU ones
// (test_cuda.cpp): a batched cache stored as a paged pool, a decoding step taken out of
// a cache, and forward calls over either on any target.
#pragma once

#include "cases.h"

namespace fatest {

// The same keys and values as p's batched cache, stored in blocks of `page` rows of a
// pool in shuffled order. The pool's unused blocks and the rows past the used keys hold
// NaN, and the table's entries past the used blocks are -1.
struct Paged {
  HostTensor k, v, table;
};
Paged page_out(const Problem& p, int64_t page);

// A step of s_new rows per sequence taken out of p's cache: k_new / v_new hold the last
// s_new used rows of each sequence, and those rows of k_cache / v_cache are NaN.
struct Step {
  HostTensor k_cache, v_cache, k_new, v_new;
};
Step take_last_rows(const Problem& p, int64_t s_new);
// The pool of s's caches (p's with the step's rows taken out), as page_out lays out p's.
Paged page_out(const Problem& p, const Step& s, int64_t page);

// out of a forward over p's cache on t: batched (paged null) or through the pool, with
// p's seqused_k unless with_used is false.
HostTensor kv_forward(const Problem& p, const Target& t, const Paged* paged, int threads, bool with_used = true);
// out of a forward that first writes s's new rows into kc / vc (batched caches, or pools
// with `table`); kc / vc come back as the call left them.
HostTensor kv_step(const Problem& p, const Target& t, const Step& s, HostTensor& kc, HostTensor& vc,
                   const HostTensor* table, int threads);

}  // namespace fatest
