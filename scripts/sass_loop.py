#!/usr/bin/env python3
"""A kernel's inner loop in static SASS, counted by opcode: the instructions one warp issues per
step of the main loop, the longest forward branch inside it (the masked path) left out.

    python3 scripts/sass_loop.py OBJECT_OR_LIBRARY [--kernel SUBSTRING] [--index K]
                                 [--min-len 500] [--max-len 1500] [--top 20] [--exclude START-END]

OBJECT_OR_LIBRARY is anything `cuobjdump -sass` reads (a build's .cu.o, the benchmark shim).
No GPU is needed. Where the CUDA toolkit lacks cuobjdump / nvdisasm, the PyPI wheels
`nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm` carry them: `pip download --no-deps` both,
unzip, and put their `nvidia/cu*/bin` on PATH. The loop is the backward branch spanning
between --min-len and --max-len instructions (the longest such); compare two builds of a
kernel by the same options. Where a loop has more than one masked path (the Hopper forward:
none, one bound, two bounds), only the longest is left out by itself: name the others with
--exclude START-END (hex addresses, from `cuobjdump -sass`).
"""
import argparse
import collections
import re
import subprocess
import sys


def kernels(sass):
    """(name, [(address, instruction)]) for each function in cuobjdump's listing."""
    name, body = None, []
    for line in sass.splitlines():
        if "Function :" in line:
            if name:
                yield name, body
            name, body = line.split("Function :")[1].strip(), []
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2).strip()))
    if name:
        yield name, body


def target(ins):
    m = re.search(r"BRA[^0-9]*0x([0-9a-f]+)", ins)
    return int(m.group(1), 16) if m else None


def opcode(ins):
    return re.sub(r"^@!?U?P\w+\s+", "", ins).split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--kernel", default="", help="a substring of the mangled name")
    ap.add_argument("--index", type=int, default=0, help="which of the matching kernels")
    ap.add_argument("--min-len", type=int, default=500)
    ap.add_argument("--max-len", type=int, default=1500)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--exclude", action="append", default=[], metavar="START-END",
                    help="also leave out the addresses [START, END) (hex), e.g. a second masked path; repeatable")
    a = ap.parse_args()
    sass = subprocess.run(["cuobjdump", "-sass", a.binary], capture_output=True, text=True, check=True).stdout
    found = [k for k in kernels(sass) if a.kernel in k[0]]
    if len(found) <= a.index:
        sys.exit(f"no kernel {a.index} matching '{a.kernel}' ({len(found)} found)")
    name, body = found[a.index]
    print(name)
    loops = [(t, addr) for addr, ins in body if (t := target(ins)) is not None
             and a.min_len * 16 <= addr - t <= a.max_len * 16]
    if not loops:
        sys.exit("no loop of that length; widen --min-len / --max-len")
    lo, hi = max(loops, key=lambda x: x[1] - x[0])
    loop = [(addr, ins) for addr, ins in body if lo <= addr <= hi]
    forward = [(addr, t) for addr, ins in loop if ins.startswith("BRA ") and (t := target(ins)) and t > addr]
    skip = max(forward, key=lambda x: x[1] - x[0]) if forward else (0, 0)
    excluded = [tuple(int(x, 16) for x in r.split("-")) for r in a.exclude]
    counts = collections.Counter(opcode(ins) for addr, ins in loop if not skip[0] < addr < skip[1]
                                 and not any(s <= addr < e for s, e in excluded))
    spills = sum(1 for _, ins in body if re.search(r"\b(LDL|STL)\b", ins))
    also = "".join(f", {s:#x}-{e:#x}" for s, e in excluded)
    print(f"loop {lo:#x}-{hi:#x} ({len(loop)} instructions), branch {skip[0]:#x}-{skip[1]:#x}{also} left out: "
          f"{sum(counts.values())} on the path; LDL/STL in the kernel: {spills}")
    for op, n in counts.most_common(a.top):
        print(f"  {n:5d}  {op}")


if __name__ == "__main__":
    main()
