# Helpers of the planned device calls (call1.sh, call2.sh): logs under $OUT/logs, packed
# into $OUT/logs.tar.gz after every step; tst runs a GoogleTest binary in shards.
export PYTHONUNBUFFERED=1
logs=$OUT/logs; mkdir -p "$logs"
pack() { tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs 2>/dev/null; }
# tst NAME LIMIT SHARDS CMD...: a GoogleTest binary in SHARDS shards, summary printed
tst() {
  local name=$1 limit=$2 shards=$3; shift 3
  echo "== $name ($(date +%T))"
  local i pids=()
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=2 timeout "$limit" "$@" > "$logs/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do wait "${pids[$i]}"; local rc=$?; [ $rc -ne 0 ] && echo "shard $i exit $rc"; done
  cat "$logs/$name".*.log > "$logs/$name.log"; rm "$logs/$name".*.log
  grep -hoE '^\[  PASSED  \] [0-9]+' "$logs/$name.log" | awk '{s += $4} END {print "passed:", s + 0}'
  grep -hE '^\[  FAILED  \] [A-Za-z].*\(' "$logs/$name.log" | sort -u | head -20
  grep -hE "ERROR SUMMARY" "$logs/$name.log" | sort | uniq -c
  pack
}
# grid NAME SHIM [bench_gpu.py args]: the contract's grid into $OUT/grid_NAME.json, the table
# printed; skipped when less than 30 s of ${CAP:-560} remain since $start (set by the caller).
grid() {
  local left=$((${CAP:-560} - (SECONDS - start)))
  [ $left -lt 30 ] && { echo "no time for $1"; return; }
  timeout $left python3 bench/gpu/bench_gpu.py --shim "$2" "${@:3}" --json "$OUT/grid_$1.json" > "/tmp/grid_$1.txt" 2>&1
  echo "grid $1 done at $((SECONDS - start)) s"; cat "/tmp/grid_$1.txt"
}
# unpack NAME...: .devc/NAME.tar.xz (prepare.sh's packs) fresh into .dev/NAME, then the GPU's
# name, clock and power limit printed.
unpack() {
  local n
  for n in "$@"; do rm -rf ".dev/$n"; done
  python3 -c "import sys, tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in sys.argv[1:]]" "$@"
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
}
