"""forward / forward_varlen with seqused_k (attention over the filled part of a KV cache)
against the float64 oracle run on each sequence's used keys alone. The cache rows past
the used keys hold NaN: reading them would show."""

import numpy as np
import pytest

import flashattn
from fa_check import check_fp32_forward, packed_lengths

CASES = {  # name: (B, Sq, S_cache, used, Hq, Hkv, D, Dv, options)
    "decode": (4, 1, 96, [0, 1, 50, 96], 8, 2, 32, 32, {}),
    "decode_causal_window": (3, 5, 80, [5, 33, 80], 4, 4, 16, 16, dict(causal=True, window=(9, 0))),
    "prefill_causal_softcap": (2, 100, 230, [100, 230], 2, 1, 16, 8, dict(causal=True, softcap=7.0)),
    "alibi": (2, 3, 40, [17, 3], 2, 2, 16, 16, dict(alibi=True)),
}


def _poisoned_cache(rng, B, S, H, D, used):
    c = rng.standard_normal((B, S, H, D)).astype(np.float32)
    for b, n in enumerate(used):
        c[b, n:] = np.nan
    return c


@pytest.mark.parametrize("case", CASES)
def test_forward_seqused_k(case, rng):
    B, Sq, Sc, used, Hq, Hkv, D, Dv, opts = CASES[case]
    opts = dict(opts)
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = rng.uniform(0.1, 1.0, (Hq,)).astype(np.float32)
    q = rng.standard_normal((B, Sq, Hq, D)).astype(np.float32)
    kc, vc = _poisoned_cache(rng, B, Sc, Hkv, D, used), _poisoned_cache(rng, B, Sc, Hkv, Dv, used)
    out, lse = flashattn.forward(q, kc, vc, seqused_k=np.array(used, np.int32), return_lse=True, **opts)
    for b, n in enumerate(used):
        check_fp32_forward(out[b:b + 1], lse[b:b + 1], q[b:b + 1], kc[b:b + 1, :n], vc[b:b + 1, :n],
                           ctx=f"{case} sequence {b}", **opts)


def test_forward_varlen_seqused_k(rng):
    lens, used, Hq, Hkv, D = [(1, 30), (4, 50), (0, 9), (40, 60)], [30, 11, 0, 45], 4, 2, 16
    cq, ck, mq, mk = packed_lengths(lens)
    q = rng.standard_normal((int(cq[-1]), Hq, D)).astype(np.float32)
    k = rng.standard_normal((int(ck[-1]), Hkv, D)).astype(np.float32)
    v = rng.standard_normal((int(ck[-1]), Hkv, D)).astype(np.float32)
    for b, n in enumerate(used):
        k[ck[b] + n:ck[b + 1]] = np.nan
        v[ck[b] + n:ck[b + 1]] = np.nan
    out, lse = flashattn.forward_varlen(q, k, v, cq, ck, mq, mk, causal=True, return_lse=True,
                                        seqused_k=np.array(used, np.int32))
    for b, n in enumerate(used):
        rows, keys = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b] + n)
        check_fp32_forward(out[rows][None], lse[:, rows][None], q[rows][None],
                           k[keys][None], v[keys][None], causal=True, ctx=f"sequence {b}")


def test_seqused_k_refused_with_its_name():
    q = np.zeros((2, 1, 2, 8), np.float32)
    kc = np.zeros((2, 16, 2, 8), np.float32)
    out = np.full((2, 1, 2, 8), 7.0, np.float32)
    for bad, exc in ((np.array([3, 17], np.int32), ValueError), (np.array([-1, 0], np.int32), ValueError),
                     (np.array([3], np.int32), ValueError), (np.array([3.0, 4.0], np.float32), TypeError)):
        with pytest.raises(exc) as e:
            flashattn.forward(q, kc, kc, seqused_k=bad, out=out)
        assert e.value.argument == "seqused_k"
        assert (out == 7.0).all()


def test_forward_paged_equals_plain(rng):
    """forward(block_table=) on a pool of shuffled 64-key blocks (NaN elsewhere) gives the
    plain cache's result, without seqused_k (every key of the table) and with it."""
    B, Sq, S, Hq, Hkv, D, page = 2, 3, 192, 4, 2, 16, 64
    q = rng.standard_normal((B, Sq, Hq, D)).astype(np.float32)
    kc, vc = (rng.standard_normal((B, S, Hkv, D)).astype(np.float32) for _ in range(2))
    n = B * S // page
    order = rng.permutation(n + 1)[:n]
    pools = []
    for c in (kc, vc):
        pool = np.full((n + 1, page, Hkv, D), np.nan, np.float32)
        pool[order] = c.reshape(n, page, Hkv, D)
        pools.append(pool)
    table = order.reshape(B, S // page).astype(np.int32)
    for used in (None, np.array([70, 192], np.int32)):
        want = flashattn.forward(q, kc, vc, causal=True, seqused_k=used)
        got = flashattn.forward(q, *pools, causal=True, seqused_k=used, block_table=table)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
