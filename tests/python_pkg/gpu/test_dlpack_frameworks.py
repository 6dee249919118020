"""CuPy and JAX arrays on the GPU through DLPack: read in place, outputs come back as the
caller's framework's arrays, checked against the float64 oracle."""

import numpy as np
import pytest

import flashattn
from fa_check import assert_close, fo

B, SQ, SK, HQ, HKV, D = 2, 70, 90, 4, 2, 64
REL = 2e-2  # fp16/bf16 plumbing bound, as tests/cli uses


def _inputs(rng):
    return [rng.standard_normal(s).astype(np.float32) for s in ((B, SQ, HQ, D), (B, SK, HKV, D), (B, SK, HKV, D))]


def _check(out, lse, grads, q, k, v, dout):
    x64 = [np.asarray(a, dtype=np.float64) for a in (q, k, v, dout)]
    ref_out, ref_lse = fo.attention_forward(*x64[:3], causal=True)
    ref_grads = fo.attention_backward(x64[3], *x64[:3], causal=True)
    for name, got, ref in zip(("out", "lse", "dq", "dk", "dv"), (out, lse, *grads), (ref_out, ref_lse, *ref_grads)):
        mag = max(1.0, float(np.max(np.abs(ref[np.isfinite(ref)]))))
        assert_close(name, got, ref, REL * mag)


def test_cupy_arrays(rng):
    cupy = pytest.importorskip("cupy")
    q, k, v = (cupy.asarray(x, dtype=cupy.float16) for x in _inputs(rng))
    cupy.cuda.Device().synchronize()  # the inputs are ready before a non-blocking stream reads them
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:  # flashattn runs on CuPy's current stream
        out, lse = flashattn.forward(q, k, v, causal=True, return_lse=True)
        dout = cupy.asarray(rng.standard_normal(out.shape), dtype=cupy.float16)
        grads = flashattn.backward(dout, q, k, v, out, lse, causal=True)
    stream.synchronize()
    assert isinstance(out, cupy.ndarray) and out.dtype == cupy.float16 and lse.dtype == cupy.float32
    assert all(isinstance(g, cupy.ndarray) and g.device.id == q.device.id for g in grads)
    h = lambda a: cupy.asnumpy(a).astype(np.float64)  # noqa: E731
    _check(h(out), h(lse), [h(g) for g in grads], h(q), h(k), h(v), h(dout))


def test_jax_arrays(rng):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX sees no GPU")
    q, k, v = (jax.device_put(jnp.asarray(x, dtype=jnp.bfloat16), gpus[0]) for x in _inputs(rng))
    out, lse = flashattn.forward(q, k, v, causal=True, return_lse=True)
    assert isinstance(out, jax.Array) and out.dtype == jnp.bfloat16 and list(out.devices())[0].platform == "gpu"
    dout = jax.device_put(jnp.asarray(rng.standard_normal(out.shape), dtype=jnp.bfloat16), gpus[0])
    grads = flashattn.backward(dout, q, k, v, out, lse, causal=True)
    assert all(isinstance(g, jax.Array) and g.dtype == jnp.bfloat16 for g in grads)
    h = lambda a: np.asarray(a.astype(jnp.float32), dtype=np.float64)  # noqa: E731
    _check(h(out), h(lse), [h(g) for g in grads], h(q), h(k), h(v), h(dout))
