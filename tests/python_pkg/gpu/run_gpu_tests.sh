#!/usr/bin/env bash
# The GPU half of the Python package's tests, for the H200 machine (no network): builds and
# installs the package with the CUDA backend from this checkout with the preinstalled
# scikit-build-core and nanobind, then runs tests/python_pkg/gpu (PyTorch autograd vs float64,
# torch.compile with Inductor, CUDA-graph capture, CuPy and JAX through DLPack), the CPU
# tests, the calling-overhead benchmark and the transformers example.
#
# Usage (repository root; third_party/cutlass must be present, i.e. carried):
#   bash tests/python_pkg/gpu/run_gpu_tests.sh [OUT_DIR]
# FLASHATTN_CUDA_HEAD_DIMS (default "64;128": what the tests use) and CMAKE_CUDA_ARCHITECTURES
# (default 90a-real) narrow the kernel build; FLASHATTN_SKIP_BUILD=1 reuses build/python/gpu-site
# from an earlier call on the same (still warm) machine.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-${OUT:-/tmp/flashattn_gpu}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
py=${PYTHON:-python3}
site=$PWD/build/python/gpu-site
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
status=0

if [ "${FLASHATTN_SKIP_BUILD:-0}" != 1 ]; then
  echo "== build and install (CUDA, head dims ${FLASHATTN_CUDA_HEAD_DIMS:-64;128})"
  start=$(date +%s)
  # Into a folder of the checkout (the machine's environment may be read-only), first on PYTHONPATH.
  if ! "$py" -m pip install --no-build-isolation --no-deps --no-index --upgrade -v --target "$site" . \
      --config-settings=cmake.define.FLASHATTN_WITH_CUDA=ON \
      "--config-settings=cmake.define.FLASHATTN_CUDA_HEAD_DIMS=${FLASHATTN_CUDA_HEAD_DIMS:-64;128}" \
      "--config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90a-real}" \
      > "$out/build.log" 2>&1; then
    tail -40 "$out/build.log"
    echo "build failed (full log: $out/build.log)"
    exit 1
  fi
  echo "built in $(( $(date +%s) - start )) s"
fi
"$py" -c "import flashattn, torch; print('flashattn', flashattn.__version__, 'cuda_available', flashattn.cuda_available(), '| torch', torch.__version__, torch.cuda.get_device_name())" || exit 1

echo "== GPU tests"
"$py" -m pytest -q -p no:cacheprovider -rs tests/python_pkg/gpu --junitxml="$out/pytest_gpu.xml" 2>&1 | tee "$out/pytest_gpu.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== CPU tests (same machine)"
"$py" -m pytest -q -p no:cacheprovider tests/python_pkg --ignore=tests/python_pkg/gpu 2>&1 | tee "$out/pytest_cpu.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== calling overhead (B=1, H=1, N=16, D=64, bf16)"
"$py" tests/python_pkg/gpu/bench_overhead.py --json "$out/overhead.json" 2>&1 | tee "$out/overhead.log"

echo "== transformers example"
"$py" examples/hf_llama_attention.py --device cuda 2>&1 | tee "$out/hf_llama.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== done: exit $status (logs in $out)"
exit $status
