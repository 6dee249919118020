"""Helpers of the PyTorch tests: tensors from NumPy inputs, oracle checks on tensors."""

import numpy as np
import torch

from fa_check import check_fp32_forward, check_fp32_grads


def tensors(rng, *shapes, dtype=torch.float32, requires_grad=True):
    out = []
    for s in shapes:
        t = torch.from_numpy(rng.standard_normal(s).astype(np.float32)).to(dtype)
        out.append(t.requires_grad_(requires_grad))
    return out


def numpy64(*ts):
    return [t.detach().double().numpy() for t in ts]


def check_forward(out, lse, q, k, v, **kw):
    check_fp32_forward(out.detach().numpy(), None if lse is None else lse.detach().numpy(),
                       *numpy64(q, k, v), **kw)


def check_grads(out, q, k, v, dout, **kw):
    grads = torch.autograd.grad(out, (q, k, v), dout)
    check_fp32_grads([g.numpy() for g in grads], *numpy64(dout, q, k, v), **kw)
