"""Independent float64 NumPy oracle for the flashattn attention contract.

Written from docs/contract.md only (not from the C++ sources). Everything is computed in
float64 from the given inputs; it is meant to be slow, small and obviously right.

Layouts (as in the contract):
  batched: q [B, Sq, Hq, Dqk], k [B, Sk, Hkv, Dqk], v [B, Sk, Hkv, Dv]
           -> out [B, Sq, Hq, Dv], lse [B, Hq, Sq]
  packed (cu_seqlens_q / cu_seqlens_k given, int [B+1]):
           q [total_q, Hq, Dqk], k [total_k, Hkv, Dqk], v [total_k, Hkv, Dv]
           -> out [total_q, Hq, Dv], lse [Hq, total_q]

Order of the score pipeline for row i, column j of one (sequence b, query head h):
  scale -> softcap -> ALiBi -> mask (bottom-right aligned) -> softmax / lse -> dropout -> P V.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "MASK32",
    "philox4x32_10",
    "dropout_key",
    "dropout_keep_mask",
    "dropout_threshold",
    "dropout_scale",
    "visible_mask",
    "attention_forward",
    "attention_backward",
    "max_abs_score",
]

MASK32 = 0xFFFFFFFF
_PHILOX_M0 = 0xD2511F53
_PHILOX_M1 = 0xCD9E8D57
_PHILOX_W0 = 0x9E3779B9
_PHILOX_W1 = 0xBB67AE85
_DROPOUT_DOMAIN = 0x46414452  # "FADR"


# --------------------------------------------------------------------------------------------
# Philox-4x32-10 and the dropout keep decision
# --------------------------------------------------------------------------------------------

def _u32(x) -> np.ndarray:
    """Any integer (array or Python int, possibly negative or >= 2^32) -> uint32 array mod 2^32."""
    if isinstance(x, (int, np.integer)):
        return np.asarray(int(x) & MASK32, dtype=np.uint32)
    a = np.asarray(x)
    return (a.astype(np.int64) & MASK32).astype(np.uint32)


def _mulhilo32(m: int, c: np.ndarray):
    prod = np.uint64(m) * c.astype(np.uint64)
    hi = (prod >> np.uint64(32)).astype(np.uint32)
    lo = (prod & np.uint64(MASK32)).astype(np.uint32)
    return hi, lo


def philox4x32_10(ctr, key0: int, key1: int):
    """Philox-4x32 with 10 rounds.

    ctr: a sequence of 4 counter words; each word may be a Python int or an integer array
    (all broadcast together), taken mod 2^32. key0, key1: Python ints taken mod 2^32.
    Returns a list of 4 uint32 arrays (0-d when every counter word is a scalar).
    """
    c0, c1, c2, c3 = np.broadcast_arrays(*[_u32(w) for w in ctr])
    c0, c1, c2, c3 = (np.array(w, dtype=np.uint32) for w in (c0, c1, c2, c3))
    k0 = int(key0) & MASK32
    k1 = int(key1) & MASK32
    for _ in range(10):
        hi0, lo0 = _mulhilo32(_PHILOX_M0, c0)
        hi1, lo1 = _mulhilo32(_PHILOX_M1, c2)
        c0, c1, c2, c3 = (
            hi1 ^ c1 ^ np.uint32(k0),
            lo1,
            hi0 ^ c3 ^ np.uint32(k1),
            lo0,
        )
        k0 = (k0 + _PHILOX_W0) & MASK32
        k1 = (k1 + _PHILOX_W1) & MASK32
    return [c0, c1, c2, c3]


def dropout_key(seed: int, offset: int):
    """Per-call Philox key (key0, key1) derived from (seed, offset)."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    offset = int(offset) & 0xFFFFFFFFFFFFFFFF
    r = philox4x32_10([offset & MASK32, offset >> 32, _DROPOUT_DOMAIN, 0], seed & MASK32, seed >> 32)
    return int(r[0]), int(r[1])


def dropout_threshold(p: float) -> int:
    t = math.floor(float(np.float32(p)) * 2.0 ** 32)
    return min(t, 2 ** 32 - 1)


def dropout_scale(p: float) -> float:
    """1 / (1 - p) computed in float32, returned as a float64 value."""
    return float(np.float32(1) / (np.float32(1) - np.float32(p)))


