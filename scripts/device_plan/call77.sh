#!/usr/bin/env bash
# Session 52: sm90 forward v29, the narrow first key tile (a group whose keys end within the
# first half of its walk's first key tile, the causal diagonal's upper rows, computes S there
# over that half: 64 x 64 wgmmas at hd64 / hd128's 128 x 128, 64 x 32 at hd256's 128 x 64).
# n3 = S and its P V narrowed (FLASHATTN_FWD_NARROW=2) in the two- and three-group kernels
# (hd64's 192-row blocks too), n1 = S alone (=1), two-group kernels: build-sm90-f (bf16) with the
# forward units rebuilt (.devc/n3.tar.xz, .devc/n1.tar.xz); v = main (.devc/v.tar.xz).
# n3's forward tests (bf16) with the graph / KV-cache / split suites, memcheck and racecheck on
# small causal and window cases, then the A/B of v, n1 and n3 (forward only), three rounds,
# N = 512 .. 4096, causal and not; then main's capped grid with what time is left.
# run(command="bash .devc/call77.sh 2>&1 | tee $OUT/call77.log", carry=[".devc"], timeout_s=590)
# (CAP=270 TLIM=130 GRID_S=0 ROUNDS=2 AB_ARGS="--causal 1": short tests and the causal rows alone.)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-570}
rm -rf .dev/n1 .dev/n3 .dev/v
python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in ('v', 'n1', 'n3')]"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
T=.dev/n3/flashattn_tests
tst fwd ${TLIM:-200} 8 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*:CudaLarge*-*_f16_*' &
tst memcheck ${TLIM:-200} 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_causal_s*:Hopper/CudaForward*hdim64_causal_s*:Hopper/CudaForward*hdim256_causal_sq*:Hopper/CudaForward*hdim128_packed_causal*:Hopper/CudaForward*hdim64_causal_long_bf16*:Hopper/CudaForward*hdim128_window_bf16*-*_f16_*' --gtest_brief=1 &
tst racecheck ${TLIM:-200} 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_causal_sq*:Hopper/CudaForward*hdim64_causal_sk*:Hopper/CudaForward*hdim256_causal_sq*:Hopper/CudaForward*hdim128_window_bf16*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((CAP - ${GRID_S:-150} - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/v/libflashattn_bench_shim.so \
  .dev/n1/libflashattn_bench_shim.so,.dev/n3/libflashattn_bench_shim.so $OUT/ab_n --fwd-only \
  --seqlens 512,1024,2048,4096 ${AB_ARGS:-} > $OUT/ab_n.txt 2>&1
tail -30 $OUT/ab_n.txt
tar czf $OUT/ab_n.tgz -C $OUT ab_n 2>/dev/null && rm -rf $OUT/ab_n
echo "A/B done at $((SECONDS - start)) s"
grid capped .dev/v/libflashattn_bench_shim.so --warmup-ms 100
[ -f $OUT/grid_capped.json ] && python3 bench/gpu/targets.py $OUT/grid_capped.json
pack
echo "all done at $((SECONDS - start)) s"
