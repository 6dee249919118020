"""torch.compile(fullgraph=True) traces flashattn.torch without graph breaks (fake
implementations, autograd through the registered backward op).

The CPU tests compile with the aot_eager backend (tracing, fake tensors and AOT autograd,
without Inductor's slow C++ code generation on a 2-core CI machine); set
FLASHATTN_TEST_INDUCTOR=1 to add Inductor. The GPU tests compile with Inductor.
"""

import os

import pytest

torch = pytest.importorskip("torch")

import flashattn.torch as ft  # noqa: E402

BACKENDS = ["aot_eager"] + (["inductor"] if os.environ.get("FLASHATTN_TEST_INDUCTOR") == "1" else [])


class Block(torch.nn.Module):
    """A small pre-norm attention block: qkv projection, packed attention, output projection."""

    def __init__(self, dim=64, heads=4, attention="flash"):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(self.norm(x)).view(B, N, 3, self.heads, C // self.heads)
        if self.attention == "flash":
            o = ft.flash_attn_qkvpacked_func(qkv, causal=True)
        else:  # the SDPA drop-in on [B, H, N, D]
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            o = ft.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        return x + self.proj(o.reshape(B, N, C))


def _grads(model, x):
    model.zero_grad()
    y = model(x)
    y.square().mean().backward()
    return y.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attention", ["flash", "sdpa"])
def test_block_compiles_fullgraph(attention, backend):
    torch.manual_seed(0)
    model = Block(attention=attention)
    x = torch.randn(2, 33, 64)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    y_c, g_c = _grads(compiled, x)
    y_e, g_e = _grads(model, x)
    torch.testing.assert_close(y_c, y_e, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_c, g_e):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_varlen_and_dropout_compile_fullgraph():
    torch.manual_seed(0)
    q, k, v = (torch.randn(30, 2, 16, requires_grad=True) for _ in range(3))
    cu = torch.tensor([0, 12, 30], dtype=torch.int32)

    def f(q, k, v):
        a = ft.flash_attn_varlen_func(q, k, v, cu, cu, 18, 18, causal=True)
        b = ft.flash_attn_func(q[None], k[None], v[None], dropout_p=0.1)[0]
        return a + b

    torch._dynamo.reset()
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    out.sum().backward()
    assert out.shape == (30, 2, 16) and q.grad is not None and torch.isfinite(q.grad).all()