def dropout_keep_mask(seed: int, offset: int, b: int, h: int, Sq: int, Sk: int, p: float) -> np.ndarray:
    """bool [Sq, Sk]: True where p_ij of (sequence b, query head h) is kept."""
    key0, key1 = dropout_key(seed, offset)
    i = np.arange(Sq, dtype=np.int64)[:, None]
    j = np.arange(Sk, dtype=np.int64)[None, :]
    words = philox4x32_10([j >> 2, i, int(h), int(b)], key0, key1)
    lane = np.broadcast_to(j & 3, (Sq, Sk))
    w = np.choose(lane, [np.broadcast_to(x, (Sq, Sk)) for x in words]) if Sq and Sk else np.zeros((Sq, Sk), np.uint32)
    thr = dropout_threshold(p)
    return w.astype(np.uint64) >= np.uint64(thr)


# --------------------------------------------------------------------------------------------
# Masks and scores of one (sequence, head)
# --------------------------------------------------------------------------------------------

def _check_window(window):
    left, right = (int(window[0]), int(window[1]))
    if left < -1 or right < -1:
        raise ValueError(f"window entries must be >= -1, got {window}")
    return left, right


def visible_mask(Sq: int, Sk: int, causal: bool = False, window=(-1, -1)) -> np.ndarray:
    """bool [Sq, Sk]: which (i, j) are visible (bottom-right aligned)."""
    left, right = _check_window(window)
    i = np.arange(Sq, dtype=np.int64)[:, None]
    j = np.arange(Sk, dtype=np.int64)[None, :]
    diag = i + Sk - Sq  # key position of query i
    vis = np.ones((Sq, Sk), dtype=bool)
    if causal:
        vis &= j <= diag
    if left >= 0:
        vis &= j >= diag - left
    if right >= 0:
        vis &= j <= diag + right
    return vis


def _logits(qh, kh, scale, softcap, slope, Sq, Sk):
    """Final logits s [Sq, Sk] and d s / d s_raw (the softcap derivative)."""
    s_raw = scale * (qh @ kh.T)
    if softcap > 0:
        t = np.tanh(s_raw / softcap)
        s = softcap * t
        dcap = 1.0 - t * t
    else:
        s = s_raw
        dcap = np.ones_like(s_raw)
    if slope is not None:
        i = np.arange(Sq, dtype=np.float64)[:, None]
        j = np.arange(Sk, dtype=np.float64)[None, :]
        s = s - float(slope) * np.abs(i + Sk - Sq - j)
    return s, dcap


def _vis_matmul(w, x, vis):
    """w @ x where w is zero outside vis, without letting a NaN/Inf of x leak through a masked zero.

    The contract says NaN in the inputs reaches only the rows that see it; a plain matmul would
    turn 0 * NaN into NaN for rows that do not see the key. Finite inputs take the fast path.
    """
    if np.isfinite(x).all():
        return w @ x
    return np.where(vis[:, :, None], w[:, :, None] * x[None, :, :], 0.0).sum(axis=1)


def _softmax(s, vis):
    """Row softmax over visible entries. Returns (p, lse); fully masked rows: p = 0, lse = -inf."""
    Sq = s.shape[0]
    lse = np.full(Sq, -np.inf)
    p = np.zeros_like(s)
    any_vis = vis.any(axis=1)
    if not any_vis.any():
        return p, lse
    sm = np.where(vis, s, -np.inf)
    rows = np.nonzero(any_vis)[0]
    sr = sm[rows]
    m = np.max(sr, axis=1, keepdims=True)
    # A row whose max is not finite (inf/NaN in inputs) keeps its NaN/inf semantics via exp.
    m_safe = np.where(np.isfinite(m), m, 0.0)
    e = np.where(vis[rows], np.exp(sr - m_safe), 0.0)
    tot = e.sum(axis=1, keepdims=True)
    p[rows] = np.where(vis[rows], e / tot, 0.0)
    # A row that sees keys but whose every score is -inf (an Inf input) gets a
    # NaN lse with its NaN p, not the -inf that marks a row with no visible key:
    # the Inf reaches the row's outputs (as in every backend).
    lse[rows] = np.where(tot[:, 0] > 0, (np.log(tot) + m_safe)[:, 0], np.nan)
    return p, lse


# --------------------------------------------------------------------------------------------
# Sequences
# --------------------------------------------------------------------------------------------

