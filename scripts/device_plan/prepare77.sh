#!/usr/bin/env bash
# Builds what call77.sh carries (sm90 forward v29, branch s52-sm90-fwd-narrow). Run prepare.sh
# on main first (.devc/v.tar.xz, main's build), then this on the branch: n3 = the branch as it is
# (FLASHATTN_FWD_NARROW 2), n1 = the branch with the switch at 1 (S alone, two-group kernels).
# Between the two only the three bf16 forward units and the links rebuild (~4 minutes).
# Usage: bash scripts/device_plan/prepare77.sh   (then run(... call77.sh ...), see its header)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/device_plan
k=src/kernels/sm90/fwd_kernel.cuh
[ -f .devc/v.tar.xz ] || { echo "no .devc/v.tar.xz: run prepare.sh on main first"; exit 1; }
grep -qx '#define FLASHATTN_FWD_NARROW 2' $k || { echo "$k has no v29 switch: check out s52-sm90-fwd-narrow"; exit 1; }
PACK=n3 GPU_ONLY=1 bash $here/prepare.sh
sed -i 's/^#define FLASHATTN_FWD_NARROW 2$/#define FLASHATTN_FWD_NARROW 1/' $k
PACK=n1 GPU_ONLY=1 bash $here/prepare.sh
git checkout -- $k
cp $here/call77.sh .devc/
du -sh .devc
