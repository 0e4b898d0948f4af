#!/usr/bin/env bash
# The cost of one `ember attribute` (docs/attribution.md): on the Llama-3.2-1B-shaped Q8_0
# model of scripts/bench.sh (16 layers, random weights, written once with `ember synth`), a
# prompt of 128 tokens, after_layer gradients of every layer at every position. Prints the
# gradient forward's and the backward's times, their ratio against the bound of 3, and the
# peak RSS against the budget of the model file + 2 GB.
# The acceptance cases: this default (128 tokens: 8 min on an idle 2-core Intel Xeon, 2026-12-03)
# and the 1B shape at 512 tokens (about 75 min there, most of it beside other work):
#   EMBER_BENCH_TOKENS=512 scripts/bench-attribute.sh
#   scripts/bench-attribute.sh            (EMBER_BENCH_TOKENS, EMBER_BENCH_THREADS, EMBER_BUILD_DIR, EMBER_BENCH_MODELS;
#                                          EMBER_BENCH_SHAPE=llama-1b-2layer: two of the 1B's layers, for memory per layer)
# The machine's load average is printed before and after: on a shared machine the times
# are the load's as much as Ember's (the ratio and the RSS are the numbers to read).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
tokens=${EMBER_BENCH_TOKENS:-128}

bench_build_ember
model=$(bench_model "${EMBER_BENCH_TYPE:-q8_0}" "${EMBER_BENCH_SHAPE:-llama-1b}")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# A prompt of exactly $tokens tokens: a long text tokenized once, cut where token $tokens starts.
prompt=$(python3 - "$ember" "$model" "$tokens" <<'PY'
import json, subprocess, sys
ember, model, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
words = ("the quick brown fox jumps over the lazy dog while a student writes the lesson in the library "
         "and the teacher reads a long story about the sea").split()
text = "Once " + " ".join(words[i % len(words)] for i in range(2 * want))
tokens = json.loads(subprocess.run([ember, "tokenize", "--model", model, "--prompt", text, "--json"],
                                   capture_output=True, text=True, check=True).stdout)["tokens"]
print(text.encode()[:tokens[want]["start"]].decode(), end="")
PY
)

echo "load before: $(uptime)"
/usr/bin/time -v "$ember" attribute --model "$model" --prompt "$prompt" --target " and" --stages after_layer \
    --layers all --positions all --threads "$threads" --out "$out/run" --json >"$out/summary.json" 2>"$out/time.txt"
python3 - "$out/summary.json" "$out/time.txt" "$model" <<'PY'
import json, os, re, sys
s = json.load(open(sys.argv[1]))
rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read()).group(1))
model_mb = os.path.getsize(sys.argv[3]) / 2**20
print(f"prompt tokens {s['prompt_tokens']} (evaluated {s['evaluated_tokens']}), arrays {s['arrays']}")
ratio = s['backward_ms'] / s['forward_ms']
rss_mb = rss_kb / 1024
budget_mb = model_mb + 2048
print(f"forward {s['forward_ms']:.0f} ms, backward {s['backward_ms']:.0f} ms, "
      f"backward/forward {ratio:.2f} ({'within' if ratio <= 3 else 'OVER'} the bound of 3)")
print(f"peak RSS {rss_mb:.0f} MB against the budget model file + 2048 MB = {model_mb:.0f} + 2048 = {budget_mb:.0f} MB: "
      f"{'within' if rss_mb <= budget_mb else 'OVER'} ({rss_mb / budget_mb:.0%} of it)")
PY
echo "load after: $(uptime)"