def _quiet(fn):
    """NaN/Inf inputs are legal (they must propagate): silence numpy's floating-point warnings."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return fn(*args, **kwargs)
    return wrapper


def _f64(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def _sequences(q, k, v, cu_seqlens_q, cu_seqlens_k):
    """Yield (b, q_slice_index, k_slice_index) covering every sequence.

    Returns a list of (b, qsel, ksel), where qsel/ksel index the leading dims of q/k so that
    q[qsel] is [Sq, Hq, D] and k[ksel] is [Sk, Hkv, D].
    """
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        raise ValueError("cu_seqlens_q and cu_seqlens_k must be given together")
    if cu_seqlens_q is None:
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            raise ValueError("batched q, k, v must be 4-D [B, S, H, D]")
        B = q.shape[0]
        if k.shape[0] != B or v.shape[0] != B:
            raise ValueError("batch sizes differ")
        return [(b, (b,), (b,)) for b in range(B)]
    cq = np.asarray(cu_seqlens_q, dtype=np.int64)
    ck = np.asarray(cu_seqlens_k, dtype=np.int64)
    if cq.ndim != 1 or ck.shape != cq.shape or cq.size < 1:
        raise ValueError("cu_seqlens must be 1-D of equal length B+1")
    for name, c, total in (("cu_seqlens_q", cq, q.shape[0]), ("cu_seqlens_k", ck, k.shape[0])):
        if c[0] != 0 or np.any(np.diff(c) < 0) or c[-1] > total:
            raise ValueError(f"{name} invalid: {c}")
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError("packed q, k, v must be 3-D [total, H, D]")
    return [(b, (slice(cq[b], cq[b + 1]),), (slice(ck[b], ck[b + 1]),)) for b in range(cq.size - 1)]


def _check_shapes(q, k, v):
    Hq, Dqk = q.shape[-2], q.shape[-1]
    Hkv = k.shape[-2]
    if k.shape[-1] != Dqk:
        raise ValueError("q and k head dims differ")
    if v.shape[-2] != Hkv or v.shape[:-1] != k.shape[:-1]:
        raise ValueError("k and v shapes disagree")
    if Hkv == 0 or Hq % Hkv != 0:
        raise ValueError("Hq must be a multiple of Hkv")
    return Hq, Hkv, Dqk, v.shape[-1]


def _slope(alibi, b, h, Hq):
    if alibi is None:
        return None
    if alibi.shape == (Hq,):
        return alibi[h]
    if alibi.ndim == 2 and alibi.shape[1] == Hq:
        return alibi[b, h]
    raise ValueError(f"alibi slopes must be [Hq] or [B, Hq], got {alibi.shape}")


def _head_problem(q, k, v, b, qsel, ksel, h, group, opts):
    """Everything about one (sequence b, query head h) needed by forward and backward."""
    qh = q[qsel][:, h, :]
    kh = k[ksel][:, h // group, :]
    vh = v[ksel][:, h // group, :]
    Sq, Sk = qh.shape[0], kh.shape[0]
    s, dcap = _logits(qh, kh, opts["scale"], opts["softcap"], _slope(opts["alibi"], b, h, q.shape[-2]), Sq, Sk)
    vis = visible_mask(Sq, Sk, opts["causal"], opts["window"])
    p, lse = _softmax(s, vis)
    if opts["dropout_p"] > 0:
        keep = dropout_keep_mask(opts["seed"], opts["offset"], b, h, Sq, Sk, opts["dropout_p"])
        mult = np.where(keep, dropout_scale(opts["dropout_p"]), 0.0)
    else:
        mult = np.ones_like(p)
    return dict(qh=qh, kh=kh, vh=vh, s=s, dcap=dcap, vis=vis, p=p, lse=lse, mult=mult)


def _options(q, softmax_scale, causal, window, softcap, alibi_slopes, dropout_p, seed, offset):
    Dqk = q.shape[-1]
    scale = 1.0 / math.sqrt(Dqk) if softmax_scale is None else float(softmax_scale)
    if math.isnan(scale):
        raise ValueError("softmax_scale is NaN")
    if not (0.0 <= float(dropout_p) < 1.0):
        raise ValueError("dropout_p must be in [0, 1)")
    if softcap < 0:
        raise ValueError("softcap must be >= 0")
    return dict(scale=scale, causal=bool(causal), window=_check_window(window), softcap=float(softcap),
                alibi=_f64(alibi_slopes), dropout_p=float(dropout_p), seed=int(seed), offset=int(offset))


@_quiet
def attention_forward(q, k, v, *, softmax_scale=None, causal=False, window=(-1, -1), softcap=0.0,
                      alibi_slopes=None, dropout_p=0.0, seed=0, offset=0,
                      cu_seqlens_q=None, cu_seqlens_k=None):
    """Returns (out, lse) in float64 (layouts in the module docstring)."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    Hq, Hkv, Dqk, Dv = _check_shapes(q, k, v)
    opts = _options(q, softmax_scale, causal, window, softcap, alibi_slopes, dropout_p, seed, offset)
    group = Hq // Hkv
    seqs = _sequences(q, k, v, cu_seqlens_q, cu_seqlens_k)
    out = np.zeros(q.shape[:-1] + (Dv,))
    packed = cu_seqlens_q is not None
    lse = np.full((Hq, q.shape[0]) if packed else (q.shape[0], Hq, q.shape[1]), -np.inf)
    for b, qsel, ksel in seqs:
        for h in range(Hq):
            hp = _head_problem(q, k, v, b, qsel, ksel, h, group, opts)
            o = _vis_matmul(hp["p"] * hp["mult"], hp["vh"], hp["vis"])
            out[qsel][:, h, :] = o
            if packed:
                lse[h, qsel[0]] = hp["lse"]
            else:
                lse[b, h, :] = hp["lse"]
    return out, lse


