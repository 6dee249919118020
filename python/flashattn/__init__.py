"""flashattn: exact attention, computed the FlashAttention way, for any DLPack array.

    import numpy as np, flashattn
    q = np.random.randn(2, 128, 8, 64).astype(np.float32)   # [B, S, H, D]
    out = flashattn.forward(q, q, q, causal=True)

Arrays from NumPy, PyTorch, CuPy and JAX are read in place (no copies); outputs are
allocated with the input's own framework. `flashattn.torch` adds autograd,
torch.compile support and flash_attn-compatible functions. docs/contract.md says
what every argument means.
"""

from . import _C
from ._core import backward, backward_varlen, dropout_mask, forward, forward_varlen

__version__ = _C.__version__


def cuda_available() -> bool:
    """True when this build has the CUDA backend and a CUDA device is visible."""
    return _C.cuda_available()


def built_with_cuda() -> bool:
    """True when the CUDA backend was compiled into this build."""
    return _C.built_with_cuda


__all__ = ["forward", "backward", "forward_varlen", "backward_varlen", "dropout_mask",
           "cuda_available", "built_with_cuda", "__version__"]
