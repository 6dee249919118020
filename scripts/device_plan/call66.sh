#!/usr/bin/env bash
# Session 49, for an H200 with little device time left: call63.sh's rotated, capped and rotated
# grids of main's kernels (v.tar.xz), the targets checked at the end. About 3 minutes.
# run(command="bash .devc/call66.sh 2>&1 | tee $OUT/call66.log", carry=[".devc"], timeout_s=230).
cd "$(dirname "$0")/.."
CAP=${CAP:-215} GRIDS="rotate1 capped rotate2" exec bash .devc/call63.sh
