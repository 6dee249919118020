#!/usr/bin/env bash
# The Python package's tests with PyTorch present (autograd, torch.compile with the
# aot_eager backend, the flash_attn-compatible functions, on CPU tensors), against
# the oldest release pyproject.toml accepts, torch 2.4.1, installed into
# build/torch-site. Run after scripts/test.sh (it uses that build's
# build/python/site); CI runs it (.ci/run). The GPU machine runs the newest.
# A machine that cannot install torch skips the check, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
site=build/torch-site
version=2.4.1
if ! PYTHONPATH="$site" python3 -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" 2>/dev/null; then
  echo "torch_check: installing torch $version into $site"
  # pip's notes on other installed packages filtered out; the import below checks it.
  { python3 -m pip install --quiet --upgrade --target "$site" "torch==$version" 2>&1 |
      grep -v -e "dependency resolver" -e "requires .* but you have" -e "Running pip as the 'root'"; } || true
  if ! PYTHONPATH="$site" python3 -c "import torch" 2>/dev/null; then
    echo "torch_check: SKIPPED, torch $version could not be installed"
    exit 0
  fi
fi
PYTHONPATH="$PWD/build/python/site:$PWD/$site" python3 -m pytest -q -p no:cacheprovider tests/python_pkg \
  --ignore=tests/python_pkg/gpu
