"""flashattn.torch on CUDA tensors (bf16, fp16): forward and autograd gradients against
float64 (PyTorch's math SDPA where it can express the case, the written-out reference
elsewhere), judged by the contract's rule: error <= 2x the naive low-precision error + atol."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import flashattn  # noqa: E402
import flashattn.torch as ft  # noqa: E402
from flashattn import _torch_ops as ops  # noqa: E402

import reference as R  # noqa: E402

DTYPES = [torch.bfloat16, torch.float16]
ATOL = {torch.bfloat16: 2e-3, torch.float16: 5e-4}  # times max(1, |reference|)

CASES = {  # (B, Sq, Sk, Hq, Hkv, D, options)
    "plain_d64": (2, 256, 256, 4, 4, 64, {}),
    "causal_sq_lt_sk_d128": (2, 128, 384, 4, 4, 128, dict(causal=True)),
    "causal_sq_gt_sk": (1, 384, 128, 2, 2, 64, dict(causal=True)),  # rows with no key
    "gqa_causal": (2, 200, 200, 8, 2, 128, dict(causal=True)),
    "mqa_window": (2, 300, 300, 4, 1, 64, dict(window=(64, 32))),
    "softcap_alibi": (2, 150, 170, 4, 2, 64, dict(softcap=30.0, alibi=True)),
    "odd_lengths": (3, 17, 113, 2, 1, 128, dict(causal=True)),
}


def _inputs(rng, shapes, dtype):
    g = torch.Generator(device="cpu").manual_seed(int(rng.integers(1 << 62)))
    return [torch.randn(s, generator=g).to("cuda", dtype).requires_grad_(True) for s in shapes]


def _check(name, got, ref64, naive, dtype):
    naive_err = R.max_err(naive, ref64)
    tol = 2 * naive_err + ATOL[dtype] * max(1.0, ref64.abs().max().item())
    err = R.max_err(got, ref64)
    assert err <= tol, f"{name}: max|err| {err:.3g} > {tol:.3g} (naive {naive_err:.3g})"


def _compare(out, q, k, v, dtype, **kw):
    """out and its gradients against float64 and the naive computation in `dtype`."""
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    x64 = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
    ref = R.attention(*x64, **kw)
    ref_grads = torch.autograd.grad(ref, x64, dout.double())
    xlp = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    nv = R.attention(*xlp, **kw)
    nv_grads = torch.autograd.grad(nv, xlp, dout)
    for name, got, r, n in zip(("out", "dq", "dk", "dv"), (out, *grads), (ref, *ref_grads), (nv, *nv_grads)):
        _check(name, got, r, n, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES)
def test_autograd_against_float64(case, dtype, rng):
    B, Sq, Sk, Hq, Hkv, D, opts = CASES[case]
    q, k, v = _inputs(rng, [(B, Sq, Hq, D), (B, Sk, Hkv, D), (B, Sk, Hkv, D)], dtype)
    opts = dict(opts)
    alibi = torch.rand(B, Hq, device="cuda") * 0.5 + 0.05 if opts.pop("alibi", False) else None
    out, lse, _ = ft.flash_attn_func(q, k, v, causal=opts.get("causal", False),
                                     window_size=opts.get("window", (-1, -1)), softcap=opts.get("softcap", 0.0),
                                     alibi_slopes=alibi, return_attn_probs=True)
    assert out.dtype == dtype and out.is_cuda and lse.dtype == torch.float32 and lse.shape == (B, Hq, Sq)
    _compare(out, q, k, v, dtype, alibi=alibi, **opts)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_against_math_sdpa_float64(dtype, rng):
    """The SDPA drop-in against PyTorch's math SDPA in float64 (top-left causal, GQA)."""
    q, k, v = _inputs(rng, [(2, 8, 333, 64), (2, 2, 333, 64), (2, 2, 333, 64)], dtype)
    out = ft.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        x64 = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
        ref = F.scaled_dot_product_attention(*x64, is_causal=True, enable_gqa=True)
        ref_grads = torch.autograd.grad(ref, x64, dout.double())
    xlp = [t.detach().transpose(1, 2).clone().requires_grad_(True) for t in (q, k, v)]
    nv = R.attention(*xlp, causal=True).transpose(1, 2)
    nv_grads = [g.transpose(1, 2) for g in torch.autograd.grad(nv, xlp, dout)]
    for name, got, r, n in zip(("out", "dq", "dk", "dv"), (out, *grads), (ref, *ref_grads), (nv, *nv_grads)):
        _check(name, got, r, n, dtype)


