#include "backends/cpu/workspace.h"

#include <mutex>
#include <new>
#include <vector>

#include "backends/env.h"

namespace flashattn::detail::cpu {
namespace {

struct Block {
  void* ptr;
  size_t cap;
};

// Cached blocks, at most Workspace::keep_bytes() in all. Never destroyed: a
// call made from another static destructor still finds it, and the blocks
// stay reachable at exit (no leak to report).
struct Cache {
  std::mutex mu;
  std::vector<Block> blocks;
  size_t bytes = 0;
};
Cache& cache() {
  static Cache* const c = new Cache;
  return *c;
}

void free_block(const Block& b) { ::operator delete(b.ptr, std::align_val_t(64)); }

}  // namespace

size_t Workspace::keep_bytes() {
  // Unset or unparsable: the default.
  static const size_t keep = static_cast<size_t>(env_mebibytes("FLASHATTN_CPU_WORKSPACE_MB").value_or(kKeepBytes));
  return keep;
}

void Workspace::acquire(size_t bytes) {
  release();
  if (bytes == 0) bytes = 64;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    // The smallest cached block that fits.
    size_t best = c.blocks.size();
    for (size_t i = 0; i < c.blocks.size(); ++i)
      if (c.blocks[i].cap >= bytes && (best == c.blocks.size() || c.blocks[i].cap < c.blocks[best].cap)) best = i;
    if (best < c.blocks.size()) {
      ptr_ = c.blocks[best].ptr;
      cap_ = c.blocks[best].cap;
      c.bytes -= cap_;
      c.blocks.erase(c.blocks.begin() + static_cast<std::ptrdiff_t>(best));
      return;
    }
  }
  ptr_ = ::operator new(bytes, std::align_val_t(64));
  cap_ = bytes;
}

void Workspace::release() {
  if (ptr_ == nullptr) return;
  Block mine{ptr_, cap_};
  ptr_ = nullptr;
  cap_ = 0;
  std::vector<Block> drop;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    c.blocks.push_back(mine);
    c.bytes += mine.cap;
    // Over the limit: drop the smallest blocks first (the large ones are the
    // expensive ones to fault in again), then this one if still over.
    while (c.bytes > keep_bytes() && !c.blocks.empty()) {
      size_t smallest = 0;
      for (size_t i = 1; i < c.blocks.size(); ++i)
        if (c.blocks[i].cap < c.blocks[smallest].cap) smallest = i;
      drop.push_back(c.blocks[smallest]);
      c.bytes -= c.blocks[smallest].cap;
      c.blocks.erase(c.blocks.begin() + static_cast<std::ptrdiff_t>(smallest));
    }
  }
  for (const Block& b : drop) free_block(b);
}

}  // namespace flashattn::detail::cpu
