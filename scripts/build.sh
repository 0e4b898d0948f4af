#!/usr/bin/env bash
# Configures and builds the Release tree in build/ (or $EMBER_BUILD_DIR) with -j2.
# Arguments go to `cmake --build`: `scripts/build.sh --target ember` builds one target.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${EMBER_BUILD_DIR:-$root/build}
source "$root/scripts/cmake-args.sh"
ember_generator "$build"
cmake -S "$root" -B "$build" "${generator_args[@]}" -DCMAKE_BUILD_TYPE=Release "${ccache_args[@]}" >/dev/null
cmake --build "$build" -j "${EMBER_JOBS:-2}" "$@"
