// The x86-64 kernels of the table (kernels.h), each defined in the file named
// after its instruction set and compiled for it alone; kernels.cpp assembles the
// tables from them. Callers reach them only through the table, after the CPU
// check, so no other code runs these instructions.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/kernels.h"

#if defined(__x86_64__)
namespace flashattn::detail::cpu::x86 {

// A row pair's VNNI order for vpermw over [row r | row r + 1] (16 lanes each):
// lane 2k takes element k of row r, lane 2k + 1 element k of row r + 1.
alignas(64) inline constexpr uint16_t kVnniInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                             21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                             11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// avx512.cpp (AVX-512 F/BW/VL/DQ)
void gemm_f32_avx512(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                     int64_t ldb, float* C, int64_t ldc, bool accumulate);
float row_max_avx512(const float* x, int64_t n);
float exp_sum_avx512(float* x, int64_t n, float scale, float m);
void exp_sub_vec_avx512(float* x, const float* m, int64_t n);
void scale_row_avx512(float* x, int64_t n, float a);
void softmax_grad_vec_avx512(const float* p, float* dp, const float* d, int64_t n, float scale);
float dot_avx512(const float* x, const float* y, int64_t n);
bool finite_f32_avx512(const float* x, int64_t ldx, int64_t rows, int64_t cols);
bool bf16_vnni_avx512(const uint16_t* x, int64_t ldx, int64_t rows, int64_t rows_p, int64_t cols, int64_t cols_p,
                      uint16_t* y);
bool f16_to_f32_avx512(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y, int64_t ldy);
bool bf16_to_f32_avx512(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y, int64_t ldy);

// bf16_avx512.cpp (AVX512-BF16)
void gemm_bf16_avx512(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                      const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate);
void to_bf16_avx512(const float* x, uint16_t* y, int64_t n, int64_t n_pad);
void to_bf16_vnni_avx512(const float* x, int64_t ldx, int64_t rows, int64_t rows_p, int64_t cols_p,
                         uint16_t* y);
float exp_sum_bf16_avx512(float* x, int64_t n, float scale, float m, uint16_t* y, int64_t n_pad, bool keep);
void bwd_tile_bf16_avx512(const BwdTileBf16& t);
void to_bf16_split_avx512(const float* x, uint16_t* hi, uint16_t* lo, int64_t n, int64_t n_pad);
float exp_sum_split_avx512(float* x, int64_t n, float scale, float m, uint16_t* hi, uint16_t* lo,
                           int64_t n_pad, bool keep);

// amx.cpp (AMX-TILE, AMX-BF16)
void gemm_bf16_amx(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                   const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate);
void amx_thread_begin();
void amx_thread_end();

}  // namespace flashattn::detail::cpu::x86
#endif
