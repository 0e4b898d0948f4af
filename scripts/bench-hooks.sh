#!/usr/bin/env bash
# The disabled-path A/B (issue 5): decode speed of `ember run` with no experiment
# (A: no runner, the DisabledHooks forward pass) against one experiment that implements
# no stage (B: the ActiveHooks forward pass and the runner's dispatch, calling nothing),
# same config, interleaved A B / B A for ROUNDS rounds (each side runs ROUNDS times). Decode time per token comes from each run's run.json (decode_ms /
# decode_evaluations: in-process, no start-up or loading). Prints every run, then per
# side the median, min, max and interquartile range, B's median relative to A's, and the
# B/A ratio within each round (neighbouring runs, so a shared machine's drift cancels).
#
#   scripts/bench-hooks.sh [MODEL.gguf] [ROUNDS] [TOKENS] [ROUTE] [THREADS]
#
# Defaults: ../shared/fixtures/models/synth-llama3-q8_0.gguf (a 128256-token vocabulary:
# a few ms per decoded token on the reference route), 10 rounds, 128 tokens, route
# reference, 1 thread. For a 1B-shaped model on the fast route:
#   build/app/ember synth --shape llama-1b --vocab-from ../shared/fixtures/models/synth-llama3-q8_0.gguf /tmp/llama-1b.gguf
#   scripts/bench-hooks.sh /tmp/llama-1b.gguf 10 64 fast 2
# Needs the built ember and the test plugin no-stages (cmake --build build --target
# ember test_plugin_no_stages).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ember=${EMBER_BINARY:-$root/build/app/ember}
plugin=${EMBER_NO_STAGES_PLUGIN:-$root/build/tests/experiments/plugins/libno-stages.so}
model=${1:-$root/../shared/fixtures/models/synth-llama3-q8_0.gguf}
rounds=${2:-10}
tokens=${3:-128}
route=${4:-reference}
threads=${5:-1}
for f in "$ember" "$plugin" "$model"; do
  [ -f "$f" ] || { echo "bench-hooks: missing $f" >&2; exit 1; }
done
model=$(realpath "$model")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/bench.toml" <<TOML
[model]
path = '$model'
route = "$route"
threads = $threads
[prompt]
text = "Once upon a time, there was a little girl"
[generation]
max_tokens = $tokens
[output]
dir = "out"
overwrite = true
TOML

run_side() {  # A: no experiment; B: --experiment no-stages
  local args=()
  [ "$1" = B ] && args=(--experiment "$plugin")
  "$ember" run "${args[@]}" "$work/bench.toml" > /dev/null 2> "$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
  python3 - "$work/out/run.json" "$1" >> "$work/results" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
assert run["hooks"] == ("disabled" if sys.argv[2] == "A" else "active"), run["hooks"]
t = run["timings"]
print(sys.argv[2], t["decode_ms"] / t["decode_evaluations"], t["decode_evaluations"])
PY
}

echo "model $model, route $route, $tokens tokens, $threads thread(s), $rounds rounds (A = no experiment, B = one experiment with no stages)"
for ((i = 1; i <= rounds; i++)); do
  if ((i % 2)); then run_side A; run_side B; else run_side B; run_side A; fi
done

python3 - "$work/results" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
print("order: " + " ".join(side for side, _, _ in runs))
side = {s: [float(ms) for name, ms, _ in runs if name == s] for s in "AB"}
for s, label in (("A", "no experiment (DisabledHooks)"), ("B", "no-stages experiment (ActiveHooks)")):
    v = sorted(side[s])
    q1, _, q3 = statistics.quantiles(v, n=4)
    print(f"{s} {label}: n={len(v)} median {statistics.median(v):.4f} ms/token, "
          f"min {v[0]:.4f}, max {v[-1]:.4f}, IQR {q1:.4f}-{q3:.4f}")
    print("   runs: " + " ".join(f"{x:.4f}" for x in side[s]))
a, b = statistics.median(side["A"]), statistics.median(side["B"])
print(f"B/A of the medians: {b / a:.4f} ({(b - a) / a * 100:+.2f}%)")
# Each round's two runs are neighbours in time: their ratio cancels slow drifts of a shared machine.
ratios = sorted(rb / ra for ra, rb in zip(side["A"], side["B"]))
print(f"B/A per round: median {statistics.median(ratios):.4f}, min {ratios[0]:.4f}, max {ratios[-1]:.4f}")
PY
