#!/usr/bin/env bash
# Session 46: call52.sh slimmed to hd64 / hd128 and three rounds (~2.5 minutes): v24's cut
# tests and graph test, then A = cuts off / B = the plan / C = main before v24, and the
# few-tiles call.
# run(command="bash .devc/call53.sh 2>&1 | tee $OUT/call53.log", carry=[".devc"]).
HDIMS=64,128 ROUNDS=3 LIMIT=150 exec bash "$(dirname "$0")/call52.sh"
