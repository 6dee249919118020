"""The `flashattn` CLI (run / grad on .npy files) checked against the float64 NumPy oracle.

The binary comes from $FLASHATTN_CLI, else the newest build*/tools/cli/flashattn under the
repository root; without one every test here is skipped. Inputs are fresh random normals on every
run; the seed is printed in every failure message and can be pinned with $FLASHATTN_TEST_SEED.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "python"))
import fa_oracle as fo  # noqa: E402


def _find_cli():
    env = os.environ.get("FLASHATTN_CLI")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    found = [p for p in glob.glob(str(REPO / "build*" / "tools" / "cli" / "flashattn"))
             if os.path.isfile(p) and os.access(p, os.X_OK)]
    return max(found, key=os.path.getmtime) if found else None


CLI = _find_cli()
SEED = int(os.environ.get("FLASHATTN_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
BACKENDS = ["cpu", "reference"]


@pytest.fixture(autouse=True)
def _need_cli():
    if CLI is None:
        pytest.skip("flashattn CLI not found (set FLASHATTN_CLI or build build*/tools/cli/flashattn)")


def _rng(request):
    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])


def _cli(args, timeout=120):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def _ok(proc, what):
    assert proc.returncode == 0, (
        f"{what}: exit {proc.returncode} (seed {SEED})\ncmd: {proc.args}\nstderr:\n{proc.stderr}\nstdout:\n{proc.stdout}")


# --------------------------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------------------------

def to_bf16_bits(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(u):
    return (np.asarray(u, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def encode(x64, dtype):
    """float64 array -> (array as stored in the .npy file, the exact values as float64)."""
    if dtype == "f32":
        a = x64.astype(np.float32)
        return a, a.astype(np.float64)
    if dtype == "f16":
        a = x64.astype(np.float16)
        return a, a.astype(np.float64)
    if dtype == "bf16":
        a = to_bf16_bits(x64.astype(np.float32))
        return a, from_bf16_bits(a).astype(np.float64)
    raise ValueError(dtype)


NPY_DTYPE = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "bf16": np.dtype("<u2")}


def decode(a, dtype):
    assert a.dtype == NPY_DTYPE[dtype], f"output dtype {a.dtype}, expected {NPY_DTYPE[dtype]} for {dtype}"
    return from_bf16_bits(a).astype(np.float64) if dtype == "bf16" else a.astype(np.float64)


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    B: int = 2
    Sq: int = 17
    Sk: int = 17
    Hq: int = 4
    Hkv: int = 4
    D: int = 32
    Dv: int | None = None
    causal: bool = False
    window: tuple | None = None
    softcap: float = 0.0
    alibi: str | None = None        # "h": [Hq], "bh": [B, Hq]
    dropout: tuple | None = None    # (p, seed, offset)
    scale: float | None = None
    qmul: float = 1.0               # multiplies q (larger scores)
    lens: list | None = field(default=None)  # packed: [(Sq_b, Sk_b), ...]

    def __str__(self):
        return self.name


FP32_CASES = [
    Case("plain"),
    Case("causal", causal=True),
    Case("causal_sq_gt_sk", Sq=113, Sk=17, causal=True),
    Case("causal_sq_lt_sk", Sq=17, Sk=113, causal=True),
    Case("window", Sq=113, Sk=113, window=(8, 4)),
    Case("window_right_only", Sq=40, Sk=17, window=(-1, 5)),
    Case("window_left_only", Sq=17, Sk=40, window=(3, -1)),
    Case("window_0_0", window=(0, 0)),
    Case("causal_and_window", Sq=113, Sk=113, causal=True, window=(10, 6)),
    Case("softcap", softcap=5.0, qmul=4.0),
    Case("alibi_h", Sq=113, Sk=113, alibi="h"),
    Case("alibi_bh_causal", Sq=17, Sk=40, alibi="bh", causal=True),
    Case("dropout", Sq=40, Sk=40, dropout=(0.17, 1234, 7)),
    Case("dropout_big_seed", Sq=17, Sk=113, dropout=(0.5, 2 ** 40 + 5, 2 ** 33 + 1), Hq=2, Hkv=2),
    Case("gqa", Hq=6, Hkv=2),
    Case("mqa", Hq=4, Hkv=1, Sq=40, Sk=17),
    Case("dv_lt_dqk", D=32, Dv=16),
    Case("dv_gt_dqk", D=16, Dv=40),
    Case("odd_head_dims", D=20, Dv=12, Hq=3, Hkv=1),
    Case("len1_1", Sq=1, Sk=1),
    Case("len1_113", Sq=1, Sk=113, causal=True),
    Case("len113_1", Sq=113, Sk=1, causal=True),
    Case("scale", scale=0.5),
    Case("big_scores", scale=20.0, Sq=40, Sk=40),
    Case("all_options", B=2, Sq=113, Sk=113, Hq=4, Hkv=2, D=32, Dv=24, causal=True, window=(40, -1), softcap=8.0,
         alibi="bh", dropout=(0.3, 99, 3), qmul=2.0),
    Case("packed", Hq=4, Hkv=2, lens=[(17, 20), (0, 5), (13, 0), (1, 1), (40, 33)]),
    Case("packed_causal_alibi_dropout", Hq=2, Hkv=1, causal=True, alibi="bh", dropout=(0.25, 5, 11),
         lens=[(17, 17), (0, 0), (30, 9), (9, 30)]),
    Case("packed_window", Hq=2, Hkv=2, window=(4, 2), lens=[(20, 25), (1, 0), (0, 3), (12, 12)]),
    Case("len239_causal", B=1, Sq=239, Sk=239, Hq=2, Hkv=1, D=64, causal=True),
    Case("long_sk_window", B=1, Sq=239, Sk=1023, Hq=2, Hkv=2, D=16, window=(300, 40), alibi="h"),
    Case("long_sq_causal_dropout", B=1, Sq=1023, Sk=239, Hq=1, Hkv=1, D=16, causal=True, dropout=(0.1, 7, 70)),
    Case("scores_1000", Sq=113, Sk=113, Hq=2, Hkv=2, D=64, scale=90.0),
    Case("head_dim_1", Hq=2, Hkv=1, D=1, Dv=3, Sq=17, Sk=40),
    Case("head_dim_256", B=1, Hq=2, Hkv=1, D=256, Dv=256, Sq=40, Sk=113, causal=True),
    Case("window_huge", window=(2 ** 40, 2 ** 40)),
    Case("window_huge_left_causal", Sq=40, Sk=113, window=(2 ** 40, 0)),
    Case("seed_max", Hq=2, Hkv=2, dropout=(0.4, 2 ** 64 - 1, 2 ** 64 - 1)),
    Case("empty_keys_batched", Sq=17, Sk=0),
    Case("empty_queries_batched", Sq=0, Sk=17, causal=True),
    Case("packed_all_empty", Hq=2, Hkv=1, lens=[(0, 0), (0, 3), (0, 0)]),
    Case("packed_long", Hq=2, Hkv=1, D=16, causal=True, lens=[(239, 300), (0, 0), (130, 129), (1, 257)]),
]

LOWP_CASES = [
    Case("plain"),
    Case("causal_gqa", Sq=40, Sk=30, Hq=4, Hkv=2, causal=True),
    Case("dropout_alibi_softcap", alibi="h", dropout=(0.2, 3, 1), softcap=6.0),
    Case("packed", Hq=2, Hkv=1, lens=[(17, 20), (0, 5), (13, 0), (9, 9)]),
]


def make_problem(case: Case, rng, dtype="f32", tmp=None):
    """Random inputs written to tmp; returns (paths, exact inputs as float64, oracle kwargs, cli flags)."""
    Dv = case.Dv or case.D
    if case.lens is not None:
        tq = sum(a for a, _ in case.lens)
        tk = sum(b for _, b in case.lens)
        qshape, kshape, vshape = (tq, case.Hq, case.D), (tk, case.Hkv, case.D), (tk, case.Hkv, Dv)
        nseq = len(case.lens)
    else:
        qshape = (case.B, case.Sq, case.Hq, case.D)
        kshape = (case.B, case.Sk, case.Hkv, case.D)
        vshape = (case.B, case.Sk, case.Hkv, Dv)
        nseq = case.B
    x = {}
    files = {}
    paths = {}
    x["q"] = rng.standard_normal(qshape) * case.qmul
    x["k"] = rng.standard_normal(kshape)
    x["v"] = rng.standard_normal(vshape)
    x["dout"] = rng.standard_normal(qshape[:-1] + (Dv,))
    exact = {}
    for n in ("q", "k", "v", "dout"):
        files[n], exact[n] = encode(x[n], dtype)
    kw = {}
    flags = []
    if dtype == "bf16":
        flags += ["--dtype", "bf16"]
    if case.scale is not None:
        kw["softmax_scale"] = case.scale
        flags += ["--scale", repr(float(case.scale))]
    if case.causal:
        kw["causal"] = True
        flags += ["--causal"]
    if case.window is not None:
        kw["window"] = case.window
        flags += [f"--window={case.window[0]},{case.window[1]}"]
    if case.softcap:
        kw["softcap"] = case.softcap
        flags += ["--softcap", repr(float(case.softcap))]
    if case.alibi is not None:
        shape = (case.Hq,) if case.alibi == "h" else (nseq, case.Hq)
        slopes = rng.uniform(0.05, 1.0, shape).astype(np.float32)
        files["alibi"] = slopes
        kw["alibi_slopes"] = slopes.astype(np.float64)
        flags += ["--alibi", "ALIBI"]
    if case.dropout is not None:
        p, seed, offset = case.dropout
        kw.update(dropout_p=p, seed=seed, offset=offset)
        flags += ["--dropout", repr(float(p)), "--seed", str(seed), "--offset", str(offset)]
    if case.lens is not None:
        cq = np.concatenate([[0], np.cumsum([a for a, _ in case.lens])]).astype(np.int32)
        ck = np.concatenate([[0], np.cumsum([b for _, b in case.lens])]).astype(np.int32)
        files["cuq"], files["cuk"] = cq, ck
        kw.update(cu_seqlens_q=cq, cu_seqlens_k=ck)
        flags += ["--cu-seqlens-q", "CUQ", "--cu-seqlens-k", "CUK"]
    for n, a in files.items():
        paths[n] = tmp / f"{n}.npy"
        np.save(paths[n], a)
    flags = [str(paths["alibi"]) if f == "ALIBI" else str(paths["cuq"]) if f == "CUQ"
             else str(paths["cuk"]) if f == "CUK" else f for f in flags]
    return paths, exact, kw, flags


def bound(ref, rel, srel, smax):
    finite = ref[np.isfinite(ref)]
    mag = max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0)
    return rel * mag + srel * smax * mag


def assert_close(name, got, ref, rel, srel=0.0, smax=0.0, ctx=""):
    assert got.shape == ref.shape, f"{name}: shape {got.shape} != {ref.shape} {ctx}"
    assert not np.isnan(got).any(), f"{name}: NaN in output {ctx} (seed {SEED})"
    ninf_got, ninf_ref = np.isneginf(got), np.isneginf(ref)
    assert np.array_equal(ninf_got, ninf_ref), (
        f"{name}: -inf pattern differs at {np.argwhere(ninf_got != ninf_ref)[:5].tolist()} {ctx} (seed {SEED})")
    fin = ~ninf_ref
    if not fin.any():
        return
    err = float(np.max(np.abs(got[fin] - ref[fin])))
    tol = bound(ref, rel, srel, smax)
    where = np.unravel_index(np.argmax(np.where(fin, np.abs(got - np.where(fin, ref, 0)), -1)), ref.shape)
    assert err <= tol, (f"{name}: max|err| {err:.3g} > {tol:.3g} at {tuple(int(i) for i in where)} "
                        f"(got {got[where]!r}, ref {ref[where]!r}) {ctx} (seed {SEED})")


TOL = {  # (out/lse rel, out/lse per-|s|, grad rel, grad per-|s|)
    "f32": (1e-5, 2e-7, 1e-4, 2e-6),
    "f16": (2e-2, 0.0, 2e-2, 0.0),
    "bf16": (2e-2, 0.0, 3e-2, 0.0),
}


def _run_forward(case, backend, dtype, rng, tmp):
    paths, x, kw, flags = make_problem(case, rng, dtype, tmp)
    out_p, lse_p = tmp / "out.npy", tmp / "lse.npy"
    proc = _cli(["run", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--out", out_p, "--lse", lse_p,
                 "--backend", backend, *flags])
    _ok(proc, f"run {case}")
    out, lse = decode(np.load(out_p), dtype), np.load(lse_p)
    assert lse.dtype == np.dtype("<f4"), f"lse dtype {lse.dtype}"
    ref_out, ref_lse = fo.attention_forward(x["q"], x["k"], x["v"], **kw)
    smax = fo.max_abs_score(x["q"], x["k"], x["v"], **kw)
    rel, srel, _, _ = TOL[dtype]
    ctx = f"[{case} backend={backend} dtype={dtype} flags={flags}]"
    assert_close("out", out, ref_out, rel, srel, smax, ctx)
    assert_close("lse", lse.astype(np.float64), ref_lse, rel if dtype == "f32" else 1e-4, srel, smax, ctx)
    return paths, x, kw, flags


def _run_grad(case, backend, dtype, rng, tmp, pass_fwd=False, extra=()):
    paths, x, kw, flags = make_problem(case, rng, dtype, tmp)
    outs = {n: tmp / f"{n}_grad.npy" for n in ("dq", "dk", "dv")}
    args = ["grad", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--dout", paths["dout"],
            "--dq", outs["dq"], "--dk", outs["dk"], "--dv", outs["dv"], "--backend", backend, *flags, *extra]
    if pass_fwd:
        ref_out, ref_lse = fo.attention_forward(x["q"], x["k"], x["v"], **kw)
        o_file, _ = encode(ref_out, dtype)
        np.save(tmp / "fwd_out.npy", o_file)
        np.save(tmp / "fwd_lse.npy", ref_lse.astype(np.float32))
        args += ["--out", tmp / "fwd_out.npy", "--lse", tmp / "fwd_lse.npy"]
    proc = _cli(args)
    _ok(proc, f"grad {case}")
    got = [decode(np.load(outs[n]), dtype) for n in ("dq", "dk", "dv")]
    ref = fo.attention_backward(x["dout"], x["q"], x["k"], x["v"], **kw)
    smax = fo.max_abs_score(x["q"], x["k"], x["v"], **kw)
    _, _, rel, srel = TOL[dtype]
    ctx = f"[{case} backend={backend} dtype={dtype} flags={flags} pass_fwd={pass_fwd}]"
    for n, g, r in zip(("dq", "dk", "dv"), got, ref):
        assert_close(n, g, r, rel, srel, smax, ctx)
    return outs


# --------------------------------------------------------------------------------------------
# fp32: every option against the oracle at the contract's bound
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", FP32_CASES, ids=str)
def test_forward_fp32(case, backend, request, tmp_path):
    _run_forward(case, backend, "f32", _rng(request), tmp_path)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", FP32_CASES, ids=str)
def test_grad_fp32(case, backend, request, tmp_path):
    _run_grad(case, backend, "f32", _rng(request), tmp_path)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [c for c in FP32_CASES
                                  if c.name in ("causal_sq_gt_sk", "dropout", "all_options", "packed")], ids=str)
def test_grad_fp32_given_out_and_lse(case, backend, request, tmp_path):
    _run_grad(case, backend, "f32", _rng(request), tmp_path, pass_fwd=True)


def test_forward_auto_backend(request, tmp_path):
    _run_forward(Case("auto", causal=True, Hq=4, Hkv=2), "auto", "f32", _rng(request), tmp_path)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_deterministic_is_bitwise_repeatable(backend, request, tmp_path):
    case = Case("det", B=2, Sq=113, Sk=113, Hq=4, Hkv=1, causal=True)
    rng = _rng(request)
    paths, x, kw, flags = make_problem(case, rng, "f32", tmp_path)
    results = []
    for rep in range(2):
        outs = [tmp_path / f"{n}{rep}.npy" for n in ("dq", "dk", "dv")]
        _ok(_cli(["grad", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--dout", paths["dout"],
                  "--dq", outs[0], "--dk", outs[1], "--dv", outs[2], "--backend", backend, "--deterministic",
                  *flags]), "grad --deterministic")
        results.append([np.load(o) for o in outs])
    for a, b in zip(*results):
        assert a.tobytes() == b.tobytes()
    ref = fo.attention_backward(x["dout"], x["q"], x["k"], x["v"], **kw)
    smax = fo.max_abs_score(x["q"], x["k"], x["v"], **kw)
    for n, g, r in zip(("dq", "dk", "dv"), results[0], ref):
        assert_close(n, g.astype(np.float64), r, 1e-4, 2e-6, smax)


def test_dropout_seed_and_offset_matter(request, tmp_path):
    """Different (seed, offset) give different outputs; the same give the same bits."""
    rng = _rng(request)
    case = Case("d", Sq=40, Sk=40, dropout=(0.3, 1, 0))
    paths, x, kw, flags = make_problem(case, rng, "f32", tmp_path)
    base = ["run", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--backend", "cpu", "--dropout", "0.3"]
    res = {}
    for tag, seed, off in [("a", 1, 0), ("a2", 1, 0), ("s", 2, 0), ("o", 1, 1)]:
        p = tmp_path / f"o_{tag}.npy"
        _ok(_cli(base + ["--seed", seed, "--offset", off, "--out", p]), "run dropout")
        res[tag] = np.load(p)
    assert res["a"].tobytes() == res["a2"].tobytes()
    assert not np.array_equal(res["a"], res["s"])
    assert not np.array_equal(res["a"], res["o"])


# --------------------------------------------------------------------------------------------
# fp16 / bf16: plumbing at a loose bound
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("case", LOWP_CASES, ids=str)
def test_forward_lowp(case, dtype, backend, request, tmp_path):
    _run_forward(case, backend, dtype, _rng(request), tmp_path)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("case", LOWP_CASES, ids=str)
def test_grad_lowp(case, dtype, backend, request, tmp_path):
    _run_grad(case, backend, dtype, _rng(request), tmp_path)


# --------------------------------------------------------------------------------------------
# Bad invocations: exit code 2, "flashattn: ..." on stderr, nothing written
# --------------------------------------------------------------------------------------------

def _bad_setup(tmp, rng):
    """Valid files to start from; each error case breaks one thing."""
    f = {}

    def save(name, a):
        p = tmp / f"{name}.npy"
        np.save(p, a)
        f[name] = str(p)

    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    save("q", r(2, 9, 4, 16))
    save("k", r(2, 11, 2, 16))
    save("v", r(2, 11, 2, 16))
    save("dout", r(2, 9, 4, 16))
    save("k_d8", r(2, 11, 2, 8))
    save("k_h3", r(2, 11, 3, 16))
    save("v_s12", r(2, 12, 2, 16))
    save("k_f16", r(2, 11, 2, 16).astype(np.float16))
    save("alibi_bad", rng.uniform(0, 1, 3).astype(np.float32))
    save("qp", r(9, 4, 16))
    save("kp", r(11, 2, 16))
    save("vp", r(11, 2, 16))
    save("cu_ok_k", np.array([0, 5, 11], dtype=np.int32))
    save("cu_dec", np.array([0, 6, 4], dtype=np.int32))
    save("cu_long", np.array([0, 5, 12], dtype=np.int32))
    save("dout_bad", r(2, 9, 4, 8))
    save("cu_start1", np.array([1, 5, 9], dtype=np.int32))
    save("cu_short", np.array([0, 11], dtype=np.int32))
    save("q_f64", r(2, 9, 4, 16).astype(np.float64))
    save("q_5d", r(1, 2, 9, 4, 16))
    corrupt = tmp / "corrupt.npy"
    corrupt.write_bytes(b"\x93NUMPY\x01\x00garbage")
    f["corrupt"] = str(corrupt)
    return f


BAD_RUN = {  # name: (argument substitutions, keyword expected in the message (case-insensitive) or None)
    "missing_file": (dict(q="/nonexistent/dir/q.npy"), "q.npy"),
    "head_dim_mismatch": (dict(k="k_d8"), None),
    "heads_not_divisible": (dict(k="k_h3", v="k_h3"), None),
    "kv_length_mismatch": (dict(v="v_s12"), None),
    "dtype_mismatch": (dict(k="k_f16"), None),
    "dropout_one": (dict(extra=["--dropout", "1.0"]), "dropout"),
    "dropout_negative": (dict(extra=["--dropout=-0.1"]), "dropout"),
    "window_bad": (dict(extra=["--window=-2,0"]), "window"),
    "scale_nan": (dict(extra=["--scale", "nan"]), "scale"),
    "backend_unknown": (dict(extra=["--backend", "gpu9000"]), "backend"),
    "alibi_shape": (dict(extra=["--alibi", "alibi_bad"]), "alibi"),
    "cu_seqlens_decreasing": (dict(q="qp", k="kp", v="vp", extra=["--cu-seqlens-q", "cu_dec", "--cu-seqlens-k",
                                                                  "cu_ok_k"]), "cu"),
    "cu_seqlens_past_total": (dict(q="qp", k="kp", v="vp", extra=["--cu-seqlens-q", "cu_ok_k", "--cu-seqlens-k",
                                                                  "cu_long"]), "cu"),
    "packed_without_cu_seqlens": (dict(q="qp", k="kp", v="vp"), None),
    "bf16_flag_on_f32_files": (dict(extra=["--dtype", "bf16"]), None),
    "f16_flag_on_f32_files": (dict(extra=["--dtype", "f16"]), None),
    "dtype_unknown": (dict(extra=["--dtype", "f64"]), "dtype"),
    "window_malformed": (dict(extra=["--window=5"]), "window"),
    "unknown_option": (dict(extra=["--frobnicate"]), None),
    "cu_seqlens_not_from_0": (dict(q="qp", k="kp", v="vp", extra=["--cu-seqlens-q", "cu_start1", "--cu-seqlens-k",
                                                                  "cu_ok_k"]), "cu"),
    "cu_seqlens_count_mismatch": (dict(q="qp", k="kp", v="vp", extra=["--cu-seqlens-q", "cu_ok_k",
                                                                      "--cu-seqlens-k", "cu_short"]), "cu"),
    "only_one_cu_seqlens": (dict(q="qp", k="kp", v="vp", extra=["--cu-seqlens-q", "cu_ok_k"]), "cu"),
    "float64_input": (dict(q="q_f64"), None),
    "five_dims": (dict(q="q_5d"), None),
    "corrupt_npy": (dict(q="corrupt"), "corrupt.npy"),
    "negative_seed": (dict(extra=["--dropout", "0.1", "--seed", "-1"]), "seed"),
    "softcap_negative": (dict(extra=["--softcap", "-1"]), "softcap"),
    "out_dir_missing": (dict(out="/nonexistent/dir/out.npy"), None),
}


def _resolve(f, name):
    return f.get(name, name)


def _assert_refused(proc, outputs, keyword):
    msg = f"exit {proc.returncode}\ncmd: {proc.args}\nstderr:\n{proc.stderr}\nstdout:\n{proc.stdout}"
    assert proc.returncode == 2, msg
    assert any(line.startswith("flashattn: ") for line in proc.stderr.splitlines()), msg
    if keyword is not None:
        assert keyword.lower() in proc.stderr.lower(), f"message does not name '{keyword}'\n{msg}"
    for o in outputs:
        assert not os.path.exists(o), f"{o} was written although the call was refused\n{msg}"


@pytest.mark.parametrize("name", list(BAD_RUN))
def test_bad_run_invocation(name, request, tmp_path):
    f = _bad_setup(tmp_path, _rng(request))
    subs, keyword = BAD_RUN[name]
    q, k, v = (_resolve(f, subs.get(n, n)) for n in ("q", "k", "v"))
    extra = [_resolve(f, a) for a in subs.get("extra", [])]
    out, lse = subs.get("out", tmp_path / "out.npy"), tmp_path / "lse.npy"
    proc = _cli(["run", "--q", q, "--k", k, "--v", v, "--out", out, "--lse", lse, "--backend", "cpu", *extra]
                if "--backend" not in extra else
                ["run", "--q", q, "--k", k, "--v", v, "--out", out, "--lse", lse, *extra])
    _assert_refused(proc, [out, lse], keyword)


@pytest.mark.parametrize("name", ["dout_shape", "dropout_one", "window_bad", "kv_length_mismatch", "lse_without_out",
                                  "lse_file_missing"])
def test_bad_grad_invocation(name, request, tmp_path):
    f = _bad_setup(tmp_path, _rng(request))
    dout, v, extra, keyword = f["dout"], f["v"], [], None
    if name == "dout_shape":
        dout = f["dout_bad"]
    elif name == "dropout_one":
        extra, keyword = ["--dropout", "1.0"], "dropout"
    elif name == "window_bad":
        extra, keyword = ["--window=3,-5"], "window"
    elif name == "kv_length_mismatch":
        v = f["v_s12"]
    elif name == "lse_without_out":
        np.save(tmp_path / "given_lse.npy", np.zeros((2, 4, 9), np.float32))
        extra = ["--lse", tmp_path / "given_lse.npy"]
    elif name == "lse_file_missing":
        np.save(tmp_path / "given_out.npy", np.zeros((2, 9, 4, 16), np.float32))
        extra, keyword = ["--out", tmp_path / "given_out.npy", "--lse", tmp_path / "missing_lse.npy"], "missing_lse.npy"
    outs = [tmp_path / f"{n}.npy" for n in ("dq", "dk", "dv")]
    proc = _cli(["grad", "--q", f["q"], "--k", f["k"], "--v", v, "--dout", dout, "--dq", outs[0], "--dk", outs[1],
                 "--dv", outs[2], "--backend", "cpu", *extra])
    _assert_refused(proc, outs, keyword)


# --------------------------------------------------------------------------------------------
# Odd but legal inputs
# --------------------------------------------------------------------------------------------

def assert_nan_rows_and_close(name, got, ref, rel, ctx=""):
    """Non-finite rows (any NaN/Inf along the last dim, -inf LSE of fully masked rows aside) must be
    exactly the oracle's; the rest within rel."""
    assert got.shape == ref.shape, f"{name}: shape {got.shape} != {ref.shape} {ctx}"

    def bad_rows(a):
        return (np.isnan(a) | np.isposinf(a) | (np.isneginf(a) & (name != "lse"))).any(axis=-1)

    got_rows, ref_rows = bad_rows(got), bad_rows(ref)
    assert np.array_equal(got_rows, ref_rows), (
        f"{name}: NaN/Inf rows differ {ctx} (seed {SEED})\n  got non-finite, oracle not: {np.argwhere(got_rows & ~ref_rows).tolist()}"
        f"\n  oracle non-finite, got not: {np.argwhere(ref_rows & ~got_rows).tolist()}")
    fin = ~ref_rows
    assert_close(name, got[fin], ref[fin], rel, ctx=ctx)



