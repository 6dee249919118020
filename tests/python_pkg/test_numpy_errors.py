"""Invalid arguments raise ValueError / TypeError / NotImplementedError naming the argument
(message and `.argument`), before anything is written."""

import numpy as np
import pytest

import flashattn


@pytest.fixture
def qkv(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return r(2, 9, 4, 16), r(2, 11, 2, 16), r(2, 11, 2, 16)


def raises(exc, argument, fn, *args, **kwargs):
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    assert info.value.argument == argument, f"{info.value!r} names {info.value.argument!r}, not {argument!r}"
    assert f"'{argument}'" in str(info.value)
    return info.value


def test_forward_refusals(qkv):
    q, k, v = qkv
    f = flashattn.forward
    raises(ValueError, "k", f, q, k[..., :8], v)                       # head dims differ
    k3, v3 = (x[:, :, :1].repeat(3, axis=2) for x in (k, v))
    raises(ValueError, "k", f, q, k3, v3)                              # Hq % Hkv != 0
    raises(ValueError, "v", f, q, k, v[:, :10])                        # Sk differs
    raises(ValueError, "q", f, q[0], k, v)                             # rank
    raises(ValueError, "q", f, q[..., ::2], k[..., ::2], v)            # last dim not contiguous
    raises(TypeError, "q", f, q.astype(np.float64), k, v)
    raises(TypeError, "k", f, q, k.astype(np.float16), v)              # mixed dtypes
    raises(TypeError, "q", f, q.tolist(), k, v)                        # not an array
    raises(TypeError, "q", f, q.astype(np.uint16), k, v)               # raw bits are not bfloat16
    raises(ValueError, "window", f, q, k, v, window=(-2, 0))
    raises(ValueError, "window", f, q, k, v, window=5)
    raises(ValueError, "dropout_p", f, q, k, v, dropout_p=1.0)
    raises(ValueError, "softmax_scale", f, q, k, v, softmax_scale=float("nan"))
    raises(ValueError, "softcap", f, q, k, v, softcap=-1.0)
    raises(ValueError, "alibi_slopes", f, q, k, v, alibi_slopes=np.ones(3, np.float32))
    raises(TypeError, "alibi_slopes", f, q, k, v, alibi_slopes=np.ones(4, np.float64))
    raises(ValueError, "backend", f, q, k, v, backend="gpu")
    raises(TypeError, "seed", f, q, k, v, seed=1.5)
    # Integers past what the library takes are refused by name, not left to the binding.
    raises(ValueError, "num_threads", f, q, k, v, num_threads=1_000_000)  # crashed before
    raises(ValueError, "num_threads", f, q, k, v, num_threads=2**31)
    raises(ValueError, "window", f, q, k, v, window=(2**63, 0))
    raises(ValueError, "stream", f, q, k, v, stream=-1)
    raises(ValueError, "out", f, q, k, v, out=np.empty((2, 9, 4, 8), np.float32))


def test_cuda_backend_needs_cuda_memory(qkv):
    q, k, v = qkv
    with pytest.raises((ValueError, NotImplementedError)) as info:
        flashattn.forward(q, k, v, backend="cuda")
    assert info.value.argument == "backend"


def test_varlen_refusals(qkv):
    q, k, v = (x.reshape(-1, *x.shape[2:]) for x in qkv)  # total_q 18, total_k 22
    cq, ck = np.array([0, 9, 18], np.int32), np.array([0, 11, 22], np.int32)
    f = flashattn.forward_varlen
    f(q, k, v, cq, ck, 9, 11)  # valid
    raises(TypeError, "cu_seqlens_q", f, q, k, v, cq.astype(np.int64), ck, 9, 11)
    raises(ValueError, "cu_seqlens_q", f, q, k, v, np.array([0, 10, 9], np.int32), ck, 10, 11)
    raises(ValueError, "cu_seqlens_k", f, q, k, v, cq, np.array([0, 11, 23], np.int32), 9, 12)
    raises(ValueError, "cu_seqlens_k", f, q, k, v, cq, ck[:2], 9, 11)
    raises(TypeError, "max_seqlen_q", f, q, k, v, cq, ck, "9", 11)
    raises(ValueError, "max_seqlen_k", f, q, k, v, cq, ck, 9, 2**64)


def test_backward_refusals(qkv, rng):
    q, k, v = qkv
    out, lse = flashattn.forward(q, k, v, return_lse=True)
    b = flashattn.backward
    raises(ValueError, "dout", b, out[:, :, :, :8], q, k, v, out, lse)
    raises(ValueError, "lse", b, out, q, k, v, out, lse[:, :2])
    raises(TypeError, "lse", b, out, q, k, v, out, lse.astype(np.float16))
    raises(ValueError, "dq", b, out, q, k, v, out, lse, dq=np.empty((2, 9, 4, 8), np.float32))


def test_nothing_is_written_on_error(qkv):
    q, k, v = qkv
    out = np.full((2, 9, 4, 16), 7.0, np.float32)
    with pytest.raises(ValueError):
        flashattn.forward(q, k, v, dropout_p=2.0, out=out)
    assert (out == 7.0).all()


def test_error_kinds_are_builtin_exceptions(qkv):
    q, k, v = qkv
    e = raises(ValueError, "k", flashattn.forward, q, k[..., :8], v)
    assert type(e) is ValueError and str(e).startswith("flashattn: argument 'k':")
