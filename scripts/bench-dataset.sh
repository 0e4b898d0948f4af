#!/usr/bin/env bash
# A dataset extraction side by side with one process per sample and llama.cpp's prefill
# (issue 11's benchmark; not part of CI).
#
#   scripts/bench-dataset.sh [ROUNDS=3]
#
# On the Llama-3.2-1B-shaped Q8_0 model of scripts/bench.sh (written once with `ember synth`
# into $EMBER_BENCH_MODELS), 2 threads: 1,000 samples of 8-24 tokens from Arabic templates,
# `after_layer` at every layer at `substring:ROOT:last`, as
#   1. one `ember extract --dataset` (samples/s, prompt and evaluated tokens/s, peak RSS),
#      and the same with every sample evaluated whole (`--evaluate whole`),
#   2. one `ember extract --prompt` process per sample, the way it is done without datasets
#      (timed on the first $EMBER_BENCH_PER_PROCESS samples, default 100, and reported per sample),
#   3. llama.cpp's own prefill of a 512-token prompt (`peer.mjs MODEL 512 1 2`).
# Each ROUNDS times, alternately; medians and the ratios are printed with the targets:
# the whole-sample run's evaluated tok/s >= 1.5x llama.cpp's 512-token prefill (issue 30;
# issue 11 asked 1.0x), dataset samples/s >= 10x one process per sample, peak RSS <= model
# file + 300 MiB.
# The machine should be idle: check `uptime` first.
# Settings: EMBER_BENCH_THREADS (2), EMBER_BENCH_SAMPLES (1000), EMBER_BUILD_DIR (build),
# EMBER_PEER_DIR (../shared/tools/peer-llamacpp, with node_modules installed), EMBER_BENCH_CPU
# (avx2 or avxvnni: that set on both sides, as scripts/bench.sh).
set -euo pipefail

rounds=${1:-3}
samples=${EMBER_BENCH_SAMPLES:-1000}
per_process=${EMBER_BENCH_PER_PROCESS:-100}
source "$(dirname "$0")/bench-common.sh"
bench_require_peer bench-dataset.sh
bench_choose_cpu bench-dataset.sh
bench_build_ember
model=$(bench_model q8_0)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/data.jsonl" "$samples" <<'PY'
import json, sys
roots = ["كتب", "درس", "علم", "قرأ", "فهم", "سمع", "جلس", "ذهب", "شرب", "لعب"]
templates = ["{} الطالب الدرس", "ثم {} المعلم رسالة طويلة إلى صديقه في المدينة",
             "هل {} الولد الكتاب أمس في البيت", "قال إنه {} كثيرا قبل أن ينام الأطفال في الليل",
             "{} الرجل والمرأة معا"]
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        root = roots[i % len(roots)]
        text = templates[(i // len(roots)) % len(templates)].format(root)
        f.write(json.dumps({"text": text, "select": f"substring:{root}:last", "root": root}, ensure_ascii=False) + "\n")
PY

# One `ember extract --dataset` with extra OPTIONS: its JSON summary, peak RSS and wall time
# appended to OUT.
dataset_run() {  # OUT [OPTIONS...]
    local out=$1
    shift
    rm -rf "$work/out"
    /usr/bin/time -f '%M %e' -o "$work/rss" "$ember" extract --model "$model" --dataset "$work/data.jsonl" --out "$work/out" \
        --threads "$threads" --stages after_layer "$@" --json >"$work/summary.json"
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); rss, wall = open(sys.argv[2]).read().split()[-2:]; s["peak_rss_kib"]=int(rss); s["wall_seconds"]=float(wall); print(json.dumps(s))' \
        "$work/summary.json" "$work/rss" >>"$out"
}

echo "uptime before: $(uptime)" >&2
for ((i = 1; i <= rounds; i++)); do
    echo "round $i/$rounds: dataset, one process per sample, llama.cpp" >&2
    dataset_run "$work/dataset.jsonl"
    dataset_run "$work/whole.jsonl" --evaluate whole  # every row of every sample
    start=$(date +%s.%N)
    head -n "$per_process" "$work/data.jsonl" | while IFS= read -r line; do
        text=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["text"])' "$line")
        root=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["root"])' "$line")
        rm -rf "$work/one"
        "$ember" extract --model "$model" --prompt "$text" --select "substring:$root:last" --out "$work/one" \
            --threads "$threads" --stages after_layer >/dev/null 2>&1
    done
    end=$(date +%s.%N)
    echo "{\"seconds\": $(python3 -c "print($end - $start)"), \"samples\": $per_process}" >>"$work/process.jsonl"
    (cd "$peer" && node peer.mjs "$model" 512 1 "$threads") | tail -n 1 >>"$work/peer.jsonl"
