#include "backends/cpu/kernels/isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace flashattn::detail::cpu {
namespace {

#if defined(__x86_64__) && defined(__linux__)
// Linux hands out the AMX tile state only on request, once per process.
bool request_amx() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

Isa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (!avx512) return Isa::portable;
  if (!__builtin_cpu_supports("avx512bf16")) return Isa::avx512;
#if defined(__linux__)
  // amx-tile/amx-bf16 are CPUID.(7,0):EDX bits 24 and 22.
  unsigned eax = 7, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
  const bool amx = ((edx >> 24) & 1) && ((edx >> 22) & 1);
  if (amx && request_amx()) return Isa::amx;
#endif
  return Isa::avx512_bf16;
#else
  return Isa::portable;
#endif
}

Isa env_cap(Isa best) {
  const char* s = std::getenv("FLASHATTN_CPU_ISA");
  if (s == nullptr || *s == 0) return best;
  Isa want = best;
  if (std::strcmp(s, "portable") == 0) want = Isa::portable;
  else if (std::strcmp(s, "avx512") == 0) want = Isa::avx512;
  else if (std::strcmp(s, "avx512_bf16") == 0) want = Isa::avx512_bf16;
  else if (std::strcmp(s, "amx") == 0) want = Isa::amx;
  return static_cast<int>(want) < static_cast<int>(best) ? want : best;
}

constexpr int kNotForced = -1;
std::atomic<int> g_forced{kNotForced};
std::atomic<int> g_forced_split{kNotForced};

// FLASHATTN_CPU_F16: 1 split, 0 fp32, -1 unset (or not understood).
int env_f16() {
  const char* s = std::getenv("FLASHATTN_CPU_F16");
  if (s == nullptr) return kNotForced;
  if (std::strcmp(s, "split") == 0) return 1;
  if (std::strcmp(s, "fp32") == 0) return 0;
  return kNotForced;
}

}  // namespace

Isa supported_isa() {
  static const Isa best = detect();
  return best;
}

Isa active_isa() {
  static const Isa from_env = env_cap(supported_isa());
  const int f = g_forced.load(std::memory_order_relaxed);
  if (f == kNotForced) return from_env;
  return f < static_cast<int>(supported_isa()) ? static_cast<Isa>(f) : supported_isa();
}

void force_isa(Isa isa) { g_forced.store(static_cast<int>(isa)); }
void reset_forced_isa() { g_forced.store(kNotForced); }

bool f16_split(Isa isa, bool backward) {
  if (static_cast<int>(isa) < static_cast<int>(Isa::avx512_bf16)) return false;  // no bf16 products
  static const int from_env = env_f16();
  int mode = g_forced_split.load(std::memory_order_relaxed);
  if (mode == kNotForced) mode = from_env;
  return mode == kNotForced ? isa == Isa::amx && !backward : mode == 1;
}

void force_f16_split(int mode) { g_forced_split.store(mode); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::amx: return "amx";
    case Isa::avx512_bf16: return "avx512_bf16";
    case Isa::avx512: return "avx512";
    default: return "portable";
  }
}

}  // namespace flashattn::detail::cpu
