// Which (head dim, dtype) kernels this build compiled: CMake defines
// FLASHATTN_SM80_<dim>_<DTYPE> for every pair of FLASHATTN_CUDA_HEAD_DIMS and
// FLASHATTN_CUDA_DTYPES (an sm80 forward and backward, and the decoding path's kernels).
// The dispatch files (sm80, decode) name only these, so a narrow build links.
#pragma once

namespace flashattn::sm80 {

template <int kDim, bool kBf16>
inline constexpr bool kBuilt = false;
#ifdef FLASHATTN_SM80_64_BF16
template <> inline constexpr bool kBuilt<64, true> = true;
#endif
#ifdef FLASHATTN_SM80_96_BF16
template <> inline constexpr bool kBuilt<96, true> = true;
#endif
#ifdef FLASHATTN_SM80_128_BF16
template <> inline constexpr bool kBuilt<128, true> = true;
#endif
#ifdef FLASHATTN_SM80_192_BF16
template <> inline constexpr bool kBuilt<192, true> = true;
#endif
#ifdef FLASHATTN_SM80_256_BF16
template <> inline constexpr bool kBuilt<256, true> = true;
#endif
#ifdef FLASHATTN_SM80_64_FP16
template <> inline constexpr bool kBuilt<64, false> = true;
#endif
#ifdef FLASHATTN_SM80_96_FP16
template <> inline constexpr bool kBuilt<96, false> = true;
#endif
#ifdef FLASHATTN_SM80_128_FP16
template <> inline constexpr bool kBuilt<128, false> = true;
#endif
#ifdef FLASHATTN_SM80_192_FP16
template <> inline constexpr bool kBuilt<192, false> = true;
#endif
#ifdef FLASHATTN_SM80_256_FP16
template <> inline constexpr bool kBuilt<256, false> = true;
#endif

}  // namespace flashattn::sm80
