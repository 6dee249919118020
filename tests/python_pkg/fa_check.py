"""Shared by the Python package tests: the float64 oracle, random inputs, the contract's bounds.

Inputs are fresh random normals every run; the seed is printed in failures and can be
pinned with $FLASHATTN_TEST_SEED (as in tests/cli).
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "python"))
import fa_oracle as fo  # noqa: E402,F401

SEED = int(os.environ.get("FLASHATTN_TEST_SEED", int.from_bytes(os.urandom(4), "little")))

# The contract's fp32 bounds: (out/lse rel, per-|s| rel, grad rel, grad per-|s| rel).
FP32 = (1e-5, 2e-7, 1e-4, 2e-6)


def rng_for(nodeid: str) -> np.random.Generator:
    return np.random.default_rng([SEED, zlib.crc32(nodeid.encode())])


def bound(ref, rel, srel=0.0, smax=0.0):
    finite = ref[np.isfinite(ref)]
    mag = max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0)
    return rel * mag + srel * smax * mag


def assert_close(name, got, ref, tol, ctx=""):
    """max |got - ref| <= tol, with -inf (fully masked LSE rows) matching exactly."""
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref.shape, f"{name}: shape {got.shape} != {ref.shape} {ctx}"
    assert not np.isnan(got).any(), f"{name}: NaN {ctx} (seed {SEED})"
    assert np.array_equal(np.isneginf(got), np.isneginf(ref)), f"{name}: -inf pattern differs {ctx} (seed {SEED})"
    fin = ~np.isneginf(ref)
    err = float(np.max(np.abs(got[fin] - ref[fin]))) if fin.any() else 0.0
    assert err <= tol, f"{name}: max|err| {err:.3g} > {tol:.3g} {ctx} (seed {SEED})"


def check_fp32_forward(out, lse, q, k, v, ctx="", **kw):
    ref_out, ref_lse = fo.attention_forward(q, k, v, **kw)
    smax = fo.max_abs_score(q, k, v, **kw)
    rel, srel, _, _ = FP32
    assert_close("out", out, ref_out, bound(ref_out, rel, srel, smax), ctx)
    if lse is not None:
        assert_close("lse", lse, ref_lse, bound(ref_lse, rel, srel, smax), ctx)


def check_fp32_grads(grads, dout, q, k, v, ctx="", **kw):
    refs = fo.attention_backward(dout, q, k, v, **kw)
    smax = fo.max_abs_score(q, k, v, **kw)
    _, _, rel, srel = FP32
    for name, g, r in zip(("dq", "dk", "dv"), grads, refs):
        assert_close(name, g, r, bound(r, rel, srel, smax), ctx)


def oracle_kwargs(opts: dict) -> dict:
    """flashattn.forward's keyword arguments -> fa_oracle's."""
    return {k: v for k, v in opts.items() if k in (
        "softmax_scale", "causal", "window", "softcap", "alibi_slopes", "dropout_p", "seed", "offset",
        "cu_seqlens_q", "cu_seqlens_k")}


def packed_lengths(lens):
    """[(Sq_b, Sk_b), ...] -> int32 cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k."""
    cq = np.concatenate([[0], np.cumsum([a for a, _ in lens])]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum([b for _, b in lens])]).astype(np.int32)
    return cq, ck, max(a for a, _ in lens), max(b for _, b in lens)
