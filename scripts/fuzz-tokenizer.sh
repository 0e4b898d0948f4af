#!/usr/bin/env bash
# Fuzzes the tokenizers' encode() with libFuzzer in the sanitizer tree (sanitizer-build.sh:
# clang, ASan + UBSan) for SECONDS (default 60) on the four fixture vocabularies, from an
# empty corpus in a scratch directory. Findings are written to fuzz-out/ and fail the script.
#   scripts/fuzz-tokenizer.sh [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=$("$root/scripts/sanitizer-build.sh" tokenizer_encode_fuzz)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$root/fuzz-out"
"$build/tests/tokenizer/tokenizer_encode_fuzz" "$scratch" \
  -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="$root/fuzz-out/tokenizer-" -print_final_stats=1 2>&1 | grep -E "^(#[0-9]+ +DONE|stat::)|ERROR|SUMMARY|encode_fuzz" || true
if compgen -G "$root/fuzz-out/tokenizer-*" >/dev/null; then
  echo "fuzz-tokenizer: findings in fuzz-out/" >&2
  exit 1
fi
echo "fuzz-tokenizer: ${seconds}s without a finding"
