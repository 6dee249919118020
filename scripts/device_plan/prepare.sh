#!/usr/bin/env bash
# Builds here what the planned device calls (call1.sh, call2.sh beside this file) carry,
# packed into .devc/ (git-ignored through .git/info/exclude; name it in the call's
# `carry`): a bf16 sm_90a build of main (a) and the sm90 backward v33 variants (b, c: hd256
# with FLASHATTN_SM90_BWD_ATOMIC_DQ=1 / 2; d, e: hd64 + hd128 with =3 / =4), their test
# binaries and benchmark shims xz-packed together (~4 MiB: the variants differ in one or
# two units); and for the CPU host the CLI of main and of main with the bf16 17-64-row
# decoding shapes sent back to the tiled AMX forward (pre_v17.patch, as before v17).
# About 12 minutes on 2 cores with a cold ccache.
# Usage: bash scripts/device_plan/prepare.sh [BUILD_DIR (default build-sm90)]
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/device_plan
build=${1:-build-sm90}
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
grep -qx '/.devc/' .git/info/exclude 2>/dev/null || echo '/.devc/' >> .git/info/exclude
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DFLASHATTN_SM80_COMPACT_ARCHITECTURES=90a-real -DFLASHATTN_SM80_LARGE_ARCHITECTURES=90a-real \
  -DFLASHATTN_CUDA_DTYPES=bf16 -DFLASHATTN_CUDA_HEAD_DIMS="64;96;128;256" > /dev/null
ninja -C "$build" flashattn_tests flashattn_bench_shim
mkdir -p .dev/a .devc/cpu
cp "$build/tests/flashattn_tests" "$build/bench/gpu/libflashattn_bench_shim.so" .dev/a/
u256=sm90/instantiations/bwd_hdim256_bf16_sm90.cu
u=sm90/instantiations/bwd_hdim64_bf16_sm90.cu,sm90/instantiations/bwd_hdim128_bf16_sm90.cu
scripts/variant_build.sh "$build" .dev/b . $u256 -DFLASHATTN_SM90_BWD_ATOMIC_DQ=1
scripts/variant_build.sh "$build" .dev/c . $u256 -DFLASHATTN_SM90_BWD_ATOMIC_DQ=2
scripts/variant_build.sh "$build" .dev/d . $u -DFLASHATTN_SM90_BWD_ATOMIC_DQ=3
scripts/variant_build.sh "$build" .dev/e . $u -DFLASHATTN_SM90_BWD_ATOMIC_DQ=4
(cd .dev && tar -cf - a b c d e | xz -T2 -6 --lzma2=dict=192MiB > ../.devc/bins.tar.xz)
# The CPU CLIs (OpenMP, every ISA level; libfmt travels beside them).
cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHATTN_WITH_CUDA=OFF > /dev/null
ninja -C build-cpu tools/cli/flashattn
cp build-cpu/tools/cli/flashattn .devc/cpu/flashattn
cp "$(ldd build-cpu/tools/cli/flashattn | awk '/libfmt/ {print $3}')" .devc/cpu/
wt=$(mktemp -d)/pre17
git worktree add -q --detach "$wt" HEAD
(cd "$wt" && git apply "$OLDPWD/$here/pre_v17.patch" && export CCACHE_BASEDIR="$wt" &&
  cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHATTN_WITH_CUDA=OFF \
    -DFLASHATTN_BUILD_TESTS=OFF > /dev/null && ninja -C build-cpu tools/cli/flashattn)
cp "$wt/build-cpu/tools/cli/flashattn" .devc/cpu/flashattn_pre17
git worktree remove --force "$wt"
cp $here/lib.sh $here/call1.sh $here/call2.sh .devc/
du -sh .devc
