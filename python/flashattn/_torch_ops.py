"""PyTorch operators over _C: flashattn::fwd, flashattn::bwd and their packed forms.

They are torch.library custom ops, so torch.compile traces them without graph breaks
(the fake implementations give output shapes without running anything) and autograd
differentiates fwd through bwd. Tensors reach _C as DLPack capsules: no copy, no
stream synchronisation; CUDA work goes on PyTorch's current stream, so the ops can be
captured in CUDA graphs. Dropout takes `rng_state`, a CPU int64 tensor (seed, offset),
or None.

`attention` / `attention_varlen` are what flashattn.torch calls. In eager mode they skip
the dispatcher and run the same implementations through a torch.autograd.Function,
which costs a fraction of a custom op's Python dispatch at small sizes.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _C
from ._errors import error

_U64 = (1 << 64) - 1
_dl = torch.utils.dlpack.to_dlpack  # the C function: no checks, no stream sync


# What torch.cuda.current_stream() reads, without building a Stream object (private, so
# fall back to the public call where a release lacks it).
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(t: Tensor) -> int:
    if not t.is_cuda:
        return 0
    if _raw_stream is not None:
        return _raw_stream(t.device.index)
    return torch.cuda.current_stream(t.device).cuda_stream


def _c(t: Tensor) -> Tensor:
    """The kernels need a contiguous last dimension; everything else may be strided."""
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous()


def _seed(rng_state: Optional[Tensor]):
    if rng_state is None:
        return 0, 0
    seed, offset = rng_state.tolist()
    return seed & _U64, offset & _U64


def _opt(t: Optional[Tensor]):
    return None if t is None else _dl(t)


# ---------------------------------------------------------------------------------------
# Implementations (real tensors) and fake implementations (shapes only)
# ---------------------------------------------------------------------------------------

def _fwd_impl(q: Tensor, k: Tensor, v: Tensor, softmax_scale: float, causal: bool,
              window_left: int, window_right: int, softcap: float, alibi_slopes: Optional[Tensor],
              dropout_p: float, rng_state: Optional[Tensor], deterministic: bool) -> Tuple[Tensor, Tensor]:
    q, k, v = _c(q), _c(k), _c(v)
    out = q.new_empty(q.shape[:-1] + (v.shape[-1],))
    lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    seed, offset = _seed(rng_state)
    _C.fwd(_dl(q), _dl(k), _dl(v), _dl(out), _dl(lse), softmax_scale, causal, window_left,
           window_right, softcap, _opt(alibi_slopes), dropout_p, seed, offset, "auto", 0, _stream(q))
    return out, lse


def _fwd_varlen_impl(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                     max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, causal: bool,
                     window_left: int, window_right: int, softcap: float,
                     alibi_slopes: Optional[Tensor], dropout_p: float, rng_state: Optional[Tensor],
                     deterministic: bool) -> Tuple[Tensor, Tensor]:
    q, k, v = _c(q), _c(k), _c(v)
    out = q.new_empty(q.shape[:-1] + (v.shape[-1],))
    lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    seed, offset = _seed(rng_state)
    _C.fwd_varlen(_dl(q), _dl(k), _dl(v), _dl(out), _dl(lse), _dl(cu_seqlens_q), _dl(cu_seqlens_k),
                  max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right,
                  softcap, _opt(alibi_slopes), dropout_p, seed, offset, "auto", 0, _stream(q))
    return out, lse


def _bwd_impl(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
              softmax_scale: float, causal: bool, window_left: int, window_right: int,
              softcap: float, alibi_slopes: Optional[Tensor], dropout_p: float,
              rng_state: Optional[Tensor], deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    dout, q, k, v, out = _c(dout), _c(q), _c(k), _c(v), _c(out)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    seed, offset = _seed(rng_state)
    _C.bwd(_dl(dout), _dl(q), _dl(k), _dl(v), _dl(out), _dl(lse), _dl(dq), _dl(dk), _dl(dv),
           deterministic, softmax_scale, causal, window_left, window_right, softcap,
           _opt(alibi_slopes), dropout_p, seed, offset, "auto", 0, _stream(q))
    return dq, dk, dv


def _bwd_varlen_impl(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                     cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
                     max_seqlen_k: int, softmax_scale: float, causal: bool, window_left: int,
                     window_right: int, softcap: float, alibi_slopes: Optional[Tensor],
                     dropout_p: float, rng_state: Optional[Tensor],
                     deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    dout, q, k, v, out = _c(dout), _c(q), _c(k), _c(v), _c(out)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    seed, offset = _seed(rng_state)
    _C.bwd_varlen(_dl(dout), _dl(q), _dl(k), _dl(v), _dl(out), _dl(lse), _dl(dq), _dl(dk), _dl(dv),
                  _dl(cu_seqlens_q), _dl(cu_seqlens_k), max_seqlen_q, max_seqlen_k, deterministic,
                  softmax_scale, causal, window_left, window_right, softcap, _opt(alibi_slopes),
                  dropout_p, seed, offset, "auto", 0, _stream(q))
    return dq, dk, dv


# The library's argument names in flash_attn_with_kvcache's words (seqused_k keeps its own:
# the wrapper derives it, from cache_seqlens or not).
_KVCACHE_NAMES = {"k": "k_cache", "v": "v_cache", "k_new": "k", "v_new": "v"}


def _kvcache_fwd(*args, **kwargs):
    try:
        _C.fwd(*args, **kwargs)
    except (ValueError, TypeError, NotImplementedError) as e:
        name = _KVCACHE_NAMES.get(getattr(e, "argument", None))
        if name is None:
            raise
        raise error(type(e), name, str(e).split(": ", 2)[-1]) from None


def _meets(*ts: Tensor) -> bool:
    """Whether the memory spans of the first two tensors meet those of the others."""
    def span(t):
        last = sum((n - 1) * st for n, st in zip(t.shape, t.stride())) if t.numel() else -1
        return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()
    return any(a0 < b1 and b0 < a1 for a0, a1 in map(span, ts[:2]) for b0, b1 in map(span, ts[2:]))


def _fwd_kvcache_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, k_new: Optional[Tensor],
                      v_new: Optional[Tensor], cache_seqlens: Tensor, cache_rows: Optional[Tensor],
                      block_table: Optional[Tensor], softmax_scale: float, causal: bool,
                      window_left: int, window_right: int, softcap: float,
                      alibi_slopes: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """Writes k_new / v_new [B, S_new, Hkv, D] into the caches at rows cache_seqlens[b]...
    (of cache cache_rows[b], else b; or of the blocks block_table[b] names, the caches then
    being pools of blocks), then attends to each sequence's cache_seqlens[b] + S_new keys
    (seqused_k). Everything is checked before the first write, here at run time, so a
    compiled graph checks too. No autograd: the caches are inference state."""
    batch, page = q.shape[0], k_cache.shape[1]
    s_cache = page * (block_table.shape[1] if block_table is not None else 1)
    s_new = 0 if k_new is None else k_new.shape[1]
    used = (cache_seqlens + s_new).to(torch.int32)
    if not (q.is_cuda and torch.cuda.is_current_stream_capturing()) and batch:  # values (a sync on CUDA)
        if q.is_cuda:
            lo, hi = int(cache_seqlens.min()), int(cache_seqlens.max())
        else:  # a list is cheaper than two reductions at decoding sizes
            lens = cache_seqlens.tolist()
            lo, hi = min(lens), max(lens)
        if lo < 0 or hi + s_new > s_cache:
            raise error(ValueError, "cache_seqlens",
                        f"entries in [{lo}, {hi}] with {s_new} new keys do not fit a cache of {s_cache} rows")
        if cache_rows is not None and not (0 <= int(cache_rows.min()) and int(cache_rows.max()) < k_cache.shape[0]):
            raise error(ValueError, "cache_batch_idx", f"entries must be in [0, {k_cache.shape[0]})")
    q = _c(q)
    out = q.new_empty(q.shape[:-1] + (v_cache.shape[-1],))
    lse = q.new_empty((batch, q.shape[2], q.shape[1]), dtype=torch.float32)

    def call(kc, vc, **extra):  # fresh capsules per call: a DLPack capsule is consumed once
        _kvcache_fwd(_dl(q), _dl(kc), _dl(vc), _dl(out), _dl(lse), softmax_scale, causal, window_left,
                     window_right, softcap, _opt(alibi_slopes), 0.0, 0, 0, "auto", 0, _stream(q),
                     seqused_k=_dl(used), block_table=_opt(block_table), **extra)

    if (cache_rows is None and k_cache.stride(-1) == 1 and v_cache.stride(-1) == 1
            and not (k_cache.requires_grad or v_cache.requires_grad)):
        # One call: the library checks everything, writes the new rows into the caches, attends.
        kc, vc = (k_cache, v_cache) if block_table is not None else (k_cache[:batch], v_cache[:batch])
        if k_new is not None:
            k_new, v_new = _c(k_new), _c(v_new)
            if q.is_cuda and _meets(k_new, v_new, k_cache, v_cache):  # a GPU copies them with no stage
                k_new, v_new = k_new.clone(), v_new.clone()
        call(kc, vc, **({} if k_new is None else dict(k_new=_dl(k_new), v_new=_dl(v_new))))
        if k_new is not None:  # written behind autograd's back: what saved them must see it
            torch.autograd.graph.increment_version(k_cache)
            torch.autograd.graph.increment_version(v_cache)
        return out, lse

    # cache_batch_idx, caches with a strided last dim or that require grad (PyTorch refuses
    # the write): checked by the library, written here.
    def caches(gather):
        if block_table is not None:
            return _c(k_cache), _c(v_cache)
        if cache_rows is None:
            return _c(k_cache[:batch]), _c(v_cache[:batch])
        if gather:
            return _c(k_cache.index_select(0, cache_rows)), _c(v_cache.index_select(0, cache_rows))
        # The checks only look at shapes and strides: one cache repeated, no copy.
        return (_c(k_cache[:1]).expand(batch, -1, -1, -1), _c(v_cache[:1]).expand(batch, -1, -1, -1))

    call(*caches(False), check_only=True)
    if k_new is not None:
        pos = cache_seqlens.long()[:, None] + torch.arange(s_new, device=q.device)
        if block_table is not None:  # block and row of each new key
            rows, pos = block_table.long().gather(1, pos // page), pos % page
        else:
            rows = (torch.arange(batch, device=q.device) if cache_rows is None else cache_rows)[:, None]
            rows = rows.expand(batch, s_new)
        k_cache[rows, pos] = k_new
        v_cache[rows, pos] = v_new
    call(*caches(True))
    return out, lse


fwd = torch.library.custom_op("flashattn::fwd", mutates_args=())(_fwd_impl)
fwd_kvcache = torch.library.custom_op("flashattn::fwd_kvcache",
                                      mutates_args=("k_cache", "v_cache"))(_fwd_kvcache_impl)
fwd_varlen = torch.library.custom_op("flashattn::fwd_varlen", mutates_args=())(_fwd_varlen_impl)
bwd = torch.library.custom_op("flashattn::bwd", mutates_args=())(_bwd_impl)
bwd_varlen = torch.library.custom_op("flashattn::bwd_varlen", mutates_args=())(_bwd_varlen_impl)


@fwd.register_fake
def _(q, k, v, *args):
    return (q.new_empty(q.shape[:-1] + (v.shape[-1],)),
            q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32))


@fwd_kvcache.register_fake
def _(q, k_cache, v_cache, *args):
    return (q.new_empty(q.shape[:-1] + (v_cache.shape[-1],)),
            q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32))


@fwd_varlen.register_fake
def _(q, k, v, *args):
    return q.new_empty(q.shape[:-1] + (v.shape[-1],)), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


@bwd.register_fake
def _(dout, q, k, v, *args):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


@bwd_varlen.register_fake
def _(dout, q, k, v, *args):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


# ---------------------------------------------------------------------------------------
# Autograd: d(out)/d(q, k, v) through bwd; lse is not differentiable (as in flash_attn)
# ---------------------------------------------------------------------------------------

def _setup(ctx, inputs, output):
    q, k, v, *rest = inputs
    n_var = len(rest) - 9  # varlen ops carry cu_seqlens_q/k and max_seqlen_q/k first
    ctx.varlen = tuple(rest[:n_var])
    scale, causal, wl, wr, softcap, alibi, p, rng, det = rest[n_var:]
    out, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, out, lse, alibi, rng)
    ctx.opts = (scale, causal, wl, wr, softcap)
    ctx.tail = (p, det)


def _grad_with(bwd_op, bwd_varlen_op):
    def grad(ctx, dout, _dlse):
        q, k, v, out, lse, alibi, rng = ctx.saved_tensors
        p, det = ctx.tail
        if ctx.varlen:
            dq, dk, dv = bwd_varlen_op(dout, q, k, v, out, lse, *ctx.varlen, *ctx.opts, alibi, p, rng, det)
        else:
            dq, dk, dv = bwd_op(dout, q, k, v, out, lse, *ctx.opts, alibi, p, rng, det)
        return (dq, dk, dv) + (None,) * (len(ctx.varlen) + 9)
    return grad


torch.library.register_autograd("flashattn::fwd", _grad_with(bwd, bwd_varlen), setup_context=_setup)
torch.library.register_autograd("flashattn::fwd_varlen", _grad_with(bwd, bwd_varlen), setup_context=_setup)


class _EagerFwd(torch.autograd.Function):
    """The same op outside torch.compile, without the dispatcher's Python round trips.
    (ctx-first forward: a separate setup_context makes apply() bind the signature each call.)"""

    @staticmethod
    def forward(ctx, *inputs):
        output = (_fwd_varlen_impl if len(inputs) == 16 else _fwd_impl)(*inputs)
        _setup(ctx, inputs, output)
        return output

    backward = staticmethod(torch.autograd.function.once_differentiable(_grad_with(_bwd_impl, _bwd_varlen_impl)))


_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def _eager(q: Tensor) -> bool:
    """Plain tensors in plain eager mode; tracing, fake/meta tensors, subclasses and
    torch.func transforms take the registered op."""
    return (type(q) is Tensor and (q.is_cuda or q.is_cpu)
            and not torch.compiler.is_compiling() and not _functorch_active())


def _needs_grad(*ts) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in ts)


def attention(q, k, v, *args):
    """(out, lse) of flashattn::fwd(q, k, v, *args), differentiable in q, k, v."""
    if not _eager(q):
        return fwd(q, k, v, *args)
    if _needs_grad(q, k, v):
        return _EagerFwd.apply(q, k, v, *args)
    return _fwd_impl(q, k, v, *args)


def attention_varlen(q, k, v, *args):
    """(out, lse) of flashattn::fwd_varlen(q, k, v, *args), differentiable in q, k, v."""
    if not _eager(q):
        return fwd_varlen(q, k, v, *args)
    if _needs_grad(q, k, v):
        return _EagerFwd.apply(q, k, v, *args)
    return _fwd_varlen_impl(q, k, v, *args)


def attention_kvcache(*args):
    """(out, lse) of flashattn::fwd_kvcache: the op under tracing, the function in eager mode."""
    if not _eager(args[0]):
        return fwd_kvcache(*args)
    return _fwd_kvcache_impl(*args)
