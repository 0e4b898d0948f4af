#!/usr/bin/env bash
# Installs what Ember needs to build and test, from Debian bookworm packages only.
# Idempotent: packages already present are not reinstalled. Runs as root, or via sudo.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev
  libfmt-dev libtbb-dev doctest-dev libtomlplusplus-dev
  unicode-data                 # UnicodeData.txt: the tokenizer's Unicode tables are generated from it
  clang libclang-rt-14-dev     # libFuzzer and the sanitizer build
  python3 python3-numpy        # tests read .npy files the way a researcher would
  python3-pandas               # the docs' worked examples use it, and tests/docs runs them
  pybind11-dev python3-pybind11 python3-dev python3-pytest  # the Python package (python/) and its tests
  slurm-wlm munge              # scripts/test-slurm.sh: a one-host Slurm cluster for ember sweep --slurm
  ccache                       # the build scripts reuse objects between builds and clones
  ninja-build                  # new build trees use Ninja (scripts/cmake-args.sh)
  python3-torch                # test-only: tests/attribution checks gradients against PyTorch autograd
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
