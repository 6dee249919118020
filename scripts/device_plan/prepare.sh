#!/usr/bin/env bash
# Builds here what the next planned device call carries, packed into .devc/ (git-ignored
# through .git/info/exclude; name it in the call's `carry`):
#   f: main as it is by default (bf16 sm_90a, head dims 64, 128, 192, 256), its test
#      binary and benchmark shim (.devc/f.tar.xz): the baseline, and the shim of the grid;
#   g: f with the dQ-apart key-block kernel's back-to-back issue (v38,
#      -DFLASHATTN_SM90_BWD_APART_B2B=1) in its hd192 / hd256 units (.devc/g.tar.xz);
#   g2: the same with =2 (v39: also the step's LSE / d_i read into registers early);
#   k2: f with the hd128 unit built with -DFLASHATTN_SM90_BWD_ROW_REGS=1 (v40).
# Then call11.sh (v38 / v39), call13.sh (v40) and call12.sh (the grid on f) run from
# .devc/. call1.sh - call10.sh are the calls sessions 36 and 37 ran; they read builds
# this script no longer makes, and stay as the record of those runs.
# About 15 minutes on 2 cores with a cold compiler cache, 4-5 with a warm one.
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
whole $build f -DFLASHATTN_CUDA_HEAD_DIMS="64;128;192;256" -DFLASHATTN_SM90_BWD_DQ_APART=ON
for v in 1 2; do
  out=.dev/g; [ $v = 2 ] && out=.dev/g2
  rm -rf $out
  scripts/variant_build.sh $build $out . \
    sm90/instantiations/bwd_hdim256_bf16_sm90.cu,sm90/instantiations/bwd_hdim192_bf16_sm90.cu -DFLASHATTN_SM90_BWD_APART_B2B=$v
done
rm -rf .dev/k2
scripts/variant_build.sh $build .dev/k2 . sm90/instantiations/bwd_hdim128_bf16_sm90.cu -DFLASHATTN_SM90_BWD_ROW_REGS=1
(cd .dev && for v in f g g2 k2; do tar -cf - $v | xz -T2 -6 > ../.devc/$v.tar.xz; done)
cp $here/lib.sh $here/call11.sh $here/call12.sh $here/call13.sh .devc/
du -sh .devc
