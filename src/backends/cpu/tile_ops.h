// The portable level of the CPU flash backend's kernels (kernels.h): float32
// tile products and row operations in plain C++, compiled once per x86-64 level
// (AVX-512, AVX2, baseline) and picked at load time. The fallback where the
// intrinsics kernels (kernels/) do not apply, and the only level on other CPUs.
#pragma once

#include <cstdint>

namespace flashattn::detail::cpu {

// C[M][N] (+)= A[M][K] * B[K][N], row-major with leading dimensions.
void gemm_nn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float* C, int64_t ldc, bool accumulate);

// max_j x[j]; NaN if any x[j] is NaN (the row then comes out NaN).
float row_max(const float* x, int64_t n);
// x[j] = exp(scale * x[j] - m); returns the sum. A masked x[j] = -inf gives 0
// whatever m is (also NaN); a NaN x[j] stays NaN.
float exp_sum(float* x, int64_t n, float scale, float m);
// x[j] *= a
void scale_row(float* x, int64_t n, float a);
// sum_j x[j] * y[j]
float dot(const float* x, const float* y, int64_t n);
// The remaining entries of the kernel table (kernels.h says what they do).
void exp_sub_vec(float* x, const float* m, int64_t n);
void softmax_grad_vec(const float* p, float* dp, const float* d, int64_t n, float scale);
void to_bf16(const float* x, uint16_t* y, int64_t n, int64_t n_pad);
void to_bf16_vnni(const float* x, int64_t ldx, int64_t rows, int64_t rows_p, int64_t cols_p,
                  uint16_t* y);

}  // namespace flashattn::detail::cpu
