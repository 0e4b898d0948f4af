#!/usr/bin/env bash
# CI wrapper around `ember sweep`: runs the given run configs (files or directories of
# *.toml), writes the summary as JSON and CSV into $EMBER_SWEEP_OUT (default
# sweep-results/), verifies every finished output directory with `ember verify`, and
# exits non-zero if any run failed or any result does not verify. No progress line:
# output is plain lines, fit for CI logs.
#   scripts/sweep.sh [--jobs N] [--force] CONFIG_OR_DIR...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ember=${EMBER:-"${EMBER_BUILD_DIR:-$root/build}/app/ember"}
out=${EMBER_SWEEP_OUT:-sweep-results}
if [ "$#" -eq 0 ]; then
  echo "usage: scripts/sweep.sh [--jobs N] [--force] CONFIG_OR_DIR..." >&2
  exit 2
fi
[ -x "$ember" ] || { echo "error: $ember not found (build first, or set EMBER)" >&2; exit 2; }
mkdir -p "$out"

status=0
"$ember" sweep "$@" --summary "$out/summary.json" | cat || status=$?
if [ ! -f "$out/summary.json" ]; then
  echo "error: the sweep wrote no summary (exit $status)" >&2
  exit "${status:-1}"
fi

# The CSV beside the JSON, and every finished run checked once more.
/usr/bin/python3 - "$out/summary.json" "$out/summary.csv" <<'PY'
import csv, json, sys
rows = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["config"])
    w.writeheader()
    w.writerows(rows)
PY
while IFS= read -r dir; do
  [ -n "$dir" ] || continue
  if ! "$ember" verify "$dir" > /dev/null; then
    echo "error: $dir does not verify" >&2
    status=1
  fi
done < <(/usr/bin/python3 -c 'import json,sys; [print(r["output_dir"]) for r in json.load(open(sys.argv[1])) if r["outcome"] in ("ok", "skipped")]' "$out/summary.json")

echo "summary: $out/summary.json, $out/summary.csv"
exit "$status"
