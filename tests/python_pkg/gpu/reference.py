"""Attention written out in PyTorch for the GPU tests: the contract's function (bottom-right
masks, softcap, ALiBi, dropout mask) in any dtype, differentiable by autograd.

Run in float64 it is the reference; run in bf16/fp16 it is the naive low-precision
computation whose error sets the contract's bound (2x naive error + atol)."""

import torch

import flashattn


def visible(sq, sk, causal, window, device):
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)  # key position of query i
    j = torch.arange(sk, device=device)[None, :]
    vis = torch.ones(sq, sk, dtype=torch.bool, device=device)
    left, right = window
    if causal:
        vis &= j <= i
    if left >= 0:
        vis &= j >= i - left
    if right >= 0:
        vis &= j <= i + right
    return vis


def attention(q, k, v, scale=None, causal=False, window=(-1, -1), softcap=0.0, alibi=None, keep=None,
              dropout_p=0.0):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] -> out [B, Sq, Hq, Dv], computed in q's dtype.
    keep: bool [B, Hq, Sq, Sk] dropout decisions (flashattn.dropout_mask)."""
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    scale = D ** -0.5 if scale is None else scale
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)
    s = (qh @ kh.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi is not None:
        i = torch.arange(Sq, device=q.device)[:, None] + (Sk - Sq)
        j = torch.arange(Sk, device=q.device)[None, :]
        slopes = alibi.view(-1 if alibi.dim() == 2 else 1, Hq, 1, 1).to(s.dtype)
        s = s - slopes * (i - j).abs().to(s.dtype)
    vis = visible(Sq, Sk, causal, window, q.device)
    s = s.masked_fill(~vis, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # rows with no visible key: p = 0
    if keep is not None:
        scale_kept = (torch.tensor(1.0) / (1 - torch.tensor(dropout_p))).item()  # 1/(1-p) in float32, as the contract
        p = p * keep.to(p.dtype) * scale_kept
    return (p @ vh).transpose(1, 2)


def keep_mask(seed, offset, B, Hq, Sq, Sk, p, device):
    return torch.stack([torch.stack([torch.from_numpy(flashattn.dropout_mask(seed, offset, b, h, Sq, Sk, p))
                                     for h in range(Hq)]) for b in range(B)]).to(device)


def max_err(a, b):
    return (a.double() - b.double()).abs().max().item()
