"""flashattn for PyTorch: autograd, torch.compile and flash_attn-compatible functions.

    from flashattn.torch import flash_attn_func      # was: from flash_attn import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)      # q [B, S, H, D] on CPU or CUDA

The functions below have flash_attn 2.x's names, argument names, defaults and return
values. Differences:
  * return_attn_probs=True returns (out, softmax_lse, None): the probabilities are never
    materialised (flash_attn returns them only with dropout, for testing).
  * Dropout draws its seed from PyTorch's default CPU generator, so torch.manual_seed
    makes it reproducible. A captured CUDA graph replays the seed it was captured with.
  * flash_attn_varlen_func's and flash_attn_with_kvcache's block_table (paged KV cache)
    is not supported; flash_attn_with_kvcache takes CUDA tensors only in builds with
    -DFLASHATTN_CUDA_SEQUSED_K=ON (not yet GPU-tested; CPU tensors always).
  * CPU tensors run too (fp32, fp16, bf16); CUDA needs fp16/bf16 and head dims that are
    multiples of 8 (flash_attn pads other head dims; flashattn refuses them).
causal and window_size are aligned at the bottom right (query i sits at key
i + Sk - Sq), as in flash_attn >= 2.1; lse is not differentiable.

scaled_dot_product_attention is a drop-in for torch.nn.functional's on [B, H, N, D]
tensors; its is_causal keeps SDPA's top-left alignment (see its docstring).
"""

from __future__ import annotations

import torch as _torch

from . import _torch_ops as _ops
from ._errors import error as _error

__all__ = ["flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
           "flash_attn_varlen_func", "flash_attn_varlen_qkvpacked_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_with_kvcache", "scaled_dot_product_attention"]


def _options(q, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic):
    """The op's trailing arguments: the scale resolved, a fresh seed when dropping out."""
    # (A head dim of 0 is the library's to refuse, by name: no division here.)
    d = q.shape[-1]
    scale = (d ** -0.5 if d > 0 else 1.0) if softmax_scale is None else float(softmax_scale)
    try:
        left, right = (int(w) for w in window_size)
    except (TypeError, ValueError):
        raise _error(ValueError, "window_size", f"expected (left, right), got {window_size!r}") from None
    p = float(dropout_p)
    # Seed and offset from the default generator: torch.manual_seed makes dropout repeatable.
    rng = _torch.randint(0, 1 << 62, (2,), dtype=_torch.int64) if p > 0 else None
    return (scale, bool(causal), left, right, float(softcap), alibi_slopes, p, rng, bool(deterministic))