NAN_CASES = [
    Case("nan_causal", B=2, Sq=17, Sk=17, Hq=4, Hkv=2, D=16, causal=True),
    Case("nan_window_sq_gt_sk", B=1, Sq=40, Sk=23, Hq=2, Hkv=1, D=16, window=(5, 3)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("value", [np.nan, np.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("case", NAN_CASES, ids=str)
def test_nan_forward_reaches_only_rows_that_see_it(case, value, where, backend, request, tmp_path):
    """Contract: NaN or Inf in the inputs propagates to the rows it touches, and no further."""
    rng = _rng(request)
    paths, x, kw, flags = make_problem(case, rng, "f32", tmp_path)
    a = x[where]
    a[a.shape[0] - 1, a.shape[1] // 2, a.shape[2] - 1, 3] = value
    np.save(paths[where], a.astype(np.float32))
    out_p, lse_p = tmp_path / "out.npy", tmp_path / "lse.npy"
    _ok(_cli(["run", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--out", out_p, "--lse", lse_p,
              "--backend", backend, *flags]), "run with NaN")
    ref_out, ref_lse = fo.attention_forward(x["q"], x["k"], x["v"], **kw)
    ctx = f"[{case} NaN in {where} backend={backend}]"
    assert_nan_rows_and_close("out", np.load(out_p).astype(np.float64), ref_out, 1e-5, ctx)
    assert_nan_rows_and_close("lse", np.load(lse_p).astype(np.float64)[..., None], ref_lse[..., None], 1e-5, ctx)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["q", "k", "v", "dout"])
@pytest.mark.parametrize("case", NAN_CASES, ids=str)
def test_nan_grad_reaches_only_rows_that_see_it(case, where, backend, request, tmp_path):
    rng = _rng(request)
    paths, x, kw, flags = make_problem(case, rng, "f32", tmp_path)
    a = x[where]
    a[a.shape[0] - 1, a.shape[1] // 2, a.shape[2] - 1, 3] = np.nan
    np.save(paths[where], a.astype(np.float32))
    outs = [tmp_path / f"{n}.npy" for n in ("dq", "dk", "dv")]
    _ok(_cli(["grad", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--dout", paths["dout"],
              "--dq", outs[0], "--dk", outs[1], "--dv", outs[2], "--backend", backend, *flags]), "grad with NaN")
    ref = fo.attention_backward(x["dout"], x["q"], x["k"], x["v"], **kw)
    ctx = f"[{case} NaN in {where} backend={backend}]"
    for n, o, r in zip(("dq", "dk", "dv"), outs, ref):
        assert_nan_rows_and_close(n, np.load(o).astype(np.float64), r, 1e-4, ctx)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fortran_order_npy_is_read_correctly_or_refused(backend, request, tmp_path):
    rng = _rng(request)
    case = Case("fortran", Hq=2, Hkv=1, D=16, causal=True)
    paths, x, kw, flags = make_problem(case, rng, "f32", tmp_path)
    np.save(paths["q"], np.asfortranarray(x["q"].astype(np.float32)))
    out_p = tmp_path / "out.npy"
    proc = _cli(["run", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--out", out_p,
                 "--backend", backend, *flags])
    if proc.returncode != 0:
        _assert_refused(proc, [out_p], None)
        return
    ref_out, _ = fo.attention_forward(x["q"], x["k"], x["v"], **kw)
    assert_close("out", decode(np.load(out_p), "f32"), ref_out, 1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_and_max_seqlen_options(backend, request, tmp_path):
    rng = _rng(request)
    case = Case("packed", Hq=2, Hkv=1, causal=True, lens=[(17, 20), (0, 5), (40, 33)])
    paths, x, kw, flags = make_problem(case, rng, "f32", tmp_path)
    ref_out, ref_lse = fo.attention_forward(x["q"], x["k"], x["v"], **kw)
    base = ["run", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--backend", backend, *flags]
    for n, extra in enumerate([["--threads", "1"], ["--max-seqlen-q", "64", "--max-seqlen-k", "300"]]):
        out_p, lse_p = tmp_path / f"o{n}.npy", tmp_path / f"l{n}.npy"
        _ok(_cli(base + ["--out", out_p, "--lse", lse_p] + extra), f"run {extra}")
        assert_close("out", np.load(out_p).astype(np.float64), ref_out, 1e-5, ctx=str(extra))
        assert_close("lse", np.load(lse_p).astype(np.float64), ref_lse, 1e-5, ctx=str(extra))
    # A max_seqlen below an actual length is an invalid argument.
    out_p = tmp_path / "o_bad.npy"
    _assert_refused(_cli(base + ["--out", out_p, "--max-seqlen-q", "39"]), [out_p], None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cu_seqlens_int64_accepted(backend, request, tmp_path):
    rng = _rng(request)
    case = Case("packed64", Hq=2, Hkv=2, window=(3, 3), lens=[(9, 12), (0, 2), (20, 20)])
    paths, x, kw, flags = make_problem(case, rng, "f32", tmp_path)
    for n in ("cuq", "cuk"):
        np.save(paths[n], np.load(paths[n]).astype(np.int64))
    out_p, lse_p = tmp_path / "out.npy", tmp_path / "lse.npy"
    _ok(_cli(["run", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--out", out_p, "--lse", lse_p,
              "--backend", backend, *flags]), "run int64 cu_seqlens")
    ref_out, ref_lse = fo.attention_forward(x["q"], x["k"], x["v"], **kw)
    assert_close("out", np.load(out_p).astype(np.float64), ref_out, 1e-5)
    assert_close("lse", np.load(lse_p).astype(np.float64), ref_lse, 1e-5)


# `flashattn check` trials that failed on code whose errors were the arithmetic's own, not a
# bug: the rule now models each rounding source (fp32 gradients: dP's and D's terms before
# they cancel; fp16/bf16 gradients: D read from the stored output; fp16/bf16 outputs: one
# ulp of max|ref| at least). Each trial must pass, on the CPU backend.
@pytest.mark.parametrize("seed,trial", [(502, 19), (503, 154), (602, 665), (3401, 1912)])
def test_check_rule_trials(seed, trial):
    proc = _cli(["check", "--backend", "cpu", "--seed", seed, "--max-seqlen", 1100, "--trial", trial, "-v"])
    _ok(proc, f"check seed {seed} trial {trial}")
    assert "1 passed, 0 failed" in proc.stdout, proc.stdout


# `flashattn bench` with decoding shapes: Sq query rows against N keys, Hq query heads on
# Hkv kv heads; the JSON row carries the shape and the contract's FLOP count (causal:
# bottom-right aligned, query row i sees keys j <= i + N - Sq).
@pytest.mark.parametrize("causal", [False, True])
def test_bench_decoding_shapes(causal, tmp_path):
    out = tmp_path / "bench.json"
    sq, n, d, hq, hkv, b = 5, 96, 32, 4, 2, 2
    _ok(_cli(["bench", "--backend", "cpu", "--dtype", "f32", "--hdim", d, "--seqlens", n, "--seqlen-q", sq,
              "--kv-heads", hkv, "--model-dim", hq * d, "--batch-tokens", b * n, "--repeats", 1, "--warmup", 0,
              "--json", out, *(["--causal"] if causal else [])]), "bench")
    row = json.loads(out.read_text())["rows"][0]
    assert (row["seqlen_q"], row["seqlen"], row["heads"], row["heads_kv"], row["batch"]) == (sq, n, hq, hkv, b)
    visible = sum(min(n, i + n - sq + 1) for i in range(sq)) if causal else sq * n
    assert row["flops"] == 2 * b * hq * visible * (d + d)
    assert row["ref_ms"] is not None and row["flash_ms"] > 0


def test_bench_refuses_kv_heads_that_do_not_divide(tmp_path):
    out = tmp_path / "bench.json"
    proc = _cli(["bench", "--backend", "cpu", "--hdim", 64, "--seqlens", 128, "--model-dim", 256,
                 "--kv-heads", 3, "--json", out])
    assert proc.returncode == 2 and "--kv-heads" in proc.stderr, proc.stderr
    assert not out.exists() and proc.stdout == ""


def test_outputs_through_links_and_devices(request, tmp_path):
    """A regular output file is replaced through a temporary renamed over it; through a
    symbolic link, the file it names (the link stays); a device is written directly
    (renaming over /dev/full replaced the device node with a regular file, as root)."""
    f = _bad_setup(tmp_path, _rng(request))
    args = ["run", "--q", f["q"], "--k", f["k"], "--v", f["v"], "--backend", "cpu", "--out"]
    real, link = tmp_path / "real.npy", tmp_path / "link.npy"
    real.write_bytes(b"old")
    link.symlink_to(real)
    _ok(_cli([*args, link]), "output through a link")
    assert link.is_symlink() and np.load(real).shape == (2, 9, 4, 16)
    _ok(_cli([*args, os.devnull]), "output to the null device")
    assert Path(os.devnull).is_char_device()
    if Path("/dev/full").is_char_device():
        proc = _cli([*args, "/dev/full"])
        assert proc.returncode != 0 and "--out" in proc.stderr and "space" in proc.stderr.lower(), proc.stderr
        assert Path("/dev/full").is_char_device()
    assert not list(tmp_path.glob(".*flashattn-tmp*"))


def _mutated_npy(good, rng):
    """One corruption of a valid .npy file: header bytes, length field, truncation, shape,
    dtype string or format version."""
    hdr_end = 10 + int.from_bytes(good[8:10], "little")
    header = good[10:hdr_end].decode("latin1")

    def rebuild(h):
        return good[:8] + len(h).to_bytes(2, "little") + h.encode("latin1") + good[hdr_end:]

    kind = int(rng.integers(6))
    if kind == 0:
        b = bytearray(good)
        for i in rng.integers(0, hdr_end, int(rng.integers(1, 5))):
            b[i] = int(rng.integers(256))
        return bytes(b)
    if kind == 1:
        return good[:int(rng.integers(len(good)))]
    if kind == 2:
        return good[:8] + int(rng.integers(65536)).to_bytes(2, "little") + good[10:]
    if kind == 3:
        shape = str(rng.choice(["(1, 9, 2, 16000000000)", "(-1, 9, 2, 16)", "(1, 9, 2)", "()", "(0, 9, 2, 16)",
                                "(1, 9, 2, 16, 1)", "(4611686018427387904, 2, 2, 16)", "(1,9,2,16", "(1, 9, 2, 1e3)"]))
        return rebuild(header.replace("(1, 9, 2, 16)", shape))
    if kind == 4:
        descr = str(rng.choice(["'>f4'", "'<f8'", "'<i4'", "'|b1'", "'<V4'", "'<f4", "'<u2'", "'O'", "'\xff\xfe'"]))
        return rebuild(header.replace("'<f4'", descr).replace("False", "True" if rng.random() < 0.3 else "False"))
    b = bytearray(good)
    b[6], b[7] = int(rng.integers(5)), int(rng.integers(3))
    return bytes(b[:8]) + len(header).to_bytes(4, "little") + good[10:] if b[6] >= 2 else bytes(b)


def test_corrupt_npy_files_are_refused_cleanly(request, tmp_path):
    """Randomly corrupted query files: each run either succeeds or is refused (exit 2) with a
    message naming --q in printable ASCII; never a crash (scripts/sanitize_check.sh runs this
    under AddressSanitizer and UndefinedBehaviorSanitizer, which also catch quiet overreads)."""
    rng = _rng(request)
    f = _bad_setup(tmp_path, rng)
    good = Path(f["q"]).read_bytes()
    q = tmp_path / "mutated.npy"
    for i in range(120):
        data = _mutated_npy(good, rng)
        q.write_bytes(data)
        proc = subprocess.run([CLI, "run", "--q", q, "--k", f["k"], "--v", f["v"], "--out", tmp_path / "o.npy",
                               "--backend", "cpu"], capture_output=True, timeout=120)
        err = proc.stderr.decode("utf-8", "replace")
        what = f"mutation {i} (seed {SEED}): exit {proc.returncode}, file starts {data[:96]!r}\nstderr:\n{err}"
        assert proc.returncode in (0, 2), what
        if proc.returncode == 2:
            assert "--q" in err, what
            assert all(c == "\n" or 0x20 <= ord(c) < 0x7f for c in err), what