done
echo "uptime after: $(uptime)" >&2

python3 - "$work" "$model" "$threads" <<'PY'
import json, os, statistics, sys
work, model, threads = sys.argv[1], sys.argv[2], sys.argv[3]
load = lambda n: [json.loads(l) for l in open(f"{work}/{n}.jsonl") if l.strip()]
ds, whole, proc, peer = load("dataset"), load("whole"), load("process"), load("peer")
# Whole-process wall time (loading and the dataset's first pass included), as for the per-sample processes.
ds_sps = [d["samples"] / d["wall_seconds"] for d in ds]
ds_tok = [d["tokens"] / d["wall_seconds"] for d in ds]
ds_eval = [d["evaluated_tokens"] / d["wall_seconds"] for d in ds]
whole_sps = [d["samples"] / d["wall_seconds"] for d in whole]
whole_tok = [d["evaluated_tokens"] / d["wall_seconds"] for d in whole]
tokens_per_sample = ds[0]["tokens"] / ds[0]["samples"]
proc_sps = [p["samples"] / p["seconds"] for p in proc]
peer_tok = [p["prefill_tok_s"] for p in peer]
med = statistics.median
runs = lambda xs: " ".join(f"{x:.1f}" for x in xs)
print(f"threads {threads}, {ds[0]['samples']} samples, {tokens_per_sample:.1f} tokens each, "
      f"{ds[0]['evaluated_tokens'] / ds[0]['samples']:.1f} evaluated; medians [all runs]")
print(f"dataset:               {med(ds_sps):8.2f} samples/s {med(ds_tok):8.1f} prompt tok/s {med(ds_eval):8.1f} evaluated tok/s  [{runs(ds_eval)}]")
print(f"dataset, whole samples:{med(whole_sps):8.2f} samples/s {med(whole_tok):8.1f} evaluated tok/s  [{runs(whole_tok)}]")
print(f"one process/sample:    {med(proc_sps):8.2f} samples/s  [{runs(proc_sps)}]")
print(f"llama.cpp 512 prefill:                      {med(peer_tok):8.1f} tok/s  [{runs(peer_tok)}]")
# Against llama.cpp: the rows evaluated per second, each sample whole (the compute rate);
# against one process per sample: samples per second (the same work).
r_peer, r_proc = med(whole_tok) / med(peer_tok), med(ds_sps) / med(proc_sps)
rss = max(d["peak_rss_kib"] for d in ds + whole) * 1024
budget = os.path.getsize(model) + 300 * 2**20
print(f"dataset whole samples, evaluated tok/s / llama.cpp prefill {r_peer:.2f} (target >= 1.5: {'ok' if r_peer >= 1.5 else 'SHORT'})")
print(f"dataset / one process per sample, samples/s {r_proc:.1f} (target >= 10: {'ok' if r_proc >= 10 else 'SHORT'}); "
      f"whole samples {med(whole_sps) / med(proc_sps):.1f}")
print(f"peak RSS {rss / 2**20:.0f} MiB, budget file + 300 MiB = {budget / 2**20:.0f} MiB: {'ok' if rss <= budget else 'OVER'}")
sys.exit(0 if r_peer >= 1.5 and r_proc >= 10 and rss <= budget else 1)
PY