def _result(out, lse, return_attn_probs):
    return (out, lse, None) if return_attn_probs else out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] -> out [B, Sq, Hq, Dv]
    (or (out, softmax_lse [B, Hq, Sq], None) with return_attn_probs)."""
    opts = _options(q, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic)
    out, lse = _ops.attention(q, k, v, *opts)
    return _result(out, lse, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    """qkv [B, S, 3, H, D] -> out [B, S, H, D]; q, k, v are views of qkv (no copy)."""
    q, k, v = qkv.unbind(2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    """q [B, Sq, Hq, D], kv [B, Sk, 2, Hkv, D] -> out [B, Sq, Hq, D]."""
    k, v = kv.unbind(2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, block_table=None):
    """Packed: q [total_q, Hq, D], k/v [total_k, Hkv, D], cu_seqlens int32 [B+1]
    -> out [total_q, Hq, Dv] (or (out, softmax_lse [Hq, total_q], None))."""
    if block_table is not None:
        raise _error(NotImplementedError, "block_table", "paged KV caches are not supported")
    opts = _options(q, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic)
    out, lse = _ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                                     int(max_seqlen_k), *opts)
    return _result(out, lse, return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None,
                                     causal=False, window_size=(-1, -1), softcap=0.0,
                                     alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """qkv [total, 3, H, D] -> out [total, H, D]."""
    q, k, v = qkv.unbind(1)
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, dropout_p,
                                  softmax_scale, causal, window_size, softcap, alibi_slopes,
                                  deterministic, return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p=0.0, softmax_scale=None, causal=False,
                                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                                    deterministic=False, return_attn_probs=False):
    """q [total_q, Hq, D], kv [total_k, 2, Hkv, D] -> out [total_q, Hq, D]."""
    k, v = kv.unbind(1)
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, deterministic, return_attn_probs)


def _rotate(x, cos, sin, pos, interleaved):
    """x [B, S, H, D] with its first 2 * cos.shape[1] dims rotated at positions pos [B, S]
    (fp32 arithmetic, rounded once to x's dtype, as flash_attn's rotary kernel)."""
    half = cos.shape[1]
    c = cos[pos].unsqueeze(2).float()
    s = sin[pos].unsqueeze(2).float()
    r = x[..., :2 * half].float()
    if interleaved:  # pairs (0, 1), (2, 3), ... (GPT-J)
        x1, x2 = r[..., 0::2], r[..., 1::2]
        r = _torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:  # halves (GPT-NeoX)
        x1, x2 = r[..., :half], r[..., half:]
        r = _torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return _torch.cat((r.to(x.dtype), x[..., 2 * half:]), dim=-1)


_seqused_on = {}


def _cuda_takes_seqused(device):
    """Whether the library's CUDA backend takes seqused_k (a build option until GPU-tested):
    asked once per device with a tiny call, so a refusal comes before any cache write."""
    if device not in _seqused_on:
        z = _torch.zeros(1, 1, 1, 64, dtype=_torch.bfloat16, device=device)
        try:
            _ops._fwd_kvcache_impl(z, z, z, _torch.ones(1, dtype=_torch.int32, device=device),
                                   1.0, False, -1, -1, 0.0, None)
            _seqused_on[device] = True
        except NotImplementedError as e:
            if getattr(e, "argument", None) != "seqused_k":
                raise
            _seqused_on[device] = False
    return _seqused_on[device]


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
                            block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1),
                            softcap=0.0, rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False):
    """Attention of q [B, Sq, Hq, D] over a KV cache k_cache / v_cache [B_cache, S_cache, Hkv, D]
    whose sequence b holds cache_seqlens[b] keys (int or int32 [B]; None: S_cache).

    With k, v [B, S_new, Hkv, D] the new keys are first written into the caches in place at
    rows cache_seqlens[b] .. cache_seqlens[b] + S_new - 1, and attention covers them too.
    rotary_cos / rotary_sin [S_ro, R / 2] rotate the first R dims of q and the new k at
    their positions (q at cache_seqlens[b] + i when causal or windowed, else all at
    cache_seqlens[b]). cache_batch_idx (int [B]) picks each sequence's cache (this copies
    the picked caches per call). Masks align at the end of the used keys. Returns out
    [B, Sq, Hq, Dv], or (out, softmax_lse [B, Hq, Sq]). num_splits is accepted and
    ignored (the library picks its own key splits). Inference only: no gradients.
    cache_leftpad and block_table (paged KV) raise NotImplementedError, and so do CUDA
    tensors where the build's CUDA backend does not take seqused_k yet.
    """
    if block_table is not None:
        raise _error(NotImplementedError, "block_table", "paged KV caches are not supported")
    if cache_leftpad is not None:
        raise _error(NotImplementedError, "cache_leftpad", "left-padded caches are not supported")
    if q.is_cuda and not _torch.compiler.is_compiling() and not _cuda_takes_seqused(q.device):
        raise _error(NotImplementedError, "k_cache",
                     "this build's CUDA backend does not take KV caches yet (CPU tensors do)")
    for name, t, nd in (("q", q, 4), ("k_cache", k_cache, 4), ("v_cache", v_cache, 4)):
        if t.dim() != nd:
            raise _error(ValueError, name, f"expected 4 dims, got {list(t.shape)}")
    if (k is None) != (v is None):
        raise _error(ValueError, "k" if k is None else "v", "k and v are given together or not at all")
    if (rotary_cos is None) != (rotary_sin is None):
        raise _error(ValueError, "rotary_cos", "rotary_cos and rotary_sin are given together or not at all")
    batch, s_new = q.shape[0], 0 if k is None else k.shape[1]
    s_cache = k_cache.shape[1]
    if k is not None:
        if cache_seqlens is None:
            raise _error(ValueError, "cache_seqlens", "is needed with k and v: where the new keys go")
        for name, t, c in (("k", k, k_cache), ("v", v, v_cache)):
            if t.dim() != 4 or t.shape[0] != batch or t.shape[2:] != c.shape[2:]:
                raise _error(ValueError, name, f"expected [{batch}, S_new, {c.shape[2]}, {c.shape[3]}] "
                                               f"like its cache, got {list(t.shape)}")
        if v.shape[1] != s_new:
            raise _error(ValueError, "v", f"has {v.shape[1]} new rows and k {s_new}")
    if cache_seqlens is None:
        seqlens = _torch.full((batch,), s_cache, dtype=_torch.int32, device=q.device)
    elif isinstance(cache_seqlens, int):
        seqlens = _torch.full((batch,), cache_seqlens, dtype=_torch.int32, device=q.device)
    else:
        if cache_seqlens.shape != (batch,):
            raise _error(ValueError, "cache_seqlens", f"expected shape [{batch}], got {list(cache_seqlens.shape)}")
        seqlens = cache_seqlens.to(device=q.device, dtype=_torch.int32)
    if cache_batch_idx is not None and cache_batch_idx.shape != (batch,):
        raise _error(ValueError, "cache_batch_idx", f"expected shape [{batch}], got {list(cache_batch_idx.shape)}")
    if not _torch.compiler.is_compiling():  # values: before the caches are written
        lo, hi = int(seqlens.min()) if batch else 0, int(seqlens.max()) if batch else 0
        if lo < 0 or hi + s_new > s_cache:
            raise _error(ValueError, "cache_seqlens",
                         f"entries in [{lo}, {hi}] with {s_new} new keys do not fit a cache of {s_cache} rows")
        if cache_batch_idx is not None and batch and not (
                0 <= int(cache_batch_idx.min()) and int(cache_batch_idx.max()) < k_cache.shape[0]):
            raise _error(ValueError, "cache_batch_idx", f"entries must be in [0, {k_cache.shape[0]})")
    rows = None if cache_batch_idx is None else cache_batch_idx.to(device=q.device, dtype=_torch.int64)
    start = seqlens.to(_torch.int64)
    if rotary_cos is not None:
        moving = causal or tuple(window_size) != (-1, -1)
        q_pos = start[:, None] + (_torch.arange(q.shape[1], device=q.device) if moving else 0)
        q = _rotate(q, rotary_cos, rotary_sin, q_pos.expand(batch, q.shape[1]), rotary_interleaved)
    if k is not None:
        pos = start[:, None] + _torch.arange(s_new, device=q.device)
        if rotary_cos is not None:
            k = _rotate(k, rotary_cos, rotary_sin, pos, rotary_interleaved)
        b = (_torch.arange(batch, device=q.device) if rows is None else rows)[:, None].expand(batch, s_new)
        k_cache[b, pos] = k
        v_cache[b, pos] = v
        seqlens = seqlens + s_new
    kc, vc = (k_cache, v_cache) if rows is None else (k_cache.index_select(0, rows), v_cache.index_select(0, rows))
    scale, causal, left, right, softcap, alibi_slopes, *_ = _options(
        q, 0.0, softmax_scale, causal, window_size, softcap, alibi_slopes, False)
    out, lse = _ops.attention_kvcache(q, kc, vc, seqlens, scale, causal, left, right, softcap, alibi_slopes)
    return (out, lse) if return_softmax_lse else out


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention on [B, H, N, D] tensors.

    Same meaning as PyTorch's, including is_causal's top-left alignment (query i sees keys
    j <= i) when Nq != Nk: it becomes flashattn's bottom-right window (-1, Nq - Nk) for
    Nq > Nk, and causal attention over the first Nq keys for Nq < Nk (views, no copies).
    attn_mask is not supported (NotImplementedError); with enable_gqa=False the head
    counts must match, as in PyTorch. The output is a [B, H, N, Dv] view of a
    [B, N, H, Dv] tensor, as PyTorch's flash backend returns.
    """
    if attn_mask is not None:
        raise _error(NotImplementedError, "attn_mask",
                     "arbitrary masks are not supported; use is_causal, or flashattn.torch.flash_attn_func "
                     "with window_size / alibi_slopes")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != 4:
            raise _error(ValueError, name, f"expected 4 dims [B, H, N, D], got {list(t.shape)}")
    if not enable_gqa and key.shape[1] != query.shape[1]:
        raise _error(ValueError, "key", f"has {key.shape[1]} heads and query {query.shape[1]}; "
                                        "pass enable_gqa=True for grouped-query attention")
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    nq, nk = q.shape[1], k.shape[1]
    window = (-1, -1)
    if is_causal and nq < nk:  # keys past nq are invisible to every row: drop them
        k, v = k[:, :nq], v[:, :nq]
    elif is_causal and nq > nk:
        window, is_causal = (-1, nq - nk), False
    out = flash_attn_func(q, k, v, dropout_p, scale, bool(is_causal), window)
    return out.transpose(1, 2)
