// Eigen's side of bench/cpu/microkernels.cpp, in its own file so only it is
// compiled for AVX-512 (Eigen picks its vector width at compile time).
#pragma once

#include <cstdint>
#include <string>

// C[M][N] (+)= A[M][K] B[K][N], all row-major and contiguous.
void eigen_gemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool accumulate);
std::string eigen_version();
