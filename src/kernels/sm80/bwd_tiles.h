// The sm80 backward's tiles as the kernels run them: tiles.h's table, with the
// large tier's Q/dO stage count on top.
//
// The rule lives here rather than in tiles.h because every sm80 forward file
// includes tiles.h (through traits.h): an edit there recompiles those 12 files
// as well as the backward's, more than CI's 45 minutes hold beside a backward
// change. Fold it into bwd_tile_config when the forward files change anyway.
#pragma once

#include "kernels/sm80/tiles.h"

namespace flashattn::sm80 {

// large (227 KiB, H100 / H200): hd128 takes three stages (194 KiB) where
// tiles.h has two, each stage issued two steps ahead of its use. With one step
// its copies landed late, queued behind the previous step's dQ atomics
// (kernel notes, sm80 backward v11 / v14).
constexpr int bwd_stages_q(int head_dim, SmemTier tier) {
  return tier == SmemTier::large && head_dim > 96 && head_dim <= 128 ? 3 : bwd_tile_config(head_dim, tier).stages_q;
}
constexpr BwdTileConfig bwd_tiles(int head_dim, SmemTier tier = SmemTier::standard) {
  BwdTileConfig c = bwd_tile_config(head_dim, tier);
  c.stages_q = bwd_stages_q(head_dim, tier);
  return c;
}
// Whether a tier has backward kernels of its own (an instantiation file each:
// scripts/gen_instantiations.py); otherwise it runs the standard ones. This,
// not tiles.h's bwd_tier_differs, is what dispatch and the launches read.
constexpr bool bwd_tiles_differ(int head_dim, SmemTier tier) {
  return !(bwd_tiles(head_dim, tier) == bwd_tiles(head_dim));
}

}  // namespace flashattn::sm80
