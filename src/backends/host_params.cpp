#include "backends/host_params.h"

#include <cstring>
#include <vector>

namespace flashattn::detail {

// The new rows are first gathered into a buffer of their own, then written: k_new / v_new
// may be views of the cache itself, even of rows that this step overwrites (a cache
// shifted by one), and each destination must get the value its source held before the
// call.
void write_new_kv(const HostFwdParams& p) {
  const KvCache& kv = p.kv;
  if (kv.new_rows == 0) return;
  const int64_t esize = dtype_size(p.dtype);
  struct Side {
    void* cache;
    const KvCache::NewRows& rows;
    int64_t batch_stride, row_stride, head_stride, dim;
  };
  const Side sides[] = {
      {const_cast<void*>(p.k), kv.k_new, p.k_batch_stride, p.k_row_stride, p.k_head_stride, p.head_dim_qk},
      {const_cast<void*>(p.v), kv.v_new, p.v_batch_stride, p.v_row_stride, p.v_head_stride, p.head_dim_v}};
  std::vector<char> staged;
  for (const Side& s : sides)
    staged.resize(staged.size() + static_cast<size_t>(p.batch * kv.new_rows * p.heads_kv * s.dim * esize));
  for (const bool write : {false, true}) {
    char* buf = staged.data();
    for (int64_t b = 0; b < p.batch; ++b) {
      const HostSeqLen sl(p, b);  // seqlen_k is seqused_k[b], validated >= new_rows
      for (const Side& s : sides)
        for (int64_t i = 0; i < kv.new_rows; ++i)
          for (int64_t h = 0; h < p.heads_kv; ++h, buf += s.dim * esize) {
            const size_t bytes = static_cast<size_t>(s.dim * esize);
            if (!write) {
              const int64_t src = b * s.rows.batch_stride + i * s.rows.row_stride + h * s.rows.head_stride;
              std::memcpy(buf, static_cast<const char*>(s.rows.data) + src * esize, bytes);
            } else if (sl.seqlen_k >= kv.new_rows) {  // (a length changed under the call: skipped)
              const int64_t dst = sl.k_row(b, s.batch_stride, s.row_stride, s.head_stride, h,
                                           sl.seqlen_k - kv.new_rows + i);
              std::memcpy(static_cast<char*>(s.cache) + dst * esize, buf, bytes);
            }
          }
    }
  }
}

}  // namespace flashattn::detail
