// Float32 building blocks of the CPU flash backend: the tile products and the
// vectorised row operations of the online softmax. Compiled once per x86-64 level
// (AVX-512, AVX2, baseline) and picked at load time, so one binary runs anywhere.
#pragma once

#include <cstdint>

namespace flashattn::detail::cpu {

// C[M][N] (+)= op(A)[M][K] * B[K][N], row-major with leading dimensions.
// op(A) is A[M][K] (gemm_nn) or the transpose of A[K][M] (gemm_tn).
void gemm_nn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float* C, int64_t ldc, bool accumulate);
void gemm_tn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float* C, int64_t ldc, bool accumulate);

// Accumulating C += op(A) B that skips zero coefficients of A: the path for
// tiles holding NaN or inf, so masked (zero) probabilities never meet them.
void gemm_nn_skip_zero(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                       const float* B, int64_t ldb, float* C, int64_t ldc);
void gemm_tn_skip_zero(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                       const float* B, int64_t ldb, float* C, int64_t ldc);

// max_j x[j]; NaN if any x[j] is NaN (the row then comes out NaN).
float row_max(const float* x, int64_t n);
// True when no x[j] is NaN or inf.
bool all_finite(const float* x, int64_t n);
// x[j] = exp(x[j] - m); returns the sum. A masked x[j] = -inf gives 0 whatever
// m is (also NaN); a NaN x[j] stays NaN.
float exp_sub_sum(float* x, int64_t n, float m);
// x[j] *= a
void scale_row(float* x, int64_t n, float a);
// dp[j] = p[j] * (dp[j] - d) * scale, and exactly 0 where p[j] is 0
// (the softmax backward of one row)
void softmax_grad_row(const float* p, float* dp, int64_t n, float d, float scale);
// sum_j x[j] * y[j]
float dot(const float* x, const float* y, int64_t n);

}  // namespace flashattn::detail::cpu
