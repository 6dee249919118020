"""flashattn inside a Hugging Face transformers model, through its attention registry.

    python examples/hf_llama_attention.py            # CUDA (bf16) when available, else CPU (fp32)

Needs transformers 4.53 or newer (its attention and mask-function registries).

A small Llama (random weights, nothing downloaded) runs with its own "sdpa" attention and with
flashattn (registered as "fattn"); both are compared with the same model in float64 by the contract's rule: the
flashattn logits' error is at most 2x the error of the model's own SDPA path in the same dtype,
plus a small atol. Once without padding (causal attention, flash_attn_func) and once with
left padding (the padding mask becomes cu_seqlens: flash_attn_varlen_func). Exits 1 on failure.
"""

import argparse
import copy
import sys

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from flashattn.torch import flash_attn_func, flash_attn_varlen_func


def flashattn_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention signature: query [B, H, Sq, D], key/value [B, Hkv, Sk, D] ->
    ([B, Sq, H, D], no weights). attention_mask is None (no padding) or a 2D bool padding
    mask [B, Sk], as the flash_attention_2 mask function (registered below) produces."""
    if kwargs.get("sliding_window") is not None:
        raise NotImplementedError("flashattn example: sliding_window is not wired up here")
    causal = bool(kwargs.get("is_causal", getattr(module, "is_causal", True)))
    softcap = kwargs.get("softcap") or 0.0
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [B, S, H, D] views, no copies
    if attention_mask is None:
        return flash_attn_func(q, k, v, dropout, scaling, causal, softcap=softcap), None

    # Padding: keep the real tokens only, as packed sequences described by cu_seqlens.
    B, Sq, H, D = q.shape
    keep_k = attention_mask.bool()
    keep_q = keep_k[:, -Sq:]
    lens_q, lens_k = keep_q.sum(1, dtype=torch.int32), keep_k.sum(1, dtype=torch.int32)
    cu_q, cu_k = (F.pad(n.cumsum(0, dtype=torch.int32), (1, 0)) for n in (lens_q, lens_k))
    idx_q, idx_k = keep_q.flatten().nonzero().squeeze(1), keep_k.flatten().nonzero().squeeze(1)
    out = flash_attn_varlen_func(q.flatten(0, 1)[idx_q], k.flatten(0, 1)[idx_k], v.flatten(0, 1)[idx_k],
                                 cu_q, cu_k, int(lens_q.max()), int(lens_k.max()), dropout, scaling, causal,
                                 softcap=softcap)
    full = out.new_zeros(B * Sq, H, out.shape[-1]).index_copy(0, idx_q, out)
    return full.view(B, Sq, H, -1), None


# transformers treats every implementation whose name contains "flash" as the flash_attn
# package (and tries to import it), so the registered name avoids that word.
IMPL = "fattn"


def register():
    AttentionInterface.register(IMPL, flashattn_attention)
    # Same masks as flash_attn 2: None without padding, else the 2D padding mask.
    AttentionMaskInterface.register(IMPL, ALL_MASK_ATTENTION_FUNCTIONS["flash_attention_2"])


def logits(model, impl, ids, mask):
    model.set_attn_implementation(impl)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def check(name, model, model64, ids, mask, atol):
    ref = logits(model64, "sdpa", ids, mask).double()
    sdpa, flash = logits(model, "sdpa", ids, mask).double(), logits(model, IMPL, ids, mask).double()
    real = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()
    ref, sdpa, flash = ref[real], sdpa[real], flash[real]  # padding positions mean nothing
    naive_err, err = (sdpa - ref).abs().max().item(), (flash - ref).abs().max().item()
    tol = 2 * naive_err + atol * max(1.0, ref.abs().max().item())
    ok = err <= tol
    print(f"{name:12s} flashattn max|err| {err:.3g}, sdpa {naive_err:.3g}, bound {tol:.3g}: {'ok' if ok else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32  # CUDA kernels: fp16/bf16
    atol = 1e-2 if dtype == torch.bfloat16 else 1e-5

    register()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                         max_position_embeddings=1024, attn_implementation="sdpa")
    model64 = LlamaForCausalLM(config).to(a.device, torch.float64).eval()
    model = copy.deepcopy(model64).to(dtype)

    ids = torch.randint(0, config.vocab_size, (a.batch, a.seq), device=a.device)
    mask = torch.ones_like(ids)
    mask[0, : a.seq // 3] = 0  # left padding in the first sequence
    ok = check("no padding", model, model64, ids, None, atol)
    ok &= check("left padding", model, model64, ids, mask, atol)

    # Training works too: loss.backward() goes through flashattn's backward.
    model.set_attn_implementation(IMPL)
    model.train()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    grads_finite = all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    print(f"training step: loss {loss.item():.4f}, gradients finite: {grads_finite}")
    ok &= grads_finite
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
