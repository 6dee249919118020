// The case tables: attention problems as data, shared by the test files and
// meant to be run unchanged against every backend (see harness.h: Target).
#pragma once

#include <vector>

#include "harness.h"

namespace fatest {

// Every base case once per dtype (the dtype becomes part of the case id).
std::vector<Case> in_dtypes(const std::vector<Case>& base,
                            const std::vector<DType>& dtypes = {DType::f32, DType::f16, DType::bf16});

std::vector<Case> feature_cases();  // each option and their combinations (all dtypes)
std::vector<Case> length_cases();   // 0, 1, 17, 113, 239, 1023, tile edges, Sq != Sk
std::vector<Case> special_cases();  // scores of magnitude 1000, zero inputs, tiny scores
std::vector<Case> mask_cases();     // causal / window / both, one-sided, Sq != Sk, masked rows
std::vector<Case> varlen_cases();   // packed batches, empty sequences
std::vector<Case> layout_cases();   // non-contiguous and padded inputs and outputs
std::vector<Case> smoke_cases();    // a few of the above, for Backend::automatic
std::vector<Case> kvcache_cases();  // seqused_k: decoding and prefill shapes, batched and packed

// gtest parameter lists: cases x targets.
std::vector<CaseParam> on_cpu(const std::vector<Case>& cases);
std::vector<CaseParam> on_auto(const std::vector<Case>& cases);

}  // namespace fatest
