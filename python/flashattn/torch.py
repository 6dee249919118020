"""flashattn for PyTorch: autograd, torch.compile and flash_attn-compatible functions.

    from flashattn.torch import flash_attn_func      # was: from flash_attn import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)      # q [B, S, H, D] on CPU or CUDA

The functions below have flash_attn 2.x's names, argument names, defaults and return
values. Differences:
  * return_attn_probs=True returns (out, softmax_lse, None): the probabilities are never
    materialised (flash_attn returns them only with dropout, for testing).
  * Dropout draws its seed from PyTorch's default CPU generator, so torch.manual_seed
    makes it reproducible. A captured CUDA graph replays the seed it was captured with.
  * flash_attn_with_kvcache runs on CPU and CUDA tensors, paged caches (pages of a
    multiple of 64 keys) included.
    flash_attn_varlen_func's block_table is not supported.
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


def _window(window_size):
    try:
        left, right = (int(w) for w in window_size)
    except (TypeError, ValueError):
        raise _error(ValueError, "window_size", f"expected (left, right), got {window_size!r}") from None
    return left, right


def _options(q, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic):
    """The op's trailing arguments: the scale resolved, a fresh seed when dropping out."""
    # (A head dim of 0 is the library's to refuse, by name: no division here.)
    d = q.shape[-1]
    scale = (d ** -0.5 if d > 0 else 1.0) if softmax_scale is None else float(softmax_scale)
    left, right = _window(window_size)
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


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
                            block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1),
                            softcap=0.0, rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False):
    """Attention of q [B, Sq, Hq, D] over a KV cache k_cache / v_cache [B_cache, S_cache, Hkv, D]
    whose sequence b holds cache_seqlens[b] keys (int or int32 [B]; None: S_cache).

    With k, v [B, S_new, Hkv, D] the new keys are first written into the caches in place at
    rows cache_seqlens[b] .. cache_seqlens[b] + S_new - 1, and attention covers them too.
    rotary_cos / rotary_sin [S_ro >= S_cache, R / 2] (with k) rotate the first R dims of q
    and the new k at their positions (q at cache_seqlens[b] + i when causal or windowed,
    else all at cache_seqlens[b]). Without cache_batch_idx sequence b uses cache b (the
    first B of B_cache); cache_batch_idx (int [B]) picks each sequence's cache (this copies
    the picked caches per call). Masks align at the end of the used keys. Returns out
    [B, Sq, Hq, Dv], or (out, softmax_lse [B, Hq, Sq]). num_splits is accepted and
    ignored (the library picks its own key splits). With block_table (int32 [B, max_blocks])
    the caches are pools [num_blocks, page_size, Hkv, D] (page_size a multiple
    of 64) and key j of sequence b is row j % page_size of block block_table[b, j //
    page_size]. Every argument is checked before a cache is written. Inference only: no
    gradients flow through it. cache_leftpad raises NotImplementedError.
    """
    if cache_leftpad is not None:
        raise _error(NotImplementedError, "cache_leftpad", "left-padded caches are not supported")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dim() != 4:
            raise _error(ValueError, name, f"expected 4 dims, got {list(t.shape)}")
    batch, s_cache = q.shape[0], k_cache.shape[1]
    if block_table is not None:
        if cache_batch_idx is not None:
            raise _error(NotImplementedError, "cache_batch_idx", "does not go with a paged cache (block_table)")
        if not _torch.is_tensor(block_table) or block_table.dtype != _torch.int32 or block_table.dim() != 2 \
                or block_table.shape[0] != batch:
            raise _error(ValueError if _torch.is_tensor(block_table) and block_table.dtype == _torch.int32 else TypeError,
                         "block_table", f"expected an int32 tensor [{batch}, max_blocks], got "
                                        f"{getattr(block_table, 'dtype', type(block_table))} "
                                        f"{list(getattr(block_table, 'shape', []))}")
        s_cache = k_cache.shape[1] * block_table.shape[1]  # keys a sequence can hold
    if v_cache.shape[:3] != k_cache.shape[:3]:
        raise _error(ValueError, "v_cache", f"shape {list(v_cache.shape)} does not match k_cache's "
                                            f"{list(k_cache.shape)} but in the head dim")
    if cache_batch_idx is None and block_table is None and k_cache.shape[0] < batch:
        raise _error(ValueError, "k_cache", f"holds {k_cache.shape[0]} caches for {batch} sequences; "
                                            "pass cache_batch_idx to share them")
    if (k is None) != (v is None):
        raise _error(ValueError, "k" if k is None else "v", "k and v are given together or not at all")
    s_new = 0
    if k is not None:
        s_new = k.shape[1] if k.dim() == 4 else -1
        for name, t, c in (("k", k, k_cache), ("v", v, v_cache)):
            if t.dim() != 4 or t.shape[0] != batch or t.shape[1] != s_new or t.shape[2:] != c.shape[2:]:
                raise _error(ValueError, name, f"expected [{batch}, S_new, {c.shape[2]}, {c.shape[3]}] like "
                                               f"its cache (S_new as k's), got {list(t.shape)}")
            if t.dtype != c.dtype:
                raise _error(TypeError, name, f"dtype {t.dtype} differs from its cache's {c.dtype}")
            if t.device != c.device:
                raise _error(ValueError, name, f"is on {t.device} but its cache on {c.device}")
        if cache_seqlens is None:
            raise _error(ValueError, "cache_seqlens", "is needed with k and v: where the new keys go")
    if cache_seqlens is None or isinstance(cache_seqlens, int):
        n = s_cache if cache_seqlens is None else cache_seqlens
        seqlens = _torch.full((batch,), n, dtype=_torch.int32, device=q.device)
    else:
        if not _torch.is_tensor(cache_seqlens) or cache_seqlens.dtype != _torch.int32:
            raise _error(TypeError, "cache_seqlens", f"expected an int or an int32 tensor, got "
                                                     f"{getattr(cache_seqlens, 'dtype', type(cache_seqlens))}")
        if cache_seqlens.shape != (batch,):
            raise _error(ValueError, "cache_seqlens", f"expected shape [{batch}], got {list(cache_seqlens.shape)}")
        seqlens = cache_seqlens.to(q.device)
    rows = None
    if cache_batch_idx is not None:
        if not _torch.is_tensor(cache_batch_idx) or cache_batch_idx.dtype.is_floating_point or cache_batch_idx.dtype == _torch.bool:
            raise _error(TypeError, "cache_batch_idx", "expected an integer tensor")
        if cache_batch_idx.shape != (batch,):
            raise _error(ValueError, "cache_batch_idx", f"expected shape [{batch}], got {list(cache_batch_idx.shape)}")
        rows = cache_batch_idx.to(device=q.device, dtype=_torch.int64)
    # A window side as long as the cache bounds nothing (flash_attn's rule, which also
    # decides where q's rotation sits).
    left, right = (-1 if w >= s_cache else w for w in _window(window_size))
    if (rotary_cos is None) != (rotary_sin is None):
        raise _error(ValueError, "rotary_cos", "rotary_cos and rotary_sin are given together or not at all")
    q, k, v = (None if t is None else t.detach() for t in (q, k, v))
    if rotary_cos is not None:
        if k is None:
            raise _error(ValueError, "rotary_cos", "rotary embedding needs the new keys k and v")
        if rotary_cos.dim() != 2 or rotary_sin.shape != rotary_cos.shape:
            raise _error(ValueError, "rotary_sin", f"rotary_cos {list(rotary_cos.shape)} and rotary_sin "
                                                   f"{list(rotary_sin.shape)} must both be [S_ro, R / 2]")
        if 2 * rotary_cos.shape[1] > q.shape[3] or rotary_cos.shape[0] < s_cache:
            raise _error(ValueError, "rotary_cos", f"expected [S_ro >= {s_cache}, R / 2 <= {q.shape[3] // 2}], "
                                                   f"got {list(rotary_cos.shape)}")
        start = seqlens.long()[:, None].clamp(0, s_cache - 1)  # bad values are refused before any write
        moving = causal or (left, right) != (-1, -1)
        q_pos = (start + _torch.arange(q.shape[1], device=q.device)) if moving else start.expand(batch, q.shape[1])
        k_pos = start + _torch.arange(s_new, device=q.device)
        q = _rotate(q, rotary_cos, rotary_sin, q_pos.clamp(max=rotary_cos.shape[0] - 1), rotary_interleaved)
        k = _rotate(k, rotary_cos, rotary_sin, k_pos.clamp(max=rotary_cos.shape[0] - 1), rotary_interleaved)
    scale, causal, left, right, softcap, alibi_slopes, *_ = _options(
        q, 0.0, softmax_scale, causal, (left, right), softcap, alibi_slopes, False)
    out, lse = _ops.attention_kvcache(q, k_cache, v_cache, k, v, seqlens, rows, block_table, scale, causal,
                                      left, right, softcap, alibi_slopes)
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
