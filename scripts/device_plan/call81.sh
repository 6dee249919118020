#!/usr/bin/env bash
# Session 53's plan: sm90 forward v30 (branch s53-sm90-fwd-l2-sections: heavy-first sections
# of short calls sized to what L2 holds, fwd_sections.h). v = main (.devc/v.tar.xz), l = the
# branch (.devc/l.tar.xz; prepare81.sh). l's forward tests (bf16) with the graph / KV-cache /
# split suites, memcheck on small causal cases; ncu of DRAM bytes and time, one forward of
# each build at hd128 N = 512 / 1024 and hd64 / hd256 N = 512 causal (v30's claim: DRAM bytes
# from 1.28-1.47x cuDNN's to ~1.0x); then the A/B of v and l (forward only), four rounds,
# N = 512 .. 4096 causal.
# run(command="bash .devc/call81.sh 2>&1 | tee $OUT/call81.log", carry=[".devc"], timeout_s=500)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-470}
unpack v l
T=.dev/l/flashattn_tests
tst fwd ${TLIM:-150} 8 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*-*_f16_*' &
tst memcheck ${TLIM:-150} 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_causal_s*:Hopper/CudaForward*hdim64_causal_s*:Hopper/CudaForward*hdim256_causal_sq*:Hopper/CudaForward*hdim128_window_bf16*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
for b in v l; do
  timeout 90 ncu --profile-from-start off --clock-control none -k regex:fwd_kernel \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
    python3 bench/gpu/kernel_timeline.py .dev/$b/libflashattn_bench_shim.so ncu 128:512:1:1,128:1024:1:1,64:512:1:1,256:512:1:1 \
    > $OUT/ncu_dram_$b.txt 2>&1
  echo "== $b"; grep -E 'fwd_kernel|duration|dram__bytes|hit_rate' $OUT/ncu_dram_$b.txt | sed 's/(flashattn::FwdArgs.*//' | cut -c1-110
done
echo "ncu done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-4} timeout $((CAP - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/v/libflashattn_bench_shim.so \
  .dev/l/libflashattn_bench_shim.so $OUT/ab_l --fwd-only --seqlens 512,1024,2048,4096 --causal 1 ${AB_ARGS:-} > $OUT/ab_l.txt 2>&1
tail -14 $OUT/ab_l.txt
rm -rf $OUT/ab_l
pack
echo "all done at $((SECONDS - start)) s"
