// Debug aid for the Hopper forward's synchronisation. Compiled with
// FLASHATTN_SM90_HANG_CHECK defined:
//   - every mbarrier wait spins on try_wait with a clock64() budget
//     (FLASHATTN_SM90_HANG_CHECK_CYCLES, default 4e9, ~2 s at the H200's clock);
//     a wait past its budget flags itself in shared memory (and keeps waiting);
//   - each role (the producer thread, each consumer group) marks what it is about
//     to block on, mbarrier, named barrier, setmaxnreg or TMA store, and beats a
//     progress counter;
//   - a watchdog thread (producer warp 1, otherwise idle) prints one report per
//     block, every role's last mark, barrier, stage, parity, tile and key tile,
//     and traps, once a wait has flagged itself or no role has made progress for
//     the budget (a deadlock on named barriers or setmaxnreg, which cannot be
//     timed, is caught there). A hang becomes a launch error with a report.
// The printf lives in the watchdog only: a call inside the consumers would make
// ptxas serialise their wgmma (C7510) and change the timing under test.
// Without the macro the waits are cutlass's plain ones and the marks compile to
// nothing (the PTX is unchanged).
#pragma once

#include <cstdint>
#include <cstdio>

#include <cutlass/arch/barrier.h>

#if defined(FLASHATTN_SM90_HANG_CHECK) && !defined(FLASHATTN_SM90_HANG_CHECK_CYCLES)
#define FLASHATTN_SM90_HANG_CHECK_CYCLES 4000000000ll
#endif

namespace flashattn::sm90 {

// What a role was last doing.
enum class Where : int {
  kNone,  // not started (or no such role)
  kBusy,  // past its last wait, computing
  kRegs,  // setmaxnreg.inc
  kQFull,
  kQEmpty,
  kKFull,
  kKEmpty,
  kVFull,
  kVEmpty,
  kTurn,       // named barrier: the pingpong turn
  kGroupSync,  // named barrier: the group's epilogue sync
  kStoreWait,  // its TMA store reading shared memory
  kDone,
};

__device__ __forceinline__ const char* where_name(int w) {
  switch (static_cast<Where>(w)) {
    case Where::kBusy: return "busy";
    case Where::kRegs: return "setmaxnreg";
    case Where::kQFull: return "Q-full";
    case Where::kQEmpty: return "Q-empty";
    case Where::kKFull: return "K-full";
    case Where::kKEmpty: return "K-empty";
    case Where::kVFull: return "V-full";
    case Where::kVEmpty: return "V-empty";
    case Where::kTurn: return "turn";
    case Where::kGroupSync: return "group-sync";
    case Where::kStoreWait: return "store-wait";
    case Where::kDone: return "done";
    default: return "-";
  }
}

// Shared memory of the report (in SharedStorage only with the macro); slot 0 is
// the producer, slot g + 1 consumer group g.
struct HangMarks {
  static constexpr int kSlots = 4;
  int where[kSlots], tile[kSlots], stage[kSlots], phase[kSlots], key[kSlots];
  int beat[kSlots];      // changes at every mark: progress
  int timed_out[kSlots];  // threadIdx + 1 of a wait past its budget
};

// Called by one thread before the block's first __syncthreads.
__device__ __forceinline__ void hang_init(HangMarks* marks) {
#ifdef FLASHATTN_SM90_HANG_CHECK
  int* words = reinterpret_cast<int*>(marks);
  for (int i = 0; i < int(sizeof(HangMarks) / sizeof(int)); ++i) words[i] = 0;
#else
  (void)marks;
#endif
}

__device__ __forceinline__ void hang_mark(HangMarks* marks, int slot, Where what, int tile) {
#ifdef FLASHATTN_SM90_HANG_CHECK
  volatile HangMarks* m = marks;
  m->where[slot] = static_cast<int>(what);
  m->tile[slot] = tile;
  m->beat[slot] = m->beat[slot] + 1;
#else
  (void)marks, (void)slot, (void)what, (void)tile;
#endif
}

// Wait for the phase with parity `phase` of an mbarrier. stage: ring stage (0
// for Q), tile: the schedule's tile number, key: the key tile (-1 for Q).
__device__ __forceinline__ void wait_barrier(uint64_t* bar, uint32_t phase, Where what, int stage, int tile, int key,
                                             HangMarks* marks, int slot) {
#ifdef FLASHATTN_SM90_HANG_CHECK
  volatile HangMarks* m = marks;
  m->stage[slot] = stage;
  m->phase[slot] = int(phase);
  m->key[slot] = key;
  hang_mark(marks, slot, what, tile);
  const long long start = clock64();
  bool flagged = false;
  while (!cutlass::arch::ClusterBarrier::try_wait(bar, phase)) {
    if (!flagged && clock64() - start > FLASHATTN_SM90_HANG_CHECK_CYCLES) {
      m->timed_out[slot] = int(threadIdx.x) + 1;  // the watchdog reports and traps
      flagged = true;
    }
  }
  hang_mark(marks, slot, Where::kBusy, tile);
#else
  (void)what, (void)stage, (void)tile, (void)key, (void)marks, (void)slot;
  cutlass::arch::ClusterBarrier::wait(bar, phase);
#endif
}

#ifdef FLASHATTN_SM90_HANG_CHECK
// Runs on one otherwise idle thread until every role (producer + `groups`
// consumer groups) is done; on a flagged wait or a block-wide stall, prints the
// block's report and traps.
static __device__ __noinline__ void hang_watchdog(HangMarks* marks, int groups) {
  volatile HangMarks* m = marks;
  const int roles = groups + 1;
  int last_beat[HangMarks::kSlots] = {};
  long long since = clock64();
  for (;;) {
    bool done = true, moved = false;
    int flagged = 0;
    for (int s = 0; s < roles; ++s) {
      done = done && m->where[s] == int(Where::kDone);
      moved = moved || m->beat[s] != last_beat[s];
      last_beat[s] = m->beat[s];
      if (flagged == 0 && m->timed_out[s] != 0) flagged = s + 1;
    }
    if (done) return;
    if (moved) since = clock64();
    const bool stalled = clock64() - since > FLASHATTN_SM90_HANG_CHECK_CYCLES;
    if (flagged != 0 || stalled) {
      printf("flashattn sm90 fwd HANG block %d: %s\n", int(blockIdx.x),
             flagged != 0 ? "an mbarrier wait ran past its budget" : "no role progressed within the budget");
      for (int s = 0; s < roles; ++s)
        printf("  block %d %s: %s stage %d parity %d, tile %d key tile %d, timed-out thread %d\n", int(blockIdx.x),
               s == 0 ? "producer" : s == 1 ? "group0" : s == 2 ? "group1" : "group2", where_name(m->where[s]),
               m->stage[s], m->phase[s], m->tile[s], m->key[s], m->timed_out[s] - 1);
      __trap();
    }
    __nanosleep(10000);
  }
}
#endif

}  // namespace flashattn::sm90
