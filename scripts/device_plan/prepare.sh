#!/usr/bin/env bash
# Builds here what the planned device calls carry, packed into .devc/ (git-ignored through
# .git/info/exclude; name it in the call's `carry`):
#   .devc/v.tar.xz   main's bf16 sm_90a build (head dims 64, 128, 256: the Hopper kernels, the
#                    sm80 ones and the decoding path): its test binary and benchmark shim;
#   .devc/cpu.tar.xz main's CPU-only CLI, flashattn_tile_scaling and libfmt;
# and copies the scripts that read them (lib.sh, call63.sh, call66.sh, call72.sh, call73.sh).
# Then, for example: run(command="bash .devc/call72.sh 2>&1 | tee $OUT/call72.log",
# carry=[".devc"], timeout_s=420) (main's grids three ways, the host's CPU scaling).
# About 15 minutes on 2 cores with a cold compiler cache (ccache from Debian), 1-2 with a warm
# one. Earlier calls' builds (d, f, g, k2, kv, h, m, u, w, x, y) were made by hand from branches;
# their scripts stay as the record of those runs.
# PACK=NAME packs the GPU build as .devc/NAME.tar.xz (default v) and GPU_ONLY=1 skips the CPU
# build (prepare77.sh: a branch's variants beside main's v). HEAD_DIMS (default "64;128;256") and
# BUILD_DIR (default build-sm90-f) build other head dims in a folder of their own (call89's o:
# HEAD_DIMS="96;192" BUILD_DIR=build-sm90-o PACK=o GPU_ONLY=1).
# Usage: [PACK=v] [GPU_ONLY=1] bash scripts/device_plan/prepare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/device_plan
command -v ccache > /dev/null || apt-get install -y ccache > /dev/null
bash scripts/setup.sh > /dev/null
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
mkdir -p .git/info
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
grep -qx '/.devc/' .git/info/exclude 2>/dev/null || echo '/.devc/' >> .git/info/exclude
mkdir -p .dev .devc
bdir=${BUILD_DIR:-build-sm90-f}
cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DFLASHATTN_SM80_COMPACT_ARCHITECTURES=90a-real -DFLASHATTN_SM80_LARGE_ARCHITECTURES=90a-real \
  -DFLASHATTN_CUDA_DTYPES=bf16 -DFLASHATTN_CUDA_HEAD_DIMS="${HEAD_DIMS:-64;128;256}" > /dev/null
ninja -C "$bdir" flashattn_tests flashattn_bench_shim
pack=${PACK:-v}
rm -rf ".dev/$pack" && mkdir -p ".dev/$pack"
cp "$bdir/tests/flashattn_tests" "$bdir/bench/gpu/libflashattn_bench_shim.so" ".dev/$pack/"
(cd .dev && tar -cf - "$pack" | xz -T2 -6 > "../.devc/$pack.tar.xz")
[ "${GPU_ONLY:-0}" = 1 ] && exit 0
cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHATTN_WITH_CUDA=OFF -DFLASHATTN_BUILD_TESTS=OFF > /dev/null
ninja -C build-cpu flashattn_cli flashattn_tile_scaling
rm -rf .dev/cpu && mkdir -p .dev/cpu
cp build-cpu/tools/cli/flashattn build-cpu/bench/cpu/flashattn_tile_scaling .dev/cpu/
cp -L "$(ldd build-cpu/tools/cli/flashattn | grep -o '/[^ ]*libfmt[^ ]*')" .dev/cpu/
(cd .dev && tar -cf - cpu | xz -T2 -6 > ../.devc/cpu.tar.xz)
cp $here/lib.sh $here/call63.sh $here/call66.sh $here/call72.sh $here/call73.sh $here/call79.sh $here/call80.sh .devc/
du -sh .devc
