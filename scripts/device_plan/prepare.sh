#!/usr/bin/env bash
# Builds here what the next planned device call (call5.sh beside this file) carries,
# packed into .devc/ (git-ignored through .git/info/exclude; name it in the call's
# `carry`): a bf16 sm_90a build of main as it is by default (a, the baseline) and one with
# the Hopper backward's dQ apart switched on (h, FLASHATTN_SM90_BWD_DQ_APART=ON), their
# test binaries and benchmark shims xz-packed (.devc/bins.tar.xz, .devc/h.tar.xz).
# call6.sh runs call5.sh's checks and then the grid. call1.sh - call4.sh are the calls session 36 ran (v33, the CPU host, v34's two forms);
# they read builds this script no longer makes, and stay as the record of those runs.
# About 15 minutes on 2 cores with a cold ccache, 3-4 with a warm one.
# Usage: bash scripts/device_plan/prepare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/device_plan
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
grep -qx '/.devc/' .git/info/exclude 2>/dev/null || echo '/.devc/' >> .git/info/exclude
mkdir -p .dev .devc
for v in a h; do
  # h also carries hd64 so that call6.sh's grid runs on it alone
  opt=OFF dims="128;192;256"; [ $v = h ] && opt=ON dims="64;128;192;256"
  build=build-sm90-$v
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
    -DFLASHATTN_SM80_COMPACT_ARCHITECTURES=90a-real -DFLASHATTN_SM80_LARGE_ARCHITECTURES=90a-real \
    -DFLASHATTN_CUDA_DTYPES=bf16 -DFLASHATTN_CUDA_HEAD_DIMS="$dims" -DFLASHATTN_SM90_BWD_DQ_APART=$opt > /dev/null
  ninja -C $build flashattn_tests flashattn_bench_shim
  rm -rf .dev/$v && mkdir -p .dev/$v
  cp $build/tests/flashattn_tests $build/bench/gpu/libflashattn_bench_shim.so .dev/$v/
done
(cd .dev && tar -cf - a | xz -T2 -6 > ../.devc/bins.tar.xz && tar -cf - h | xz -T2 -6 > ../.devc/h.tar.xz)
cp $here/lib.sh $here/call5.sh $here/call6.sh $here/call7.sh .devc/
du -sh .devc
