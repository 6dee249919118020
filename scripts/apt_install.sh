#!/usr/bin/env bash
# Installs the named Debian/Ubuntu packages that are missing (apt, with sudo when
# not root); nothing when all are there. Used by setup.sh and arm64_check.sh.
# Usage: bash scripts/apt_install.sh [--no-recommends] WHO PACKAGE...   (WHO prefixes the message)
set -euo pipefail
extra=()
if [ "${1:-}" = "--no-recommends" ]; then
  extra=(--no-install-recommends)
  shift
fi
who=$1
shift
missing=()
for p in "$@"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "$who: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${extra[@]}" "${missing[@]}" >/dev/null
fi
