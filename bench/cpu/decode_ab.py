"""A/B of two builds of the Python package on the CPU forward's decoding shapes (no PyTorch
needed): each (build, ISA level) runs in its own process, ROUNDS times interleaved; every
point is the median of --repeats calls after one warm-up, the rounds' medians are reported.
Inputs are NumPy [B, S, H, D], no mask, H query heads on --kv-heads kv heads.

Usage:
  python bench/cpu/decode_ab.py SITE_A SITE_B OUT.json [--levels avx512,portable]
      [--points bf16:1:1:4096,bf16:8:16:16384] [--threads 2] [--rounds 2]
  SITE_*: directories holding the built package (pip install --target SITE .)
  a point is dtype:B:Sq:Sk (default: bf16, B 1/8, Sq 1/4/16, Sk 1024/4096/16384)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def time_points(points, heads, kv_heads, hdim, threads, repeats):
    import ml_dtypes
    import numpy as np

    import flashattn
    types = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
    rng = np.random.default_rng(0)
    for pt in points:
        dt, b, sq, sk = pt.split(":")
        b, sq, sk = int(b), int(sq), int(sk)
        q, k, v = (rng.standard_normal((b, s, h, hdim), dtype=np.float32).astype(types[dt])
                   for s, h in ((sq, heads), (sk, kv_heads), (sk, kv_heads)))
        ts = []
        for _ in range(repeats + 1):
            t = time.perf_counter()
            flashattn.forward(q, k, v, num_threads=threads)
            ts.append(time.perf_counter() - t)
        print(pt, statistics.median(ts[1:]) * 1e3, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("site_a")
    ap.add_argument("site_b")
    ap.add_argument("out")
    ap.add_argument("--levels", default="")
    ap.add_argument("--points", default=",".join(f"bf16:{b}:{q}:{k}" for b in (1, 8) for q in (1, 4, 16)
                                                 for k in (1024, 4096, 16384)))
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    points = a.points.split(",")
    if a.child:
        time_points(points, a.heads, a.kv_heads, a.hdim, a.threads, a.repeats)
        return
    levels = a.levels.split(",") if a.levels else [""]
    times = {}
    for _ in range(a.rounds):
        for level in levels:
            for side, site in (("a", a.site_a), ("b", a.site_b)):
                env = dict(os.environ, PYTHONPATH=site)
                env.pop("FLASHATTN_CPU_ISA", None)
                if level:
                    env["FLASHATTN_CPU_ISA"] = level
                args = [sys.executable, __file__, a.site_a, a.site_b, a.out, "--child", "--points", a.points,
                        "--heads", str(a.heads), "--kv-heads", str(a.kv_heads), "--hdim", str(a.hdim),
                        "--threads", str(a.threads), "--repeats", str(a.repeats)]
                out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    pt, ms = line.split()
                    times.setdefault((level or "default", pt), {}).setdefault(side, []).append(float(ms))
    rows = []
    for (level, pt), t in times.items():
        ma, mb = statistics.median(t["a"]), statistics.median(t["b"])
        rows.append({"level": level, "point": pt, "a_ms": ma, "b_ms": mb, "a_over_b": round(ma / mb, 3)})
        print(f"{level:12} {pt:22} a {ma:9.2f} ms  b {mb:9.2f} ms  a/b {ma / mb:5.2f}")
    with open(a.out, "w") as f:
        json.dump({"command": " ".join(sys.argv), "heads": a.heads, "kv_heads": a.kv_heads, "hdim": a.hdim,
                   "threads": a.threads, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
