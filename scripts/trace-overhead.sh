#!/bin/sh
# The cost of tracing: `ember generate` with and without --trace, alternating, several
# times; prints the median decode and prefill times of each and the overhead.
#   scripts/trace-overhead.sh [EMBER] [MODEL.gguf] [RUNS] [MAX_TOKENS] [THREADS]
set -eu
EMBER=${1:-build/app/ember}
MODEL=${2:-../shared/fixtures/models/synth-llama3-q8_0.gguf}
RUNS=${3:-7}
TOKENS=${4:-64}
THREADS=${5:-2}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PROMPT="Once upon a time, there was a little girl who lived in a village near the forest."
i=0
while [ "$i" -lt "$RUNS" ]; do
  "$EMBER" generate --model "$MODEL" --prompt "$PROMPT" --max-tokens "$TOKENS" --threads "$THREADS" --route "${ROUTE:-reference}" --json \
    > "$TMP/off.$i.json"
  "$EMBER" generate --model "$MODEL" --prompt "$PROMPT" --max-tokens "$TOKENS" --threads "$THREADS" --route "${ROUTE:-reference}" --json \
    --trace "$TMP/trace.jsonl" > "$TMP/on.$i.json"
  i=$((i + 1))
done
/usr/bin/python3 - "$TMP" "$RUNS" "$MODEL" <<'PY'
import json, statistics, sys, os
tmp, runs, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def med(kind, key):
    return statistics.median(json.load(open(os.path.join(tmp, "%s.%d.json" % (kind, i))))["timings"][key] for i in range(runs))
on = json.load(open(os.path.join(tmp, "on.0.json")))
ops = on["trace"]["operations"]
evals = on["trace"]["evaluations"]
print("model %s: %d operations in %d evaluations (%.0f per decode evaluation)" % (os.path.basename(model), ops, evals, ops / evals))
for key in ("prefill_ms", "decode_ms"):
    off, onv = med("off", key), med("on", key)
    print("%-10s off %8.2f ms  on %8.2f ms  overhead %+6.1f%%" % (key, off, onv, 100 * (onv - off) / off))
d_off, d_on = med("off", "decode_ms"), med("on", "decode_ms")
print("per traced operation: %.0f ns" % (1e6 * (d_on - d_off) / (ops * (evals - 1) / evals)))
PY
