#!/usr/bin/env bash
# Install what stretch needs to build and test, with apt-get, only when missing.
# Idempotent; works as root on a fresh Debian 12 machine (uses sudo otherwise).
#   --with-python : also PyTorch (python3-torch) and matplotlib for the reference checks,
#                   the side-by-side benchmark and the plots.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libcjson-dev zlib1g-dev
      libdnnl-dev   # oneDNN: precision bf16 (optional at build time: fp32 only without it)
      libopenmpi-dev openmpi-bin)   # MPI: data-parallel train/eval/sweep (STRETCH_MPI)
for a in "$@"; do
  case "$a" in
    --with-python) pkgs+=(python3 python3-torch python3-matplotlib python3-numpy) ;;
    *) echo "install_deps.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
