#!/usr/bin/env bash
# Session 49: call63 (the timing methods, main's kernels) first, then, in what is left of the
# call, call64 (the CPU backward's prefetch on the 16-core host, ~90 s).
# run(command="bash .devc/call65.sh 2>&1 | tee $OUT/call65.log", carry=[".devc"], timeout_s=595).
cd "$(dirname "$0")/.."
t0=$SECONDS
CAP=${CAP:-470} bash .devc/call63.sh
(( SECONDS - t0 < 490 )) && timeout $((585 - (SECONDS - t0))) bash .devc/call64.sh
