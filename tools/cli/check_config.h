// Random configurations for `flashattn check`: every feature of the contract,
// drawn so that a default run covers them all many times over in about a minute.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <flashattn/types.h>

namespace facli {

struct CheckConfig {
  flashattn::DType dtype = flashattn::DType::f32;
  bool packed = false;
  int64_t batch = 1;
  std::vector<int64_t> len_q, len_k;  // per sequence (batched: all equal)
  int64_t heads_q = 1, heads_kv = 1, dqk = 8, dv = 8;
  std::optional<float> scale;
  float q_sigma = 1.f;  // > 1 for large scores
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.f;
  int alibi = 0;  // 0: none, 1: [Hq], 2: [B, Hq]
  float dropout = 0.f;
  uint64_t seed = 0, offset = 0;
  bool backward = false;
  bool deterministic = false;

  // Batched: the common lengths; packed: the longest (max_seqlen).
  int64_t seqlen_q() const;
  int64_t seqlen_k() const;
  int64_t total_q() const;
  int64_t total_k() const;
  // First row of sequence b in the [B*S] or [total] row space.
  int64_t q_row0(int64_t b) const;
  int64_t k_row0(int64_t b) const;
  // The mask's right side with causal folded in.
  int64_t effective_right() const;
  float effective_scale() const;

  std::string describe() const;
};

// What random_config may draw. any: every dtype and head dim (the CPU backends).
// cuda: fp16/bf16, head dims multiples of 8 up to 256 (every kernel size, the
// odd ones that pad up to the next, Dv != Dqk), the rest as for any.
enum class ConfigSpace { any, cuda };

CheckConfig random_config(std::mt19937_64& rng, int64_t max_seqlen,
                          ConfigSpace space = ConfigSpace::any);

}  // namespace facli
