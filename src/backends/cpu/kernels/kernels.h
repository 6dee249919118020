// The CPU flash backend's tile products and row operations, one implementation
// per instruction-set level (isa.h), gathered in a table of function pointers so
// the forward and backward loops are written once.
//
// Operand layouts of the products (C, A row-major with leading dimensions):
//   fp32: C[M][N] (+)= A[M][K] B[K][N], B row-major with leading dimension ldb.
//   bf16: C[M][N] (+)= A[M][K] B[K][N], A bf16 row-major, B in "VNNI" panels of
//         16 columns: panel p starts at B + p * ldb and holds [K/2][16][2] (each
//         16-column row pair interleaved), the layout both AMX tiles and
//         vdpbf16ps read. M, N and K are multiples of 32; C and accumulation fp32.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/isa.h"

namespace flashattn::detail::cpu {

// The bf16 products' shapes are multiples of this (AMX tiles are 16 x 32 bf16;
// two of them per dimension make one register block).
constexpr int64_t kBf16Block = 32;

// One (key tile, query tile) pair of the bf16 backward, transposed: row j is
// key j, column i query i, leading dimension ld, `rows` keys (rows_p, a
// multiple of 32, with padding) and n queries (n_pad, a multiple of 32).
struct BwdTileBf16 {
  float* s;   // scores; with keep, P on return
  float* dp;  // dP; with keep, dS on return
  int64_t ld, rows, rows_p, n, n_pad;
  const float* m;  // per query: LSE (+inf for a query that saw no key)
  const float* d;  // per query: dO . O
  float scale;     // applied to s before m is subtracted (1 when s is scaled)
  float scale_ds;  // the softmax scale, folded into dS
  uint16_t* pa;    // P rounded to bf16, row-major, leading dimension ld
  uint16_t* da;    // dS rounded to bf16, row-major, leading dimension ld
  uint16_t* db;    // dS rounded to bf16 in to_bf16_vnni's panels (rows_p rows)
  bool keep;       // also write P and dS back in fp32
  // The fp16 split backward (isa.h): P's and dS's low halves beside pa and da,
  // dS's high half with non-finite values zeroed (da_f, against Q's low half),
  // and db in three segments of rows_p rows per panel, [dS hi; dS lo; dS hf]:
  // an inf meets only the other operand's high half (inf * 0 would be NaN).
  uint16_t* pa_lo = nullptr;
  uint16_t* da_lo = nullptr;
  uint16_t* da_f = nullptr;
};

struct Kernels {
  Isa isa;
  void (*gemm_f32)(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                   int64_t ldb, float* C, int64_t ldc, bool accumulate);
  // Null where the level has no bf16 products (bf16 inputs are then widened).
  void (*gemm_bf16)(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                    const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate);
  // Each thread calls these around its bf16 products (AMX: tile configuration
  // and release); null when there is nothing to do.
  void (*thread_begin)();
  void (*thread_end)();

