"""flashattn for PyTorch: autograd, torch.compile and flash_attn-compatible functions.

    from flashattn.torch import flash_attn_func      # was: from flash_attn import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)      # q [B, S, H, D] on CPU or CUDA

The functions below have flash_attn 2.x's names, argument names, defaults and return
values. Differences:
  * return_attn_probs=True returns (out, softmax_lse, None): the probabilities are never
    materialised (flash_attn returns them only with dropout, for testing).
  * Dropout draws its seed from PyTorch's default CPU generator, so torch.manual_seed
    makes it reproducible. A captured CUDA graph replays the seed it was captured with.
  * flash_attn_varlen_func's block_table (paged KV cache) is not supported.
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
           "flash_attn_varlen_kvpacked_func", "scaled_dot_product_attention"]


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
