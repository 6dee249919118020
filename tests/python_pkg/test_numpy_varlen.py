"""forward_varlen / backward_varlen on packed NumPy arrays against the float64 oracle."""

import numpy as np
import pytest

import flashattn
from fa_check import check_fp32_forward, check_fp32_grads, packed_lengths

CASES = {  # name: ([(Sq_b, Sk_b), ...], Hq, Hkv, D, Dv, options)
    "plain": ([(17, 17), (5, 5), (33, 33)], 2, 2, 16, 16, {}),
    "empty_and_single": ([(0, 4), (1, 1), (9, 0), (12, 7)], 4, 2, 16, 16, dict(causal=True)),
    "sq_ne_sk_causal_gqa": ([(3, 40), (40, 3), (17, 17)], 6, 2, 32, 16, dict(causal=True)),
    "window_softcap_alibi": ([(25, 31), (31, 25)], 2, 1, 16, 16, dict(window=(4, 2), softcap=6.0, alibi=True)),
    "dropout": ([(19, 23), (23, 19)], 2, 2, 16, 16, dict(dropout_p=0.25, seed=3, offset=1)),
}


def make(case, rng):
    lens, Hq, Hkv, D, Dv, opts = CASES[case]
    cq, ck, mq, mk = packed_lengths(lens)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    q, k, v = r(int(cq[-1]), Hq, D), r(int(ck[-1]), Hkv, D), r(int(ck[-1]), Hkv, Dv)
    opts = dict(opts)
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = rng.uniform(0.1, 1.0, (len(lens), Hq)).astype(np.float32)
    return q, k, v, cq, ck, mq, mk, opts


@pytest.mark.parametrize("case", CASES)
def test_forward_and_backward_varlen(case, rng):
    q, k, v, cq, ck, mq, mk, opts = make(case, rng)
    out, lse = flashattn.forward_varlen(q, k, v, cq, ck, mq, mk, return_lse=True, **opts)
    assert out.shape == q.shape[:2] + (v.shape[2],) and lse.shape == (q.shape[1], q.shape[0])
    check_fp32_forward(out, lse, q, k, v, ctx=case, cu_seqlens_q=cq, cu_seqlens_k=ck, **opts)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    grads = flashattn.backward_varlen(dout, q, k, v, out, lse, cq, ck, mq, mk, **opts)
    check_fp32_grads(grads, dout, q, k, v, ctx=case, cu_seqlens_q=cq, cu_seqlens_k=ck, **opts)


def test_loose_max_seqlen_bound(rng):
    """max_seqlen_* are upper bounds: a very loose one gives the same results (it is
    capped at the packed rows; 2**40 used to run the CPU backend out of memory)."""
    q, k, v = (rng.standard_normal((30, 2, 16)).astype(np.float32) for _ in range(3))
    cu = np.array([0, 10, 30], np.int32)
    exact = flashattn.forward_varlen(q, k, v, cu, cu, 20, 20, causal=True)
    loose = flashattn.forward_varlen(q, k, v, cu, cu, 2**40, 2**40, causal=True)
    np.testing.assert_array_equal(loose, exact)
    out, lse = flashattn.forward_varlen(q, k, v, cu, cu, 20, 20, return_lse=True)
    grads = flashattn.backward_varlen(np.ones_like(out), q, k, v, out, lse, cu, cu, 2**40, 2**40)
    exact_grads = flashattn.backward_varlen(np.ones_like(out), q, k, v, out, lse, cu, cu, 20, 20)
    for g, e in zip(grads, exact_grads):
        np.testing.assert_array_equal(g, e)


def test_varlen_equals_batched_for_equal_lengths(rng):
    B, S, H, D = 3, 21, 2, 16
    q, k, v = (rng.standard_normal((B, S, H, D)).astype(np.float32) for _ in range(3))
    cu = np.arange(0, (B + 1) * S, S, dtype=np.int32)
    flat = [x.reshape(B * S, H, D) for x in (q, k, v)]
    packed = flashattn.forward_varlen(*flat, cu, cu, S, S, causal=True)
    batched = flashattn.forward(q, k, v, causal=True)
    np.testing.assert_allclose(packed.reshape(B, S, H, D), batched, rtol=0, atol=1e-6)
