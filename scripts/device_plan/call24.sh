#!/usr/bin/env bash
# A planned device call (session 41): the decoding path beyond bf16 and C++ - fp16 tests
# (h: an fp16, head dim 128 build for sm_90 without the Hopper kernels: the decoding path
# and the sm80 kernels), the Python package built here with the CUDA backend and its GPU
# tests (flash_attn_with_kvcache now decodes on the new path), and Nsight Compute's view
# of the decoding kernel at 1 x 32768 and 64 x 16384 beside cuDNN's; 4 against 8 warps a
# block (FLASHATTN_CUDA_DECODE_WARPS), and the tests with 8.
# Carries .devc/{h.tar.xz, d.tar.xz, cutlass.tar.xz, lib.sh}.
# run(command="bash .devc/call24.sh 2>&1 | tee $OUT/call24.log", carry=[".devc"]), about 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
mkdir -p .dev third_party
for v in d h; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
[ -d third_party/cutlass ] || tar -xJf .devc/cutlass.tar.xz -C third_party
nvidia-smi --query-gpu=name --format=csv,noheader
site=/tmp/pysite_gpu
( CMAKE_BUILD_PARALLEL_LEVEL=14 timeout 300 python3 -m pip install --quiet --no-build-isolation --no-deps --no-index \
    --target $site . --config-settings=cmake.define.FLASHATTN_WITH_CUDA=ON \
    "--config-settings=cmake.define.FLASHATTN_CUDA_HEAD_DIMS=64;128" \
    --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real > $logs/pip.log 2>&1
  echo "pip exit $? at $((SECONDS - start)) s" >> $logs/pip.log ) &
pip_pid=$!
T=.dev/h/flashattn_tests
tst fp16 150 2 $T --gtest_filter='*CudaDecode*:*CudaKvCache*:*CudaForward*Masks*_f16_*-*_bf16_*'
tst fp16_memcheck 150 2 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*CudaDecode.*-*_bf16_*' --gtest_brief=1
echo "fp16 done at $((SECONDS - start)) s"
cat > /tmp/one_call.py <<'PY'
import sys, torch
sys.path.insert(0, "bench/gpu")
from bench_gpu import Flashattn
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F
b, sk = (int(x) for x in sys.argv[2].split("x"))
q = torch.randn(b, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(b, 8, sk, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn_like(k)
out = torch.empty_like(q)
fa = Flashattn(sys.argv[1])
for _ in range(3):
    fa.forward(q, k, v, out)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
torch.cuda.synchronize()
PY
for shape in 1x32768 64x16384; do
  for who in ours peer; do
    k="regex:decode_kernel"; [ $who = peer ] && k="regex:cudnn|fmha|sdpa"
    timeout 100 ncu --clock-control none -k "$k" --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
      python3 /tmp/one_call.py .dev/d/libflashattn_bench_shim.so $shape > $OUT/ncu_decode_${who}_$shape.txt 2>&1
    echo "== $who $shape"
    grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|L2 Hit|Mem Busy|Max Bandwidth|Warp Cycles Per Issued" \
      $OUT/ncu_decode_${who}_$shape.txt | head -16
  done
done
echo "ncu done at $((SECONDS - start)) s"
for w in 4 8; do
  echo "== warps $w"
  FLASHATTN_CUDA_DECODE_WARPS=$w timeout 60 python3 bench/gpu/bench_decode.py --shim .dev/d/libflashattn_bench_shim.so \
    --sq 1 --no-tiled --json $OUT/decode_warps$w.json 2>&1 | tail -4
done
FLASHATTN_CUDA_DECODE_WARPS=8 tst warps8 150 4 .dev/d/flashattn_tests --gtest_filter='*CudaDecode*:*CudaKvCache*-*_f16_*'
echo "warps done at $((SECONDS - start)) s"
wait $pip_pid; tail -3 $logs/pip.log
PYTHONPATH=$site timeout 200 python3 -m pytest -q -p no:cacheprovider tests/python_pkg/gpu -x 2>&1 | tail -15
pack
echo "all done at $((SECONDS - start)) s"
