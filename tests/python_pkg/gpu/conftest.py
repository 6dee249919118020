"""GPU tests of the Python package: skipped unless PyTorch sees a CUDA device and this
flashattn build has the CUDA backend (run them with run_gpu_tests.sh on the H200)."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with PyTorch
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # fa_check, torch_ref

from fa_check import SEED, rng_for  # noqa: E402


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    items = [i for i in items if HERE in Path(str(i.fspath)).resolve().parents]  # the hook sees every test
    if not items:
        return
    reason = None
    try:
        import torch
        import flashattn
        if not torch.cuda.is_available():
            reason = "no CUDA device visible to PyTorch"
        elif not flashattn.cuda_available():
            reason = "this flashattn build has no CUDA backend (see run_gpu_tests.sh)"
    except ImportError as e:
        reason = f"needs PyTorch: {e}"
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_report_header(config):
    return f"flashattn test seed: {SEED} (pin with FLASHATTN_TEST_SEED)"


@pytest.fixture
def rng(request):
    return rng_for(request.node.nodeid)


@pytest.fixture(autouse=True)
def _seed_torch(rng):
    """torch.randn_like & co. follow the test seed too."""
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(int(rng.integers(1 << 62)))