def test_dropout_on_cuda_uses_the_contracts_mask(rng):
    q, k, v = _inputs(rng, [(2, 96, 2, 64), (2, 80, 2, 64), (2, 80, 2, 64)], torch.bfloat16)
    rng_state = torch.tensor([77, 5], dtype=torch.int64)
    out, _ = ops.fwd(q, k, v, 0.125, True, -1, -1, 0.0, None, 0.2, rng_state, False)
    keep = R.keep_mask(77, 5, 2, 2, 96, 80, 0.2, "cuda")
    _compare(out, q, k, v, torch.bfloat16, scale=0.125, causal=True, keep=keep, dropout_p=0.2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_varlen_against_float64(dtype, rng):
    lens = [(100, 130), (0, 7), (1, 1), (257, 200)]
    cq = torch.tensor([0] + [sum(a for a, _ in lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32)
    ck = torch.tensor([0] + [sum(b for _, b in lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32)
    q, k, v = _inputs(rng, [(int(cq[-1]), 4, 128), (int(ck[-1]), 2, 128), (int(ck[-1]), 2, 128)], dtype)
    out = ft.flash_attn_varlen_func(q, k, v, cq.cuda(), ck.cuda(), 257, 200, causal=True)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    for b, (lq, lk) in enumerate(lens):  # each sequence on its own, batched, B = 1
        sq, sk = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
        if lq == 0:  # keys no query sees get zero gradients
            assert not grads[1][sk].any() and not grads[2][sk].any()
            continue
        got = (out[sq], grads[0][sq], grads[1][sk], grads[2][sk])
        x64 = [t.detach()[s][None].double().requires_grad_(True) for t, s in ((q, sq), (k, sk), (v, sk))]
        ref = R.attention(*x64, causal=True)
        refs = (ref, *torch.autograd.grad(ref, x64, dout[sq][None].double()))
        xlp = [t.detach()[s][None].clone().requires_grad_(True) for t, s in ((q, sq), (k, sk), (v, sk))]
        nv = R.attention(*xlp, causal=True)
        nvs = (nv, *torch.autograd.grad(nv, xlp, dout[sq][None]))
        for name, g, r, n in zip(("out", "dq", "dk", "dv"), got, refs, nvs):
            _check(f"seq{b} {name}", g[None], r, n, dtype)


def test_runs_on_the_current_stream(rng):
    q, k, v = _inputs(rng, [(2, 512, 4, 64)] * 3, torch.bfloat16)
    expected = ft.flash_attn_func(q, k, v, causal=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = ft.flash_attn_func(q, k, v, causal=True)
        got_generic = flashattn.forward(q.detach(), k.detach(), v.detach(), causal=True)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert torch.equal(got, expected) and torch.equal(got_generic, expected)


def _close(name, got, want, rel):
    err, mag = R.max_err(got, want), want.abs().max().item()
    assert err <= rel * max(mag, 1e-30), f"{name}: max|err| {err:.3g} > {rel} * {mag:.3g}"


def test_compile_fullgraph_inductor_on_cuda():
    from test_torch_compile import Block  # the CPU tests' block, on the GPU in bf16
    torch.manual_seed(0)
    model = Block(dim=256, heads=4).to("cuda", torch.bfloat16)
    x = torch.randn(4, 300, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4, 300, 256, device="cuda")

    def run(m):
        model.zero_grad()
        y = m(x)
        (y.float() * w).sum().backward()
        return y.detach(), [p.grad.clone() for p in model.parameters()]

    torch._dynamo.reset()
    y_c, g_c = run(torch.compile(model, fullgraph=True))  # Inductor
    y_e, g_e = run(model)
    _close("y", y_c, y_e, 2e-2)
    for i, (a, b) in enumerate(zip(g_c, g_e)):
        _close(f"grad {i}", a, b, 5e-2)


def test_kvcache_on_cuda_matches_the_cpu(rng):
    """flash_attn_with_kvcache on CUDA tensors against the same call on CPU tensors, whose
    results the CPU tests check against float64: batched caches, a paged pool, picked
    caches (cache_batch_idx), and new rows that are views of the cache itself."""
    g = torch.Generator().manual_seed(int(rng.integers(1 << 62)))
    B, Hq, Hkv, D, S = 4, 16, 4, 128, 704
    q = torch.randn(B, 3, Hq, D, generator=g).bfloat16()
    kc, vc = (torch.randn(B, S, Hkv, D, generator=g).bfloat16() for _ in range(2))
    k, v = (torch.randn(B, 3, Hkv, D, generator=g).bfloat16() for _ in range(2))
    lens = torch.tensor([0, 1, 300, 697], dtype=torch.int32)
    ang = torch.rand(S, 32, generator=g) * 6.3
    kw = dict(cache_seqlens=lens, causal=True, rotary_cos=ang.cos(), rotary_sin=ang.sin(), return_softmax_lse=True)
    on_gpu = {n: (x.cuda() if torch.is_tensor(x) else x) for n, x in kw.items()}

    def both(cpu_caches, **extra):  # the same call on CPU and CUDA: (out, lse, caches) of each
        gpu_caches = [t.cuda() for t in cpu_caches]
        gx = {n: (x.cuda() if torch.is_tensor(x) else x) for n, x in extra.items()}
        out_c, lse_c = ft.flash_attn_with_kvcache(q, *cpu_caches, k, v, **kw, **extra)
        out_g, lse_g = ft.flash_attn_with_kvcache(q.cuda(), *gpu_caches, k.cuda(), v.cuda(), **on_gpu, **gx)
        # Rotary on either side; a pool's spare blocks hold NaN.
        torch.testing.assert_close(gpu_caches[0].cpu(), cpu_caches[0], atol=1e-2, rtol=1e-2, equal_nan=True)
        assert torch.equal(gpu_caches[1].cpu().view(torch.int16), cpu_caches[1].view(torch.int16))
        torch.testing.assert_close(out_g.float().cpu(), out_c.float(), atol=2e-2, rtol=2e-2)
        torch.testing.assert_close(lse_g.cpu(), lse_c, atol=1e-3, rtol=1e-3)
        return out_g

    out_plain = both([kc.clone(), vc.clone()])
    # Paged: the same rows in pages of 64 of a shuffled pool with spare blocks.
    page, nb = 64, S // 64
    perm = torch.randperm(B * nb + 5, generator=g)[:B * nb].reshape(B, nb).to(torch.int32)
    pool = [torch.full((B * nb + 5, page, Hkv, D), float("nan")).bfloat16() for _ in range(2)]
    for t, src in zip(pool, (kc, vc)):
        t[perm.flatten().long()] = src.reshape(B * nb, page, Hkv, D)
    out_paged = both(pool, block_table=perm)
    torch.testing.assert_close(out_paged, out_plain, atol=0, rtol=0)
    # Picked caches: sequence b uses cache 3 - b.
    both([kc.flip(0).clone(), vc.flip(0).clone()], cache_batch_idx=torch.tensor([3, 2, 1, 0], dtype=torch.int32))
    # New rows that are a view of the cache itself (rows 0..2 of a one-sequence cache, going
    # to rows 2..4): the package hands the library copies (it copies on the GPU with no stage).
    gk, gv = kc[:1].cuda(), vc[:1].cuda()
    at2 = torch.tensor([2], dtype=torch.int32, device="cuda")
    want = ft.flash_attn_with_kvcache(q[:1].cuda(), gk.clone(), gv.clone(), gk[:, :3].clone(), gv[:, :3].clone(),
                                      cache_seqlens=at2, causal=True)
    got = ft.flash_attn_with_kvcache(q[:1].cuda(), gk, gv, gk[:, :3], gv[:, :3], cache_seqlens=at2, causal=True)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
