// Which instruction sets the CPU flash backend uses, decided at run time so one
// binary runs on any x86-64 (and the portable path is all there is elsewhere).
//   amx         bf16 tile products on AMX (Sapphire Rapids and newer)
//   avx512_bf16 bf16 tile products with vdpbf16ps
//   avx512      fp32 FMA products; bf16/fp16 inputs are widened to fp32
//   portable    plain C++ (auto-vectorised), every dtype widened to fp32
// fp32 inputs always take fp32 products (the contract's fp32 accuracy); AMX and
// AVX512-BF16 only change how bf16 inputs are multiplied.
#pragma once

namespace flashattn::detail::cpu {

enum class Isa { portable = 0, avx512 = 1, avx512_bf16 = 2, amx = 3 };

// The best level this CPU (and OS, for AMX) supports, capped by the environment
// variable FLASHATTN_CPU_ISA (portable|avx512|avx512_bf16|amx) when set.
Isa active_isa();
// The best level this CPU supports, ignoring any cap.
Isa supported_isa();
const char* isa_name(Isa isa);

// For tests: cap the level (clamped to what the CPU supports); reset() undoes it.
void force_isa(Isa isa);
void reset_forced_isa();

// fp16 on the bf16 products ("split", the tiled forward and the backward): an
// fp16 number is exactly the sum of two bf16 numbers, hi + lo, so Q K^T and
// dO V^T are four bf16 products each (each exact in fp32, as fp32's are) and
// the products with P or dS three (P and dS kept to 16 bits) in place of one
// fp32 product. The default for the forward on amx only: measured on a
// Sapphire Rapids host (16 threads) at 1.03-1.21x the widened forward, while
// the split backward measured 0.94-1.00x, so the backward widens by default
// (cpu_notes, v16). Elsewhere fp16 is widened to fp32 (and always on the
// decoding path). FLASHATTN_CPU_F16=split|fp32 overrides the default of both
// passes at levels with bf16 products (amx, avx512_bf16).
bool f16_split(Isa isa, bool backward);
// For tests: 1 forces split, 0 fp32, -1 the default again.
void force_f16_split(int mode);

}  // namespace flashattn::detail::cpu
