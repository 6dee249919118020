#!/usr/bin/env bash
# A variant of a build for an A/B on the GPU machine, without a second full build:
# the named kernel instantiations are compiled again (from another source tree, a
# git worktree of a branch, and/or with extra nvcc flags), swapped into BUILD_DIR's
# libflashattn.a, and the benchmark shim and the test binary are relinked into
# OUT_DIR (test sources that differ in SRC_TREE are compiled from there).
# BUILD_DIR itself is left as it was.
# Usage: scripts/variant_build.sh BUILD_DIR OUT_DIR SRC_TREE UNIT[,UNIT..] [NVCC_FLAGS..]
#   UNIT: an instantiation under src/kernels, e.g. sm90/instantiations/fwd_hdim128_bf16_sm90.cu
#   SRC_TREE: the checkout to compile from (. for this one)
# e.g. git worktree add /tmp/v17 some-branch
#      scripts/variant_build.sh build .dev/b /tmp/v17 sm90/instantiations/fwd_hdim128_bf16_sm90.cu -DSOME_SWITCH=1
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
out=$(realpath -m "$2")
tree=$(cd "$3" && pwd)
IFS=, read -r -a units <<< "$4"
shift 4
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The build's own compile command for a target, made to read SRC_TREE and write into $work.
command_for() {  # command_for TARGET OBJECT
  ninja -C "$build" -t commands "$1" | tail -1 |
    sed -e 's#^[^ ]*ccache ##' -e 's# -MD -MT [^ ]* -MF [^ ]*##' -e "s# -o $1# -o $2#" \
        -e "s#-I$root/\(src\|include\|tests\) #-I$tree/\1 #g" -e "s# $root/\(src\|tests\)/# $tree/\1/#g"
}
cp "$build/src/libflashattn.a" "$work/lib.a"
for u in "${units[@]}"; do
  obj=$(basename "$u").o  # the archive's member name
  echo "compiling $u from $tree $*"
  (cd "$build" && eval "$(command_for "src/CMakeFiles/flashattn.dir/kernels/$u.o" "$work/$obj") $*")
  (cd "$work" && ar r lib.a "$obj")
done
# Relink, with the library swapped and test objects rebuilt where their source differs.
link_for() {  # link_for TARGET OUTPUT
  local cmd o src t
  cmd=$(ninja -C "$build" -t commands "$1" | tail -1 | sed -e "s# -o $1 # -o $2 #" -e "s# src/libflashattn.a # $work/lib.a #")
  while read -r o; do
    src=${o#tests/CMakeFiles/flashattn_tests.dir/}
    src=tests/${src%.o}
    if [ -f "$tree/$src" ] && ! cmp -s "$root/$src" "$tree/$src"; then
      echo "compiling $src from $tree"
      t=$work/$(basename "$o")
      (cd "$build" && eval "$(command_for "$o" "$t")")
      cmd=${cmd//" $o "/" $t "}
    fi
  done < <(grep -oE 'tests/CMakeFiles/[^ ]+\.cpp\.o' <<< "$cmd")
  (cd "$build" && eval "$cmd")
}
link_for bench/gpu/libflashattn_bench_shim.so "$out/libflashattn_bench_shim.so"
link_for tests/flashattn_tests "$out/flashattn_tests"
ls -la "$out"
