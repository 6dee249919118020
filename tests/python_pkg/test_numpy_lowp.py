"""fp16 (and bf16 through ml_dtypes) on NumPy arrays, judged by the contract's rule: the
error against float64 is at most 2x the error of the naive computation done in the same
low precision, plus a small atol."""

import numpy as np
import pytest

import flashattn
from fa_check import SEED, assert_close, fo

CASES = {  # (B, Sq, Sk, Hq, Hkv, D, causal, window)
    "basic": (2, 33, 33, 2, 2, 32, False, (-1, -1)),
    "causal_gqa": (2, 40, 57, 4, 2, 32, True, (-1, -1)),
    "window_sq_gt_sk": (1, 64, 48, 2, 1, 16, False, (8, 8)),
}


def _dtypes():
    out = [pytest.param(np.float16, 1e-3, id="f16")]
    try:
        import ml_dtypes
        out.append(pytest.param(ml_dtypes.bfloat16, 8e-3, id="bf16"))
    except ImportError:
        out.append(pytest.param(None, 0, id="bf16", marks=pytest.mark.skip("bf16 on NumPy needs ml_dtypes")))
    return out


def naive(q, k, v, dout, causal, window, dt):
    """softmax(q k^T) v and its gradients, every step rounded to dt (no upcasts)."""
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    g = Hq // Hkv
    scale = dt(1 / np.sqrt(D))
    vis = fo.visible_mask(Sq, Sk, causal, window)
    out, dq, dk, dv = (np.zeros(x.shape) for x in (q, q, k, v))
    for b in range(B):
        for h in range(Hq):
            qh, kh, vh, do = q[b, :, h], k[b, :, h // g], v[b, :, h // g], dout[b, :, h]
            s = np.where(vis, (qh @ kh.T) * scale, dt(-np.inf)).astype(dt)
            m = np.max(s, axis=1, keepdims=True)
            e = np.exp((s - np.where(np.isfinite(m), m, dt(0))).astype(dt)).astype(dt)
            tot = e.sum(axis=1, keepdims=True, dtype=dt)
            p = np.where(tot > 0, e / np.where(tot > 0, tot, dt(1)), dt(0)).astype(dt)  # no key: p = 0
            o = (p @ vh).astype(dt)
            dp = (do @ vh.T).astype(dt)
            ds = (p * (dp - (do * o).sum(axis=1, keepdims=True, dtype=dt))).astype(dt)
            out[b, :, h] = o
            dq[b, :, h] = (ds @ kh).astype(dt) * scale
            dk[b, :, h // g] += (ds.T @ qh).astype(dt) * scale
            dv[b, :, h // g] += (p.T @ do).astype(dt)
    return out, (dq, dk, dv)


@pytest.mark.parametrize("dt,atol", _dtypes())
@pytest.mark.parametrize("case", CASES)
def test_lowp_forward_and_backward(case, dt, atol, rng):
    B, Sq, Sk, Hq, Hkv, D, causal, window = CASES[case]
    q, k, v = (rng.standard_normal(s).astype(dt) for s in ((B, Sq, Hq, D), (B, Sk, Hkv, D), (B, Sk, Hkv, D)))
    dout = rng.standard_normal((B, Sq, Hq, D)).astype(dt)
    out, lse = flashattn.forward(q, k, v, causal=causal, window=window, return_lse=True)
    assert out.dtype == dt and lse.dtype == np.float32
    grads = flashattn.backward(dout, q, k, v, out, lse, causal=causal, window=window)
    assert all(g.dtype == dt for g in grads)

    x64 = [np.asarray(a, dtype=np.float64) for a in (q, k, v, dout)]
    ref_out, ref_lse = fo.attention_forward(*x64[:3], causal=causal, window=window)
    ref_grads = fo.attention_backward(x64[3], *x64[:3], causal=causal, window=window)
    nv_out, nv_grads = naive(q, k, v, dout, causal, window, dt)
    ctx = f"[{case} {np.dtype(dt).name}]"
    for name, got, ref, nv in zip(("out", "dq", "dk", "dv"), (out, *grads), (ref_out, *ref_grads),
                                  (nv_out, *nv_grads)):
        naive_err = float(np.max(np.abs(nv - ref)))
        mag = max(1.0, float(np.max(np.abs(ref))))
        assert_close(name, got, ref, 2 * naive_err + atol * mag, f"{ctx} naive err {naive_err:.3g} (seed {SEED})")
    assert_close("lse", lse, ref_lse, 1e-3 * max(1.0, float(np.max(np.abs(ref_lse[np.isfinite(ref_lse)])))), ctx)
