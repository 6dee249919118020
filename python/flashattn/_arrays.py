"""Arrays of any framework: hand them to _C without copying, allocate outputs like them.

Each framework gets an adapter, found from the array's type without importing anything:
  export(a)             what _C receives (the array itself, a DLPack capsule or a view)
  empty(shape, dt, a)   a new buffer like `a` (same framework and device), dtype `dt`,
                        or "float32"; `dt` None means a's dtype
  finish(buf, a)        the buffer as the framework's array, where `a` is (identity except for JAX)
  stream(a)             the framework's current CUDA stream for `a` (0: default / CPU)
_Adapter holds the defaults of the last two.
"""

from __future__ import annotations

import numpy as np

from ._errors import error


class _Adapter:
    @staticmethod
    def finish(buf, a):
        return buf

    @staticmethod
    def stream(a):
        return 0


class _Numpy(_Adapter):
    @staticmethod
    def export(a):
        if a.dtype.name == "bfloat16":  # ml_dtypes: DLPack cannot carry it, uint16 bits can
            return a.view(np.uint16), True
        if a.dtype == np.uint16:
            raise TypeError("uint16 arrays are not bfloat16; use ml_dtypes.bfloat16")
        return a, False

    @staticmethod
    def empty(shape, dt, a):
        return np.empty(shape, dtype=a.dtype if dt is None else dt)


class _Torch(_Adapter):
    @staticmethod
    def export(t):
        import torch
        # A capsule, not the tensor: __dlpack__ would refuse tensors that require grad,
        # and older releases synchronise with the default stream.
        return torch.utils.dlpack.to_dlpack(t), False

    @staticmethod
    def empty(shape, dt, t):
        import torch
        return torch.empty(shape, dtype=t.dtype if dt is None else getattr(torch, dt), device=t.device)

    @staticmethod
    def stream(t):
        import torch
        return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0


class _Cupy(_Adapter):
    @staticmethod
    def export(a):
        return a, False

    @staticmethod
    def empty(shape, dt, a):
        import cupy
        with cupy.cuda.Device(a.device.id):
            return cupy.empty(shape, dtype=a.dtype if dt is None else dt)

    @staticmethod
    def stream(a):
        import cupy
        return cupy.cuda.get_current_stream().ptr


class _Jax(_Adapter):
    """JAX arrays are immutable: outputs are written into a NumPy (CPU), PyTorch or CuPy
    (GPU) buffer first, then handed to JAX (zero-copy on the GPU through DLPack)."""

    @staticmethod
    def export(a):
        a.block_until_ready()  # _C reads the memory right away
        return a, False

    @staticmethod
    def empty(shape, dt, a):
        dev = next(iter(a.devices()))
        name = a.dtype.name if dt is None else dt
        if dev.platform == "cpu":
            return np.empty(shape, dtype=a.dtype if dt is None else dt)
        try:
            import torch
            return torch.empty(shape, dtype=getattr(torch, name), device=f"cuda:{dev.id}")
        except ImportError:
            import cupy
            with cupy.cuda.Device(dev.id):
                return cupy.empty(shape, dtype=name)

    @staticmethod
    def finish(buf, a):
        import jax
        if isinstance(buf, np.ndarray):
            return jax.device_put(buf, next(iter(a.devices())))
        return jax.dlpack.from_dlpack(buf)


_ADAPTERS = {"numpy": _Numpy, "torch": _Torch, "cupy": _Cupy, "jax": _Jax, "jaxlib": _Jax}


def adapter(a, name):
    """The adapter of `a`'s framework; TypeError naming the argument for anything else."""
    fw = _ADAPTERS.get(type(a).__module__.partition(".")[0])
    if fw is None:
        raise error(TypeError, name, f"expected a NumPy, PyTorch, CuPy or JAX array, got {type(a).__name__}")
    return fw


class Exporter:
    """Exports arrays for one _C call and remembers whether any was NumPy bfloat16."""

    def __init__(self):
        self.bf16_as_u16 = False

    def __call__(self, a, name):
        if a is None:
            return None
        try:
            out, as_u16 = adapter(a, name).export(a)
        except TypeError as e:
            if getattr(e, "argument", None):
                raise
            raise error(TypeError, name, str(e)) from None
        self.bf16_as_u16 |= as_u16
        return out

    def output(self, a, name):
        """Like calling the exporter, for an array that _C writes into."""
        fw = adapter(a, name)
        if fw is _Jax:
            raise error(TypeError, name, "JAX arrays are immutable; pass a NumPy, PyTorch or CuPy array")
        if fw is _Numpy and not a.flags.writeable:
            raise error(ValueError, name, "is read-only")
        return self(a, name)


def shape_of(a, name, ndim, layout):
    """a.shape, after checking the rank that output shapes are computed from."""
    shape = tuple(getattr(a, "shape", ()))
    if len(shape) != ndim:
        raise error(ValueError, name, f"expected {ndim} dims {layout}, got {len(shape)} dims {list(shape)}")
    return shape
