"""flashattn.forward / backward on NumPy float32 arrays: every option against the float64
oracle (tests/python/fa_oracle.py) within the contract's fp32 bounds."""

import numpy as np
import pytest

import flashattn
from fa_check import check_fp32_forward, check_fp32_grads, oracle_kwargs

# name: (B, Sq, Sk, Hq, Hkv, D, Dv, options, q multiplier)
CASES = {
    "basic": (2, 17, 17, 4, 4, 32, 32, {}, 1.0),
    "len1": (3, 1, 1, 2, 2, 16, 16, {}, 1.0),
    "causal_sq_gt_sk": (2, 113, 17, 2, 2, 16, 16, dict(causal=True), 1.0),  # rows with no key
    "causal_sq_lt_sk": (1, 17, 239, 2, 1, 32, 32, dict(causal=True), 1.0),
    "gqa": (2, 33, 40, 6, 2, 16, 16, {}, 1.0),
    "mqa": (2, 20, 20, 4, 1, 16, 16, dict(causal=True), 1.0),
    "dv_ne_dqk": (2, 17, 23, 2, 2, 32, 8, {}, 1.0),
    "head_dim_13": (1, 9, 11, 2, 1, 13, 5, {}, 1.0),
    "window": (2, 40, 40, 2, 2, 16, 16, dict(window=(8, 4)), 1.0),
    "window_left_only": (1, 30, 50, 2, 2, 16, 16, dict(window=(5, -1)), 1.0),
    "causal_and_window": (1, 50, 30, 2, 2, 16, 16, dict(causal=True, window=(6, 3)), 1.0),
    "softcap": (2, 17, 19, 2, 2, 16, 16, dict(softcap=5.0), 3.0),
    "alibi_h": (2, 17, 29, 4, 2, 16, 16, dict(alibi="h", causal=True), 1.0),
    "alibi_bh": (2, 29, 17, 4, 4, 16, 16, dict(alibi="bh"), 1.0),
    "dropout": (2, 33, 45, 2, 1, 16, 16, dict(dropout_p=0.3, seed=7, offset=3), 1.0),
    "scale": (1, 17, 17, 2, 2, 16, 16, dict(softmax_scale=0.5), 1.0),
    "scores_1000": (1, 17, 23, 2, 2, 32, 32, dict(causal=True), 60.0),
    "all_options": (2, 37, 29, 6, 3, 24, 16,
                    dict(causal=True, window=(12, 2), softcap=8.0, alibi="bh", dropout_p=0.2, seed=11,
                         offset=5, softmax_scale=0.3), 2.0),
    "long_1023": (1, 1023, 1023, 1, 1, 16, 16, dict(causal=True), 1.0),
}


def make(case, rng):
    B, Sq, Sk, Hq, Hkv, D, Dv, opts, qmul = CASES[case]
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    q, k, v = r(B, Sq, Hq, D) * np.float32(qmul), r(B, Sk, Hkv, D), r(B, Sk, Hkv, Dv)
    opts = dict(opts)
    alibi = opts.pop("alibi", None)
    if alibi:
        shape = (Hq,) if alibi == "h" else (B, Hq)
        opts["alibi_slopes"] = rng.uniform(0.05, 1.0, shape).astype(np.float32)
    return q, k, v, opts


@pytest.mark.parametrize("case", CASES)
def test_forward(case, rng):
    q, k, v, opts = make(case, rng)
    out, lse = flashattn.forward(q, k, v, return_lse=True, **opts)
    assert out.dtype == np.float32 and lse.dtype == np.float32
    assert out.shape == q.shape[:3] + (v.shape[3],) and lse.shape == (q.shape[0], q.shape[2], q.shape[1])
    check_fp32_forward(out, lse, q, k, v, ctx=case, **oracle_kwargs(opts))


@pytest.mark.parametrize("case", CASES)
def test_backward(case, rng):
    q, k, v, opts = make(case, rng)
    out, lse = flashattn.forward(q, k, v, return_lse=True, **opts)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    grads = flashattn.backward(dout, q, k, v, out, lse, **opts)
    for g, x in zip(grads, (q, k, v)):
        assert g.shape == x.shape and g.dtype == np.float32
    check_fp32_grads(grads, dout, q, k, v, ctx=case, **oracle_kwargs(opts))


@pytest.mark.parametrize("backend", ["reference", "cpu", "auto"])
def test_backends_agree_with_oracle(backend, rng):
    q, k, v, opts = make("all_options", rng)
    out, lse = flashattn.forward(q, k, v, return_lse=True, backend=backend, **opts)
    check_fp32_forward(out, lse, q, k, v, ctx=backend, **oracle_kwargs(opts))
    dout = rng.standard_normal(out.shape).astype(np.float32)
    grads = flashattn.backward(dout, q, k, v, out, lse, backend=backend, **opts)
    check_fp32_grads(grads, dout, q, k, v, ctx=backend, **oracle_kwargs(opts))


def test_return_lse_false_gives_only_out(rng):
    q, k, v, _ = make("basic", rng)
    out = flashattn.forward(q, k, v)
    assert isinstance(out, np.ndarray) and out.shape == q.shape


def test_num_threads_and_deterministic(rng):
    q, k, v, opts = make("gqa", rng)
    out, lse = flashattn.forward(q, k, v, return_lse=True, num_threads=1)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    a = flashattn.backward(dout, q, k, v, out, lse, deterministic=True, num_threads=2)
    b = flashattn.backward(dout, q, k, v, out, lse, deterministic=True, num_threads=1)
    for x, y in zip(a, b):
        assert x.tobytes() == y.tobytes()


def test_dropout_mask_is_the_contracts():
    from fa_check import fo
    for seed, offset, b, h, p in [(1, 0, 0, 0, 0.5), (2**63 + 5, 7, 3, 2, 0.1), (9, 2**40, 1, 5, 0.9)]:
        got = flashattn.dropout_mask(seed, offset, b, h, 19, 37, p)
        assert got.dtype == bool and got.shape == (19, 37)
        assert np.array_equal(got, fo.dropout_keep_mask(seed, offset, b, h, 19, 37, p))


def test_dropout_seed_and_offset_matter(rng):
    q, k, v, _ = make("basic", rng)
    run = lambda s, o: flashattn.forward(q, k, v, dropout_p=0.3, seed=s, offset=o)  # noqa: E731
    a = run(1, 0)
    assert a.tobytes() == run(1, 0).tobytes()
    assert not np.array_equal(a, run(2, 0)) and not np.array_equal(a, run(1, 1))