@_quiet
def attention_backward(dout, q, k, v, *, softmax_scale=None, causal=False, window=(-1, -1), softcap=0.0,
                       alibi_slopes=None, dropout_p=0.0, seed=0, offset=0,
                       cu_seqlens_q=None, cu_seqlens_k=None):
    """Exact float64 gradients (dq, dk, dv) of sum(dout * out)."""
    dout, q, k, v = _f64(dout), _f64(q), _f64(k), _f64(v)
    Hq, Hkv, Dqk, Dv = _check_shapes(q, k, v)
    if dout.shape != q.shape[:-1] + (Dv,):
        raise ValueError("dout must have out's shape")
    opts = _options(q, softmax_scale, causal, window, softcap, alibi_slopes, dropout_p, seed, offset)
    group = Hq // Hkv
    seqs = _sequences(q, k, v, cu_seqlens_q, cu_seqlens_k)
    dq = np.zeros_like(q)
    dk = np.zeros_like(k)
    dv = np.zeros_like(v)
    for b, qsel, ksel in seqs:
        for h in range(Hq):
            hp = _head_problem(q, k, v, b, qsel, ksel, h, group, opts)
            do = dout[qsel][:, h, :]
            p, mult, vis = hp["p"], hp["mult"], hp["vis"]
            pd = p * mult                      # probabilities after dropout (0 where masked)
            dv[ksel][:, h // group, :] += _vis_matmul(pd.T, do, vis.T)
            dpd = np.where(vis, do @ hp["vh"].T, 0.0)   # d loss / d pd
            dp = dpd * mult                             # d loss / d p
            ds = p * (dp - np.sum(p * dp, axis=1, keepdims=True))   # through softmax
            ds_raw = np.where(vis, ds * hp["dcap"] * opts["scale"], 0.0)  # ALiBi is additive: derivative 1
            dq[qsel][:, h, :] += _vis_matmul(ds_raw, hp["kh"], vis)
            dk[ksel][:, h // group, :] += _vis_matmul(ds_raw.T, hp["qh"], vis.T)
    return dq, dk, dv


@_quiet
def max_abs_score(q, k, v, *, softmax_scale=None, causal=False, window=(-1, -1), softcap=0.0,
                  alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, **_ignored):
    """max |s| over all visible final logits and over the scaled raw scores (0 if none).

    Used to widen the fp32 error bound as the contract's accuracy rule says.
    """
    q, k, v = _f64(q), _f64(k), _f64(v)
    Hq, Hkv, _, _ = _check_shapes(q, k, v)
    opts = _options(q, softmax_scale, causal, window, softcap, alibi_slopes, 0.0, 0, 0)
    group = Hq // Hkv
    best = 0.0
    for b, qsel, ksel in _sequences(q, k, v, cu_seqlens_q, cu_seqlens_k):
        for h in range(Hq):
            hp = _head_problem(q, k, v, b, qsel, ksel, h, group, opts)
            if hp["vis"].any():
                best = max(best, float(np.max(np.abs(hp["s"][hp["vis"]]))))
                raw = opts["scale"] * (hp["qh"] @ hp["kh"].T)
                best = max(best, float(np.max(np.abs(raw[hp["vis"]]))))
    return best
