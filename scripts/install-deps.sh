#!/usr/bin/env bash
# Installs the Debian packages k3.cpp needs to build and test. Idempotent: apt runs only when
# something is missing. Needs root (or sudo) the first time on a fresh machine.
set -euo pipefail

# python3-torch (Debian's CPU build, with numpy): the whole-model gradient test's float64
# autograd reference (tests/reference/k3_torch.py).
PACKAGES=(build-essential cmake ninja-build pkg-config g++ libgtest-dev nlohmann-json3-dev
          liblzma-dev libedit-dev python3-numpy python3-torch libcpp-httplib-dev python3-venv
          chromium chromium-driver)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
