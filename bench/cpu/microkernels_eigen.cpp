#include "microkernels_eigen.h"

#include <Eigen/Core>

namespace {
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}

void eigen_gemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool accumulate) {
  const Eigen::Map<const RowMajor> a(A, M, K), b(B, K, N);
  Eigen::Map<RowMajor> c(C, M, N);
  if (accumulate) c.noalias() += a * b;
  else c.noalias() = a * b;
}

std::string eigen_version() {
  return std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION);
}
