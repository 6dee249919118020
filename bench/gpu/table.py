"""Markdown table of a bench_gpu.py JSON (bf16 TFLOP/s), for the README.

Usage: python bench/gpu/table.py RESULT.json [--seqlens 512,2048,16384]"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--seqlens", default="512,2048,16384")
    a = ap.parse_args()
    rows = json.load(open(a.json))["rows"]
    keep = {int(n) for n in a.seqlens.split(",")}
    cols = [("ours_fwd", "flashattn fwd"), ("ours_sm80_fwd", "sm80 fwd"), ("flash_fwd", "FA2 fwd"),
            ("cudnn_fwd", "cuDNN fwd"), ("ours_bwd", "flashattn bwd"), ("ours_sm80_bwd", "sm80 bwd"), ("flash_bwd", "FA2 bwd"),
            ("cudnn_bwd", "cuDNN bwd")]
    cols = [(k, t) for k, t in cols if any(f"{k}_tflops" in r for r in rows)]
    print("| D | causal | N | " + " | ".join(t for _, t in cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for r in rows:
        if r["seqlen"] in keep:
            vals = " | ".join(f"{r[k + '_tflops']:.0f}" if k + "_tflops" in r else "-" for k, _ in cols)
            print(f"| {r['hdim']} | {'yes' if r['causal'] else 'no'} | {r['seqlen']} | {vals} |")


if __name__ == "__main__":
    main()
