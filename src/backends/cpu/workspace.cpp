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

std::mutex g_mu;
std::vector<Block> g_free;  // cached blocks, at most Workspace::keep_bytes() in all
size_t g_free_bytes = 0;

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
    std::lock_guard<std::mutex> lock(g_mu);
    // The smallest cached block that fits.
    size_t best = g_free.size();
    for (size_t i = 0; i < g_free.size(); ++i)
      if (g_free[i].cap >= bytes && (best == g_free.size() || g_free[i].cap < g_free[best].cap)) best = i;
    if (best < g_free.size()) {
      ptr_ = g_free[best].ptr;
      cap_ = g_free[best].cap;
      g_free_bytes -= cap_;
      g_free.erase(g_free.begin() + static_cast<std::ptrdiff_t>(best));
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
    std::lock_guard<std::mutex> lock(g_mu);
    g_free.push_back(mine);
    g_free_bytes += mine.cap;
    // Over the limit: drop the smallest blocks first (the large ones are the
    // expensive ones to fault in again), then this one if still over.
    while (g_free_bytes > keep_bytes() && !g_free.empty()) {
      size_t smallest = 0;
      for (size_t i = 1; i < g_free.size(); ++i)
        if (g_free[i].cap < g_free[smallest].cap) smallest = i;
      drop.push_back(g_free[smallest]);
      g_free_bytes -= g_free[smallest].cap;
      g_free.erase(g_free.begin() + static_cast<std::ptrdiff_t>(smallest));
    }
  }
  for (const Block& b : drop) free_block(b);
}

}  // namespace flashattn::detail::cpu
