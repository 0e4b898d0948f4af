#!/usr/bin/env bash
# Fuzzes the GGUF loader with libFuzzer in the sanitizer tree (sanitizer-build.sh: clang,
# ASan + UBSan) for SECONDS (default 60), starting from the committed seed corpus
# tests/fuzz/corpus (never modified: new inputs go to a scratch directory). Findings are
# written to fuzz-out/ and fail the script.
#   scripts/fuzz-gguf.sh [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=$("$root/scripts/sanitizer-build.sh" gguf_fuzz)
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
