"""forward / backward (batched and packed) on DLPack arrays of any framework.

Inputs are read in place: any strides with the last dimension contiguous, no copies.
Outputs are allocated with the input's framework on its device, or written into the
caller's `out=` / `dq=`, `dk=`, `dv=` arrays. Layouts and options: docs/contract.md.
"""

from __future__ import annotations

import operator

import numpy as np

from . import _C
from ._arrays import Exporter, adapter, shape_of
from ._errors import error

_U64 = (1 << 64) - 1


def _int(x, name, bits=64, signed=True):
    """x as a Python int that fits the C integer the library takes (int64 unless said)."""
    try:
        x = operator.index(x)
    except TypeError:
        raise error(TypeError, name, f"expected an integer, got {type(x).__name__}") from None
    if bits is None:  # any integer (seed and offset keep their low 64 bits)
        return x
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= x <= hi:
        raise error(ValueError, name, f"{x} is out of range [{lo}, {hi}]")
    return x


def _window(window):
    try:
        left, right = window
        left, right = operator.index(left), operator.index(right)
    except (TypeError, ValueError):
        raise error(ValueError, "window", f"expected a pair (left, right) of integers, got {window!r}") from None
    return _int(left, "window"), _int(right, "window")


def _options(fw, q, ex, softmax_scale, causal, window, softcap, alibi_slopes, dropout_p, seed,
             offset, backend, num_threads, stream):
    """The keyword arguments every _C call takes, checked and converted."""
    left, right = _window(window)
    return dict(
        softmax_scale=None if softmax_scale is None else float(softmax_scale),
        causal=bool(causal), window_left=left, window_right=right, softcap=float(softcap),
        alibi_slopes=ex(alibi_slopes, "alibi_slopes"), dropout_p=float(dropout_p),
        seed=_int(seed, "seed", bits=None) & _U64, offset=_int(offset, "offset", bits=None) & _U64,
        backend=str(backend), num_threads=_int(num_threads, "num_threads", bits=32),
        stream=fw.stream(q) if stream is None else _int(stream, "stream", signed=False),
    )


def forward(q, k, v, *, softmax_scale=None, causal=False, window=(-1, -1), softcap=0.0,
            alibi_slopes=None, dropout_p=0.0, seed=0, offset=0, return_lse=False, backend="auto",
            num_threads=0, stream=None, out=None, seqused_k=None, block_table=None):
    """Attention of q [B, Sq, Hq, Dqk], k [B, Sk, Hkv, Dqk], v [B, Sk, Hkv, Dv].

    Returns out [B, Sq, Hq, Dv] in q's dtype, or (out, lse) with lse [B, Hq, Sq] float32
    when return_lse. `window` is (left, right), -1 unbounded; causal and window are
    aligned at the bottom right. `stream` (CUDA, an integer handle) defaults to the
    framework's current stream (PyTorch, CuPy), else the default stream. `seqused_k`
    (int32 [B], CPU backends): sequence b attends to its first seqused_k[b] keys only,
    the filled part of a KV cache; masks align at that end. `block_table` (int32
    [B, max_blocks], CPU backends): a paged cache, k and v pools [num_blocks, page_size,
    Hkv, D] (page_size a multiple of 64), key j of sequence b in block
    block_table[b, j // page_size].
    """
    fw = adapter(q, "q")
    B, Sq, Hq, _ = shape_of(q, "q", 4, "[B, Sq, Hq, D]")
    Dv = shape_of(v, "v", 4, "[B, Sk, Hkv, Dv]")[3]
    given = out is not None  # the caller's buffer comes back as it is
    if not given:
        out = fw.empty((B, Sq, Hq, Dv), None, q)
    lse = fw.empty((B, Hq, Sq), "float32", q) if return_lse else None
    ex = Exporter()
    arrays = (ex(q, "q"), ex(k, "k"), ex(v, "v"), ex.output(out, "out"), ex(lse, "lse"))
    used, table = ex(seqused_k, "seqused_k"), ex(block_table, "block_table")
    opts = _options(fw, q, ex, softmax_scale, causal, window, softcap, alibi_slopes, dropout_p,
                    seed, offset, backend, num_threads, stream)
    _C.fwd(*arrays, **opts, u16_is_bf16=ex.bf16_as_u16, seqused_k=used, block_table=table)
    out = out if given else fw.finish(out, q)
    return (out, fw.finish(lse, q)) if return_lse else out


def forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                   softmax_scale=None, causal=False, window=(-1, -1), softcap=0.0,
                   alibi_slopes=None, dropout_p=0.0, seed=0, offset=0, return_lse=False,
                   backend="auto", num_threads=0, stream=None, out=None, seqused_k=None):
    """Packed variable-length attention: q [total_q, Hq, Dqk], k/v [total_k, Hkv, D],
    cu_seqlens int32 [B+1] on q's device. Returns out [total_q, Hq, Dv] (and lse
    [Hq, total_q] float32 when return_lse). `seqused_k` as in forward: sequence b
    uses the first seqused_k[b] of its key rows."""
    fw = adapter(q, "q")
    total_q, Hq, _ = shape_of(q, "q", 3, "[total_q, Hq, D]")
    Dv = shape_of(v, "v", 3, "[total_k, Hkv, Dv]")[2]
    given = out is not None
    if not given:
        out = fw.empty((total_q, Hq, Dv), None, q)
    lse = fw.empty((Hq, total_q), "float32", q) if return_lse else None
    ex = Exporter()
    arrays = (ex(q, "q"), ex(k, "k"), ex(v, "v"), ex.output(out, "out"), ex(lse, "lse"),
              ex(cu_seqlens_q, "cu_seqlens_q"), ex(cu_seqlens_k, "cu_seqlens_k"),
              _int(max_seqlen_q, "max_seqlen_q"), _int(max_seqlen_k, "max_seqlen_k"))
    used = ex(seqused_k, "seqused_k")
    opts = _options(fw, q, ex, softmax_scale, causal, window, softcap, alibi_slopes, dropout_p,
                    seed, offset, backend, num_threads, stream)
    _C.fwd_varlen(*arrays, **opts, u16_is_bf16=ex.bf16_as_u16, seqused_k=used)
    out = out if given else fw.finish(out, q)
    return (out, fw.finish(lse, q)) if return_lse else out


def _grads(fw, q, k, v, dq, dk, dv):
    return tuple(fw.empty(x.shape, None, x) if g is None else g for x, g in ((q, dq), (k, dk), (v, dv)))


def _finish_grads(fw, q, grads, given):
    return tuple(g if g0 is not None else fw.finish(g, q) for g, g0 in zip(grads, given))


def backward(dout, q, k, v, out, lse, *, softmax_scale=None, causal=False, window=(-1, -1),
             softcap=0.0, alibi_slopes=None, dropout_p=0.0, seed=0, offset=0, deterministic=False,
             backend="auto", num_threads=0, stream=None, dq=None, dk=None, dv=None):
    """Gradients (dq, dk, dv) of the batched forward with the same options; `out` and
    `lse` are the forward's (forward(..., return_lse=True))."""
    fw = adapter(q, "q")
    grads = _grads(fw, q, k, v, dq, dk, dv)
    ex = Exporter()
    arrays = (ex(dout, "dout"), ex(q, "q"), ex(k, "k"), ex(v, "v"), ex(out, "out"), ex(lse, "lse"),
              ex.output(grads[0], "dq"), ex.output(grads[1], "dk"), ex.output(grads[2], "dv"))
    opts = _options(fw, q, ex, softmax_scale, causal, window, softcap, alibi_slopes, dropout_p,
                    seed, offset, backend, num_threads, stream)
    _C.bwd(*arrays, deterministic=bool(deterministic), **opts, u16_is_bf16=ex.bf16_as_u16)
    return _finish_grads(fw, q, grads, (dq, dk, dv))


def backward_varlen(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                    max_seqlen_k, *, softmax_scale=None, causal=False, window=(-1, -1),
                    softcap=0.0, alibi_slopes=None, dropout_p=0.0, seed=0, offset=0,
                    deterministic=False, backend="auto", num_threads=0, stream=None, dq=None,
                    dk=None, dv=None):
    """Gradients (dq, dk, dv) of forward_varlen with the same options."""
    fw = adapter(q, "q")
    grads = _grads(fw, q, k, v, dq, dk, dv)
    ex = Exporter()
    arrays = (ex(dout, "dout"), ex(q, "q"), ex(k, "k"), ex(v, "v"), ex(out, "out"), ex(lse, "lse"),
              ex.output(grads[0], "dq"), ex.output(grads[1], "dk"), ex.output(grads[2], "dv"),
              ex(cu_seqlens_q, "cu_seqlens_q"), ex(cu_seqlens_k, "cu_seqlens_k"),
              _int(max_seqlen_q, "max_seqlen_q"), _int(max_seqlen_k, "max_seqlen_k"))
    opts = _options(fw, q, ex, softmax_scale, causal, window, softcap, alibi_slopes, dropout_p,
                    seed, offset, backend, num_threads, stream)
    _C.bwd_varlen(*arrays, deterministic=bool(deterministic), **opts, u16_is_bf16=ex.bf16_as_u16)
    return _finish_grads(fw, q, grads, (dq, dk, dv))


def dropout_mask(seed, offset, b, h, seqlen_q, seqlen_k, dropout_p):
    """bool [seqlen_q, seqlen_k]: which p[b, h, i, j] the contract's dropout keeps
    (the same decisions in every backend), for tests."""
    mask = np.empty((_int(seqlen_q, "seqlen_q"), _int(seqlen_k, "seqlen_k")), dtype=bool)
    _C.dropout_mask(mask, _int(seed, "seed", bits=None) & _U64, _int(offset, "offset", bits=None) & _U64,
                    _int(b, "b"), _int(h, "h"), float(dropout_p))
    return mask
