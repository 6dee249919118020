#!/usr/bin/env bash
# The Python package's tests with the frameworks present, on CPU arrays: PyTorch
# (autograd, torch.compile with the aot_eager backend, the flash_attn-compatible
# functions), the transformers example and JAX, beside the oldest PyTorch
# pyproject.toml accepts (2.4.1), transformers 4.56.2 and JAX 0.4.38, installed into
# build/frameworks-site. Run after scripts/test.sh (it uses that build's
# build/python/site); CI runs it (.ci/run). The GPU machine runs the newest
# PyTorch. A machine that cannot install them skips the check, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
site=build/frameworks-site
version=2.4.1
hf_version=4.56.2
jax_version=0.4.38
if ! PYTHONPATH="$site" python3 -c "import torch, transformers, jax, sys; sys.exit((torch.__version__.split('+')[0], transformers.__version__, jax.__version__) != ('$version', '$hf_version', '$jax_version'))" 2>/dev/null; then
  echo "frameworks_check: installing torch $version, transformers $hf_version and jax $jax_version into $site"
  # pip's notes on other installed packages filtered out; the import below checks it.
  { python3 -m pip install --quiet --upgrade --target "$site" "torch==$version" "transformers==$hf_version" "jax[cpu]==$jax_version" 2>&1 |
      grep -v -e "dependency resolver" -e "requires .* but you have" -e "Running pip as the 'root'"; } || true
  if ! PYTHONPATH="$site" python3 -c "import torch, transformers, jax" 2>/dev/null; then
    echo "frameworks_check: SKIPPED, torch / transformers / jax could not be installed"
    exit 0
  fi
fi
PYTHONPATH="$PWD/build/python/site:$PWD/$site" python3 -m pytest -q -p no:cacheprovider tests/python_pkg \
  --ignore=tests/python_pkg/gpu
