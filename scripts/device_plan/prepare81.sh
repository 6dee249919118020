#!/usr/bin/env bash
# Builds what call81.sh carries (sm90 forward v30, branch s53-sm90-fwd-l2-sections): run
# prepare.sh on main first (.devc/v.tar.xz), then this on the branch (.devc/l.tar.xz; only
# the three bf16 forward units and the links rebuild, ~2 minutes with a warm cache).
# Usage: bash scripts/device_plan/prepare81.sh   (then run(... call81.sh ...), see its header)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/device_plan
[ -f .devc/v.tar.xz ] || { echo "no .devc/v.tar.xz: run prepare.sh on main first"; exit 1; }
[ -f src/kernels/sm90/fwd_sections.h ] || { echo "no fwd_sections.h: check out s53-sm90-fwd-l2-sections"; exit 1; }
PACK=l GPU_ONLY=1 bash $here/prepare.sh
cp $here/call81.sh $here/call80.sh .devc/
du -sh .devc
