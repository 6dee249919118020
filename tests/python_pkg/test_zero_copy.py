"""Zero copies: strided inputs are read in place, outputs are written in place, and any
framework's arrays come back as that framework's arrays."""

import numpy as np
import pytest

import flashattn
from fa_check import check_fp32_forward, check_fp32_grads


def test_strided_views_are_read_in_place(rng):
    # q: every other row of a wider buffer; k, v: [B, H, S, D] memory seen as [B, S, H, D].
    big = rng.standard_normal((2, 34, 4, 40)).astype(np.float32)
    q = big[:, ::2, :, 4:36]
    kh, vh = (rng.standard_normal((2, 2, 23, 32)).astype(np.float32) for _ in range(2))
    k, v = kh.transpose(0, 2, 1, 3), vh.transpose(0, 2, 1, 3)
    assert not q.flags.c_contiguous and not k.flags.c_contiguous
    out, lse = flashattn.forward(q, k, v, causal=True, return_lse=True)
    check_fp32_forward(out, lse, q, k, v, causal=True)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    check_fp32_grads(flashattn.backward(dout, q, k, v, out, lse, causal=True), dout, q, k, v, causal=True)


def test_read_only_inputs(rng):
    q, k, v = (rng.standard_normal((1, 9, 2, 16)).astype(np.float32) for _ in range(3))
    for x in (q, k, v):
        x.flags.writeable = False
    check_fp32_forward(flashattn.forward(q, k, v), None, q, k, v)


def test_output_written_in_place(rng):
    q, k, v = (rng.standard_normal((2, 9, 2, 16)).astype(np.float32) for _ in range(3))
    buf = np.full((2, 9, 2, 24), 5.0, np.float32)
    out = buf[..., 4:20]  # a strided view: the columns around it must stay untouched
    res = flashattn.forward(q, k, v, out=out)
    assert res is out
    check_fp32_forward(buf[..., 4:20], None, q, k, v)
    assert (buf[..., :4] == 5.0).all() and (buf[..., 20:] == 5.0).all()

    lse_unused = flashattn.forward(q, k, v, return_lse=True)[1]
    dq, dk, dv = (np.empty_like(x) for x in (q, k, v))
    grads = flashattn.backward(out, q, k, v, out, lse_unused, dq=dq, dk=dk, dv=dv)
    assert grads[0] is dq and grads[1] is dk and grads[2] is dv


def test_read_only_output_is_refused(rng):
    q = rng.standard_normal((1, 4, 1, 8)).astype(np.float32)
    out = np.empty_like(q)
    out.flags.writeable = False
    with pytest.raises(ValueError) as info:
        flashattn.forward(q, q, q, out=out)
    assert info.value.argument == "out"


def test_torch_tensors_in_and_out(rng):
    torch = pytest.importorskip("torch")
    qn, kn, vn = (rng.standard_normal((2, 11, 2, 16)).astype(np.float32) for _ in range(3))
    q, k, v = (torch.from_numpy(x) for x in (qn, kn, vn))
    q.requires_grad_(True)  # the generic API reads tensors that require grad too
    out, lse = flashattn.forward(q, k.transpose(1, 2).contiguous().transpose(1, 2), v, return_lse=True)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and lse.dtype == torch.float32
    check_fp32_forward(out.numpy(), lse.numpy(), qn, kn, vn)
    dest = torch.empty(2, 11, 2, 16)
    ptr = dest.data_ptr()
    res = flashattn.forward(q, k, v, out=dest)
    assert res is dest and dest.data_ptr() == ptr
    check_fp32_forward(dest.numpy(), None, qn, kn, vn)
    torch_bf16 = flashattn.forward(*(x.detach().bfloat16() for x in (q, k, v)))
    assert torch_bf16.dtype == torch.bfloat16


def test_jax_arrays_on_cpu(rng):
    jax = pytest.importorskip("jax")
    cpu = jax.devices("cpu")[0]  # JAX's default device may be a GPU
    qn, kn, vn = (rng.standard_normal((1, 9, 2, 16)).astype(np.float32) for _ in range(3))
    out = flashattn.forward(*(jax.device_put(x, cpu) for x in (qn, kn, vn)), causal=True)
    assert isinstance(out, jax.Array)
    check_fp32_forward(np.asarray(out), None, qn, kn, vn, causal=True)
    bf = flashattn.forward(*(jax.device_put(x.astype(jax.numpy.bfloat16), cpu) for x in (qn, kn, vn)))
    assert isinstance(bf, jax.Array) and bf.dtype == jax.numpy.bfloat16
