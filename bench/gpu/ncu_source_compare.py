#!/usr/bin/env python3
"""Compares Nsight Compute source-page exports (SASS lines with executed
instructions and warp-stall samples) of two or more kernels.

Export each profile with
  ncu -i REP --page source --csv --print-source sass > NAME.csv
(the report taken with --section SourceCounters --section WarpStateStats), then
  python3 bench/gpu/ncu_source_compare.py A.csv B.csv [--top 15]
prints, for the first file against each other one, executed instructions and
sample shares per opcode, and for each file its stall reasons and the SASS lines
that hold the most samples.
"""
import argparse
import collections
import csv
import re


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    cols = rows[head]
    out = []
    for r in rows[head + 1:]:
        if len(r) != len(cols):
            continue
        out.append(dict(zip(cols, r)))
    return cols, out


def num(s):
    try:
        return float(s.replace(",", ""))
    except (ValueError, AttributeError):
        return 0.0


def opcode(src):
    words = src.strip().split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def summary(path):
    cols, rows = load(path)
    stall_cols = [c for c in cols if c.startswith("stall_") and "Not Issued" not in c]
    ops = collections.defaultdict(lambda: [0.0, 0.0])
    stalls = collections.Counter()
    total_inst = total_samp = 0.0
    for r in rows:
        inst, samp = num(r["Instructions Executed"]), num(r["Warp Stall Sampling (All Samples)"])
        op = ops[opcode(r["Source"])]
        op[0] += inst
        op[1] += samp
        total_inst += inst
        total_samp += samp
        for c in stall_cols:
            stalls[c] += num(r[c])
    return dict(rows=rows, ops=ops, stalls=stalls, inst=total_inst, samp=total_samp, stall_cols=stall_cols)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    s = [summary(f) for f in args.files]
    name = lambda f: re.sub(r"\.csv$", "", f.rsplit("/", 1)[-1])
    for f, x in zip(args.files[1:], s[1:]):
        a = s[0]
        print(f"## {name(args.files[0])} vs {name(f)}: per opcode (executed M instructions, share of samples)")
        print(f"{name(args.files[0])}: inst {a['inst'] / 1e6:.1f}M samples {a['samp']:.0f}   "
              f"{name(f)}: inst {x['inst'] / 1e6:.1f}M samples {x['samp']:.0f}")
        print(f"{'op':10} {'A Minst':>9} {'B Minst':>9} {'diff':>8} {'A samp%':>8} {'B samp%':>8}")
        keys = sorted(set(a["ops"]) | set(x["ops"]), key=lambda k: -(a["ops"][k][0] + x["ops"][k][0]))
        for k in keys[:25]:
            ai, asamp = a["ops"][k]
            bi, bsamp = x["ops"][k]
            print(f"{k:10} {ai / 1e6:9.1f} {bi / 1e6:9.1f} {(ai - bi) / 1e6:8.1f} "
                  f"{100 * asamp / max(a['samp'], 1):8.1f} {100 * bsamp / max(x['samp'], 1):8.1f}")
        print()
    for f, x in zip(args.files, s):
        print(f"## {name(f)}: stall reasons and top instructions")
        print(f"total samples {x['samp']:.0f}, instructions {x['inst'] / 1e6:.1f}M")
        for c, v in x["stalls"].most_common(9):
            print(f"  {c:32} {v:10.0f} {100 * v / max(x['samp'], 1):5.1f}%")
        top = sorted(x["rows"], key=lambda r: -num(r["Warp Stall Sampling (All Samples)"]))[: args.top]
        for r in top:
            samp = num(r["Warp Stall Sampling (All Samples)"])
            why = sorted(((num(r[c]), c[6:]) for c in x["stall_cols"]), reverse=True)[:2]
            print(f"  {r['Address']:>6} {samp:8.0f} {100 * samp / max(x['samp'], 1):4.1f}% x "
                  f"{num(r['Instructions Executed']) / 1e6:5.2f}M {r['Source'].strip()[:60]:60} "
                  + " ".join(f"{c}:{v:.0f}" for v, c in why))
        print()


if __name__ == "__main__":
    main()
