"""Forward and backward captured together in one CUDA graph (torch.cuda.graph), then
replayed on new inputs: flashattn allocates nothing on the host side and synchronises
nothing, so capture works and replays match eager results."""

import pytest

torch = pytest.importorskip("torch")

import flashattn.torch as ft  # noqa: E402


def _step(q, k, v, dout):
    out = ft.flash_attn_func(q, k, v, causal=True)
    return (out, *torch.autograd.grad(out, (q, k, v), dout))


@pytest.mark.parametrize("path", ["eager", "op"])
def test_capture_forward_and_backward(path, monkeypatch):
    if path == "op":  # the registered custom op instead of the eager fast path
        monkeypatch.setattr("flashattn._torch_ops._eager", lambda q: False)
    torch.manual_seed(0)
    shapes = [(2, 256, 8, 64), (2, 256, 2, 64), (2, 256, 2, 64), (2, 256, 8, 64)]
    q, k, v, dout = (torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in shapes)
    for t in (q, k, v):
        t.requires_grad_(True)

    side = torch.cuda.Stream()  # warm-up off the capture, as PyTorch's docs ask
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _step(q, k, v, dout)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = _step(q, k, v, dout)

    for trial in range(3):
        new = [torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in shapes]
        with torch.no_grad():
            for dst, src in zip((q, k, v, dout), new):
                dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        eager = _step(q, k, v, dout)
        for name, a, b in zip(("out", "dq", "dk", "dv"), static, eager):
            assert torch.equal(a, b), f"replay {trial}: {name} differs from eager"
