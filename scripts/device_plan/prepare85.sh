#!/usr/bin/env bash
# Builds what call85.sh / call86.sh carry (sm90 forward v32, branch s54-sm90-fwd-q-per-group):
# main's bf16 sm_90a build as .devc/l2.tar.xz and the branch's as .devc/g.tar.xz (prepare.sh
# with GPU_ONLY=1 on each; the branch rebuilds the forward units, ~3 minutes with a warm
# cache), then the call scripts into .devc. Run on main with a clean tree; it returns to main.
# Usage: bash scripts/device_plan/prepare85.sh   (then run(... call85.sh ...), see its header)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/device_plan
[ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "commit or stash first"; exit 1; }
PACK=l2 GPU_ONLY=1 bash $here/prepare.sh
git checkout -q s54-sm90-fwd-q-per-group
trap 'git checkout -q main' EXIT
PACK=g GPU_ONLY=1 bash $here/prepare.sh
cp $here/lib.sh $here/call85.sh $here/call86.sh .devc/
# The device call carries the tree and .devc together (64 MiB at most): only these packs.
find .devc -name '*.tar.xz' ! -name l2.tar.xz ! -name g.tar.xz -delete
du -sh .devc
