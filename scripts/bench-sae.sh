#!/usr/bin/env bash
# SAE feature extraction side by side with the same extraction without the SAE (issue 26's
# benchmark; not part of CI).
#
#   scripts/bench-sae.sh [ROUNDS=3]
#
# On the Llama-3.2-1B-shaped Q8_0 model of scripts/bench.sh (n_embd 2048; written once with
# `ember synth` into $EMBER_BENCH_MODELS), 2 threads: a 16,384-feature standard SAE
# (SAELens 6 layout, F32, written with NumPy) at blocks.8.hook_resid_post, and a dataset of
# $EMBER_BENCH_SAMPLES (64) Arabic samples of about 20-40 tokens, every row selected:
#   1. ember extract --dataset --stages after_layer --layers 8          (the forward pass)
#   2. the same with --sae DIR                                          (+ the encoder)
#   3. the same with --sae DIR --sae-output sparse
# ROUNDS times, alternately; medians of the runs' own seconds (evaluation, encoding,
# writing: `--json` "seconds"), the time ratio and the encoder's cost against the forward
# pass (the target: less than it), features/s (rows x d_sae encoded per second of the
# added time), and each run's peak RSS (/usr/bin/time). The machine is shared: `uptime`
# is printed beside the numbers; compare only runs of one invocation.
# Settings: EMBER_BENCH_THREADS (2), EMBER_BENCH_SAMPLES (64), EMBER_BUILD_DIR (build).
set -euo pipefail

rounds=${1:-3}
samples=${EMBER_BENCH_SAMPLES:-64}
source "$(dirname "$0")/bench-common.sh"
bench_build_ember
model=$(bench_model q8_0)

py=python3  # one with NumPy (the tests look the same way)
$py -c 'import numpy' 2>/dev/null || py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$py - "$work" "$samples" "$root/tests/features" <<'PY'
import json, os, sys
import numpy as np
work, samples, fixtures = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, fixtures)
from sae_fixtures import write_safetensors  # the tests' hand-written safetensors writer

d_in, d_sae = 2048, 16384
rng = np.random.default_rng(26)
sae = os.path.join(work, "sae-16k")
os.makedirs(sae)
w = {"W_enc": (rng.standard_normal((d_in, d_sae), dtype=np.float32) / np.float32(np.sqrt(d_in))),
     "W_dec": (rng.standard_normal((d_sae, d_in), dtype=np.float32) / np.float32(np.sqrt(d_sae))),
     "b_enc": rng.standard_normal(d_sae, dtype=np.float32) * np.float32(0.1) - np.float32(0.5),
     "b_dec": np.zeros(d_in, dtype=np.float32)}
write_safetensors(os.path.join(sae, "sae_weights.safetensors"), w, "F32")
cfg = {"d_in": d_in, "d_sae": d_sae, "dtype": "float32", "device": "cpu", "architecture": "standard",
       "apply_b_dec_to_input": True, "normalize_activations": "none", "reshape_activations": "none",
       "metadata": {"hook_name": "blocks.8.hook_resid_post", "hook_head_index": None, "model_name": "llama-1b"}}
with open(os.path.join(sae, "cfg.json"), "w") as f:
    json.dump(cfg, f)

roots = ["كتب", "درس", "علم", "قرأ", "فهم", "سمع", "جلس", "ذهب"]
templates = ["ثم {} المعلم رسالة طويلة إلى صديقه في المدينة القديمة قبل أن يسافر",
             "قال إنه {} كثيرا قبل أن ينام الأطفال في الليل الطويل البارد",
             "هل {} الولد الكتاب أمس في البيت مع أخيه الصغير وأمه"]
with open(os.path.join(work, "data.jsonl"), "w") as f:
    for i in range(samples):
        f.write(json.dumps({"id": f"s{i}", "text": templates[i % 3].format(roots[i % 8])}, ensure_ascii=False) + "\n")
PY

common=(extract --model "$model" --dataset "$work/data.jsonl" --select all --stages after_layer --layers 8 --threads "$threads" --json)
run() {  # NAME EXTRA...: one run; appends "seconds rss_kib rows" to $work/NAME
    local name=$1; shift
    rm -rf "$work/out-$name"
    /usr/bin/time -f '%M' -o "$work/rss" "$ember" "${common[@]}" --out "$work/out-$name" "$@" >"$work/json"
    $py - "$work/json" "$(cat "$work/rss")" >>"$work/$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["seconds"], sys.argv[2], r["rows"])
PY
}
for ((i = 0; i < rounds; ++i)); do
    run plain
    run dense --sae "$work/sae-16k"
    run sparse --sae "$work/sae-16k" --sae-output sparse
done

echo "uptime: $(uptime)"
$py - "$work" 16384 "$rounds" <<'PY'
import statistics, sys
work, d_sae, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def read(name):
    rows = [line.split() for line in open(f"{work}/{name}")]
    return (statistics.median(float(r[0]) for r in rows), max(int(r[1]) for r in rows), int(rows[0][2]))
plain, _, rows = read("plain")
print(f"{rows} rows, d_sae {d_sae}, {rounds} rounds, medians of the runs' own seconds")
print(f"{'run':<28}{'seconds':>9}{'ratio':>8}{'peak RSS MiB':>14}{'features/s':>14}")
for name, label in (("plain", "without SAE"), ("dense", "--sae (dense)"), ("sparse", "--sae --sae-output sparse")):
    s, rss, _ = read(name)
    extra = s - plain
    fps = f"{rows * d_sae / extra:.3g}" if name != "plain" and extra > 0 else "-"
    print(f"{label:<28}{s:>9.2f}{s / plain:>8.2f}{rss / 1024:>14.0f}{fps:>14}")
dense = read("dense")[0]
print(f"encoder cost / forward pass: {(dense - plain) / plain:.2f} (target < 1)")
PY
echo "uptime: $(uptime)"
