#!/usr/bin/env bash
# Fuzzes the GGUF loader with libFuzzer (clang, ASan + UBSan) for SECONDS (default 60),
# starting from the committed seed corpus tests/fuzz/corpus (never modified: new inputs
# go to a scratch directory). Findings are written to fuzz-out/ and fail the script.
#   scripts/fuzz-gguf.sh [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${EMBER_FUZZ_BUILD_DIR:-$root/build-fuzz}
source "$root/scripts/ccache-args.sh"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEMBER_SANITIZE=ON -DEMBER_FUZZ=ON "${ccache_args[@]}" >/dev/null
cmake --build "$build" -j "${EMBER_JOBS:-2}" --target gguf_fuzz >/dev/null
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$root/fuzz-out"
"$build/tests/fuzz/gguf_fuzz" "$scratch" "$root/tests/fuzz/corpus" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$root/fuzz-out/" -print_final_stats=1 2>&1 | grep -E "^(#[0-9]+ +DONE|stat::|INFO: Seed|==)|ERROR|SUMMARY" || true
# libFuzzer exits non-zero on a finding; the pipe above hides that, so check artifacts.
if compgen -G "$root/fuzz-out/crash-*" >/dev/null || compgen -G "$root/fuzz-out/leak-*" >/dev/null ||
   compgen -G "$root/fuzz-out/timeout-*" >/dev/null || compgen -G "$root/fuzz-out/oom-*" >/dev/null; then
  echo "fuzz-gguf: findings in fuzz-out/" >&2
  exit 1
fi
echo "fuzz-gguf: ${seconds}s without a finding"
