#!/usr/bin/env bash
# Session 45's plan for the next GPU session: call 49 again on v43's last form (.devc/d.tar.xz):
# the consumers keep their batch entry in a register again (call 49: the build ~2% slower
# than main at hd64 with it read from shared memory). Tests of the cut and of hd64 / hd128
# (bf16 only: the build has no fp16), then main / the build / the cut off at hd64, three rounds.
# run(command="bash .devc/call50.sh 2>&1 | tee $OUT/call50.log", carry=[".devc"]), ~4 minutes.
FILTER='HopperTail/*all_cut*:Sm90Tail*:Hopper/CudaBackward*hdim64*:Hopper/CudaBackward*hdim128_full*:Hopper/CudaBackward*hdim128_softcap*-*_f16_*' \
  ROUNDS=${ROUNDS:-3} exec bash "$(dirname "$0")/call49.sh"
