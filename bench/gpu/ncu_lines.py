#!/usr/bin/env python3
"""Puts source lines on Nsight Compute's per-SASS-line samples, and compares two profiles
of the same kernel (e.g. N = 2048 against N = 16384) line by line.

ncu's source page has no line numbers unless the kernel was built with -lineinfo and the
source is at hand; this reads them from the cubin instead. On the GPU machine:
  1. build the one instantiation unit with -lineinfo (scripts/variant_build.sh BUILD OUT .
     sm90/instantiations/fwd_hdim128_bf16_sm90.cu -lineinfo), profile as
     ncu_source_compare.py says, export each report with
       ncu -i REP --page source --csv --print-source sass > NAME.csv
  2. cuobjdump -xelf all SHIM_OR_BINARY   (one .cubin per unit, named after it)
     nvdisasm -g -c UNIT.sm_90a.cubin > UNIT.sass
Then here:
  python3 bench/gpu/ncu_lines.py UNIT.sass KERNEL_SUBSTRING A.csv [B.csv] [--top 40]
KERNEL_SUBSTRING picks the kernel in the dump by its mangled name (e.g. Li128ELi192E for the
128 x 192 tile); the script checks that every profiled SASS line matches the dump's.
It prints the sample share per line of the kernel's own file (inlined code carries the last
such line above it) and the SASS lines whose share grew most from B to A, with the innermost
source location and the two largest stall reasons.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_source_compare import load, num, opcode  # noqa: E402

SAMPLES = "Warp Stall Sampling (All Samples)"


def sass_lines(path, kernel, own_file):
    """(offset, instruction, innermost 'file:line', last line of own_file) per instruction."""
    out, cur, loc, own = [], False, "?", None
    for s in open(path):
        if s.startswith(".text."):
            cur = kernel in s
            continue
        if not cur:
            continue
        m = re.match(r'\s*//## File "([^"]+)", line (\d+)', s)
        if m:
            name = os.path.basename(m.group(1))
            loc = f"{name}:{m.group(2)}"
            if name == own_file:
                own = int(m.group(2))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", s)
        if m:
            out.append((int(m.group(1), 16), m.group(2), loc, own))
    return out


def profile(path):
    """offset from the kernel's first instruction -> (samples, executions, source, row)."""
    _, rows = load(path)
    base = int(rows[0]["Address"], 16)
    return {int(r["Address"], 16) - base: (num(r[SAMPLES]), int(num(r["Instructions Executed"])), r["Source"].strip(), r)
            for r in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sass")
    ap.add_argument("kernel")
    ap.add_argument("profiles", nargs="+")
    ap.add_argument("--own-file", default="fwd_kernel.cuh", help="the kernel's own source file")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    ins = sass_lines(a.sass, a.kernel, a.own_file)
    if not ins:
        sys.exit(f"no kernel matching {a.kernel!r} in {a.sass}")
    by_off = {o: (t, loc, own) for o, t, loc, own in ins}
    profs = [profile(p) for p in a.profiles]
    for p, path in zip(profs, a.profiles):
        # the opcode of each profiled line must be the dump's (same binary, same kernel)
        bad = [o for o, v in p.items() if o not in by_off or opcode(by_off[o][0]) != opcode(v[2])]
        if len(p) != len(ins) or len(bad) > len(p) // 100:
            sys.exit(f"{path}: {len(p)} SASS lines against {len(ins)} in the dump, {len(bad)} differ: another kernel?")
    totals = [max(1, sum(v[0] for v in p.values())) for p in profs]
    names = [os.path.basename(p) for p in a.profiles]
    print(f"## samples per {a.own_file} line (share of all samples)")
    print(f"{'line':>6} " + " ".join(f"{n:>14}" for n in names))
    per_line = {}
    for i, p in enumerate(profs):
        for o, v in p.items():
            per_line.setdefault(by_off[o][2], [0.0] * len(profs))[i] += v[0] / totals[i]
    for line, sh in sorted(per_line.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"{line!s:>6} " + " ".join(f"{x * 100:13.2f}%" for x in sh))
    if len(profs) < 2:
        return
    print(f"\n## SASS lines whose share grew most from {names[1]} to {names[0]}")
    print("offset  share A  share B  executions A  instruction / innermost source / own line / top stalls")
    rows = []
    for o, v in profs[0].items():
        b = profs[1].get(o, (0,))[0] / totals[1]
        stalls = sorted(((num(v[3][c]), c[6:]) for c in v[3] if c.startswith("stall_") and "Not Issued" not in c),
                        reverse=True)[:2]
        rows.append((v[0] / totals[0] - b, o, v[0] / totals[0], b, v[1], stalls))
    for _, o, sa, sb, n, stalls in sorted(rows, reverse=True)[:a.top]:
        t, loc, own = by_off[o]
        st = " ".join(f"{name}:{k:.0f}" for k, name in stalls if k)
        print(f"{o:06x} {sa * 100:7.2f}% {sb * 100:7.2f}% {n:>13}  {t[:58]:58s} {loc:30s} {own} {st}")


if __name__ == "__main__":
    main()