  // max_j x[j] (NaN when any x[j] is NaN).
  float (*row_max)(const float* x, int64_t n);
  // x[j] = exp(scale * x[j] - m), exactly 0 for x[j] = -inf (whatever m is);
  // returns the sum.
  float (*exp_sum)(float* x, int64_t n, float scale, float m);
  // x[j] = exp(x[j] - m[j]), exactly 0 for x[j] = -inf: a column of the
  // transposed tile, where every query has its own LSE.
  void (*exp_sub_vec)(float* x, const float* m, int64_t n);
  // x[j] *= a
  void (*scale_row)(float* x, int64_t n, float a);
  // dp[j] = p[j] * (dp[j] - d[j]) * scale, exactly 0 where p[j] is 0.
  void (*softmax_grad_vec)(const float* p, float* dp, const float* d, int64_t n, float scale);
  // sum_j x[j] y[j]
  float (*dot)(const float* x, const float* y, int64_t n);
  // y[j] = bf16(x[j]) rounded to nearest even, for j < n; y[j] = 0 for n <= j < n_pad.
  void (*to_bf16)(const float* x, uint16_t* y, int64_t n, int64_t n_pad);
  // x (rows x cols_p, leading dimension ldx) rounded to bf16 as a B operand:
  // VNNI panels of 16 columns, panel p at y + p * rows_p * 16; rows past `rows`
  // (up to rows_p, even) are zero. cols_p is a multiple of 16.
  void (*to_bf16_vnni)(const float* x, int64_t ldx, int64_t rows, int64_t rows_p, int64_t cols_p,
                       uint16_t* y);
  // exp_sum and to_bf16 in one pass for the bf16 pipeline: y[j] = bf16(exp(scale
  // * x[j] - m)) (0 for x[j] = -inf; 0 for n <= j < n_pad); returns the fp32 sum.
  // x is untouched unless keep, which also stores the fp32 exp there (the very
  // values rounded: a tile's P does not depend on whether its V is finite). A
  // few ulp of fp32 (bf16 keeps 8 bits). Null where absent.
  float (*exp_sum_bf16)(float* x, int64_t n, float scale, float m, uint16_t* y, int64_t n_pad, bool keep);
  // Whether x (rows x cols, leading dimension ldx) holds no NaN and no inf.
  bool (*finite_f32)(const float* x, int64_t ldx, int64_t rows, int64_t cols);
  // bf16 rows x (rows x cols, leading dimension ldx) moved unchanged into the
  // VNNI panels of to_bf16_vnni (zero past `rows` up to rows_p, even, and past
  // `cols` up to cols_p, a multiple of 16); returns whether every element of x
  // is finite. One pass over x for the decoding path's V tiles.
  bool (*bf16_vnni)(const uint16_t* x, int64_t ldx, int64_t rows, int64_t rows_p, int64_t cols, int64_t cols_p,
                    uint16_t* y);
  // fp16 rows x (rows x cols, leading dimension ldx) widened to fp32 in y
  // (leading dimension ldy), exactly; returns whether every element is finite.
  bool (*f16_to_f32)(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y, int64_t ldy);
  // The same for bf16 rows (the decoding path's fp32 form of bf16, decode.cpp).
  bool (*bf16_to_f32)(const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols, float* y, int64_t ldy);
  // The bf16 backward's element-wise work of a tile pair in one pass (instead
  // of exp_sub_vec, softmax_grad_vec, two to_bf16 and to_bf16_vnni):
  // p = exp(scale s - m) (0 where that is -inf), ds = p (dp - d) scale_ds (0
  // where p is 0), both zero past n and ds zero past `rows` in db. exp to a
  // few fp32 ulp (the operands keep 8 bits). Null where absent.
  void (*bwd_tile_bf16)(const BwdTileBf16& t);
  // fp32 x split into bf16 hi = bf16(x) and lo = bf16(x - hi) (lo = 0 where hi
  // is not finite), zero for n <= j < n_pad: hi + lo carries 16 bits of x. The
  // fp16 split forward's probabilities (isa.h). Null where absent.
  void (*to_bf16_split)(const float* x, uint16_t* hi, uint16_t* lo, int64_t n, int64_t n_pad);
  // exp_sum_bf16 with to_bf16_split's pair: hi + lo = exp(scale x[j] - m) to 16
  // bits; keep as there. Null where absent.
  float (*exp_sum_split)(float* x, int64_t n, float scale, float m, uint16_t* hi, uint16_t* lo, int64_t n_pad,
                         bool keep);
};

// The table of a level (clamped to what the CPU supports).
const Kernels& kernels(Isa isa);
// The table of active_isa().
inline const Kernels& active_kernels() { return kernels(active_isa()); }

// Per-level tables, defined in their own files; the x86 ones only on x86-64.
const Kernels& portable_kernels();
#if defined(__x86_64__)
const Kernels& avx512_kernels();
const Kernels& avx512_bf16_kernels();
const Kernels& amx_kernels();
#endif

}  // namespace flashattn::detail::cpu
