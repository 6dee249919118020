#!/usr/bin/env bash
# A planned device call (session 41): the whole bf16 GPU suite on the landed decoding path
# (d): the backward suites call the forward for their LSE, which short query rows now get
# from the decoding path; then compute-sanitizer's initcheck on the decoding cases.
# run(command="bash .devc/call25.sh 2>&1 | tee $OUT/call25.log", carry=[".devc"]), about 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/d ] || python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/d/flashattn_tests
tst all 420 8 $T --gtest_filter='*Cuda*:*Sm80*:*Hopper*-*_f16_*:CudaLarge*'
tst initcheck 200 4 compute-sanitizer --tool initcheck --error-exitcode 9 $T --gtest_filter='*CudaDecode.*-*_f16_*' --gtest_brief=1
grep -hE 'ERROR SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/*.log | sort | uniq -c | head -30
pack
echo "all done at $((SECONDS - start)) s"
