// The backward's walk over a key block's steps, one per (query head of the
// group, visible query tile): the tiles [m_min, m_max) of each head in turn,
// from tile `start` with a wrap, the next head once the walk is back at
// `start`. Counters, where the step index would take a division and a
// remainder by the tile count at every step.
#pragma once

#include "kernels/common/host_device.h"

namespace flashattn::detail {

struct StepWalk {
  int h, m;  // this step's query head and query tile
  int m_min, m_max, start;
  FA_HD StepWalk(int head0, int m_min_, int m_max_, int start_)
      : h(head0), m(start_), m_min(m_min_), m_max(m_max_), start(start_) {}
  FA_HD void next() {
    if (++m == m_max) m = m_min;
    if (m == start) ++h;
  }
};

}  // namespace flashattn::detail
