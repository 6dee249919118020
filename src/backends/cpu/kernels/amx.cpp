// AMX kernels: the bf16 product on tile registers. One register block is 32 x 32
// of C in four fp32 tiles (0-3), fed per 32-deep step by two A tiles (4, 5: 16
// rows x 32 bf16, read straight from row-major A with its stride) and two B tiles
// (6, 7: one VNNI panel each, 16 pairs x 16 columns). Every tile is 16 rows x 64
// bytes, so one configuration serves every product; each thread loads it before
// its products (amx_thread_begin) and releases the tile state after.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels/x86.h"

#define FA_AMX __attribute__((target("amx-tile,amx-bf16,avx512f")))

namespace flashattn::detail::cpu::x86 {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

constexpr int64_t kPanel = 16;  // columns per VNNI panel

}  // namespace

FA_AMX void amx_thread_begin() {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  // GCC 12 does not see that ldtilecfg reads the struct and drops the stores
  // above without this barrier.
  __asm__ volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

FA_AMX void amx_thread_end() { _tile_release(); }

FA_AMX void gemm_bf16_amx(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                          const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  const int64_t a_stride = lda * 2, c_stride = ldc * 4;
  for (int64_t m0 = 0; m0 < M; m0 += 32) {
    const uint16_t* a0 = A + m0 * lda;
    const uint16_t* a1 = a0 + 16 * lda;
    for (int64_t n0 = 0; n0 < N; n0 += 32) {
      float* c0 = C + m0 * ldc + n0;
      float* c2 = c0 + 16 * ldc;
      if (accumulate) {
        _tile_loadd(0, c0, c_stride);
        _tile_loadd(1, c0 + 16, c_stride);
        _tile_loadd(2, c2, c_stride);
        _tile_loadd(3, c2 + 16, c_stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      const uint16_t* b0 = B + (n0 / kPanel) * ldb;
      const uint16_t* b1 = b0 + ldb;
      for (int64_t k0 = 0; k0 < K; k0 += 32) {
        _tile_loadd(4, a0 + k0, a_stride);
        _tile_loadd(5, a1 + k0, a_stride);
        _tile_loadd(6, b0 + k0 * kPanel, 64);
        _tile_loadd(7, b1 + k0 * kPanel, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c0, c_stride);
      _tile_stored(1, c0 + 16, c_stride);
      _tile_stored(2, c2, c_stride);
      _tile_stored(3, c2 + 16, c_stride);
    }
  }
}

}  // namespace flashattn::detail::cpu::x86
