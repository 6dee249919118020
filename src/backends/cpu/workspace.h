// Pack buffers kept between calls. Fresh memory costs a page fault and a kernel
// page clear per 4 KiB on first touch: measured 19% of a bf16 forward at
// N = 2048 when every call allocated its packs. Buffers go back to a small
// process-wide cache when a call ends; the cache holds at most keep_bytes()
// (2 GiB, or FLASHATTN_CPU_WORKSPACE_MB; 0 keeps nothing), so what stays
// allocated between calls is bounded (and O(N) of the largest call).
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashattn::detail::cpu {

class Workspace {
 public:
  Workspace() = default;
  explicit Workspace(size_t bytes) { acquire(bytes); }
  ~Workspace() { release(); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  void acquire(size_t bytes);  // 64-byte aligned, uninitialised
  void release();
  void* data() const { return ptr_; }

  static constexpr size_t kKeepBytes = size_t{2} << 30;  // default of keep_bytes()
  static size_t keep_bytes();  // read once from the environment

 private:
  void* ptr_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace flashattn::detail::cpu
