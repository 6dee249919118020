#!/usr/bin/env bash
# A planned device call (session 41): the bf16 forward and backward suites on the decoding
# path after the review fixes (d), whose short-query cases run through it.
# run(command="bash .devc/call27.sh 2>&1 | tee $OUT/call27.log", carry=[".devc"]), about 3 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/d ] || python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
tst suites 170 8 .dev/d/flashattn_tests --gtest_filter='*CudaForward*:*CudaBackward*:*CudaDeterministic*-*_f16_*'
pack
echo "all done at $((SECONDS - start)) s"
