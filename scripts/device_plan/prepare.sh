#!/usr/bin/env bash
# Builds here what the next planned device call carries, packed into .devc/ (git-ignored
# through .git/info/exclude; name it in the call's `carry`): d, main as it is by default
# (bf16 sm_90a, head dims 64, 128, 192, 256: the Hopper kernels, the sm80 ones and the
# decoding path), its test binary and benchmark shim (.devc/d.tar.xz). Then call23.sh (the
# decoding checks and benchmark, then the contract's grid twice: issue 5 / 6's H200 figures)
# runs from .devc/. Earlier calls (call1.sh - call22.sh) read builds this script no longer
# makes (f, g, g2, k2, kv, h) and stay as the record of those runs.
# About 25 minutes on 2 cores with a cold compiler cache, a few with a warm one.
# Usage: bash scripts/device_plan/prepare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/device_plan
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
grep -qx '/.devc/' .git/info/exclude 2>/dev/null || echo '/.devc/' >> .git/info/exclude
mkdir -p .dev .devc
# whole BUILD_DIR VARIANT CMAKE_FLAGS...: a bf16 sm_90a build's tests and benchmark shim
# into .dev/VARIANT.
whole() {
  local dir=$1 name=$2; shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
    -DFLASHATTN_SM80_COMPACT_ARCHITECTURES=90a-real -DFLASHATTN_SM80_LARGE_ARCHITECTURES=90a-real \
    -DFLASHATTN_CUDA_DTYPES=bf16 "$@" > /dev/null
  ninja -C "$dir" flashattn_tests flashattn_bench_shim
  rm -rf ".dev/$name" && mkdir -p ".dev/$name"
  cp "$dir/tests/flashattn_tests" "$dir/bench/gpu/libflashattn_bench_shim.so" ".dev/$name/"
}
build=build-sm90-f
whole $build d -DFLASHATTN_CUDA_HEAD_DIMS="64;128;192;256" -DFLASHATTN_SM90_BWD_DQ_APART=ON
(cd .dev && tar -cf - d | xz -T2 -6 > ../.devc/d.tar.xz)
cp $here/lib.sh $here/call23.sh $here/call29.sh $here/call35.sh .devc/
du -sh .devc
