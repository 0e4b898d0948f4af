# Sourced by scripts/bench.sh and scripts/bench-dataset.sh: the settings they share, the
# llama.cpp peer check, building `ember` and writing the random-weight llama-1b models once.
# Sets root, threads, build, models, peer, vocab and ember.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=${EMBER_BENCH_THREADS:-2}
build=${EMBER_BUILD_DIR:-$root/build}
models=${EMBER_BENCH_MODELS:-$HOME/.cache/ember/bench-models}
peer=${EMBER_PEER_DIR:-$root/../shared/tools/peer-llamacpp}
vocab=$root/../shared/fixtures/models/synth-llama3-q8_0.gguf
ember=$build/app/ember

bench_require_peer() {  # NAME: the calling script, for the message
    if [[ ! -d $peer/node_modules/node-llama-cpp ]]; then
        echo "$1: $peer has no node_modules: run 'npm install --no-audit --no-fund' there once," >&2
        echo "    or set EMBER_PEER_DIR to a peer-llamacpp copy that has them" >&2
        exit 1
    fi
}

bench_build_ember() {
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j "${EMBER_JOBS:-2}" --target ember >/dev/null
}

bench_model() {  # TYPE [SHAPE] (`ember synth --type`, --shape; default llama-1b): writes $models/SHAPE-TYPE.gguf once, prints its path
    local shape=${2:-llama-1b}
    local model=$models/$shape-$1.gguf
    mkdir -p "$models"
    if [[ ! -f $model ]]; then
        echo "writing $model (once)" >&2
        "$ember" synth --shape "$shape" --vocab-from "$vocab" --type "$1" "$model" >&2
    fi
    echo "$model"
}

# EMBER_BENCH_CPU=avx2: llama.cpp built for AVX2 only (no AVX-512, no VNNI) from the source
# the peer package ships (node-llama-cpp's gitRelease.bundle), once, into
# $EMBER_BENCH_LLAMA_DIR (default ~/.cache/ember/llama.cpp-avx2); prints the path of its
# llama-bench. About 20 CPU-minutes the first time.
bench_llama_avx2() {
    local dir=${EMBER_BENCH_LLAMA_DIR:-$HOME/.cache/ember/llama.cpp-avx2}
    local bundle=$peer/node_modules/node-llama-cpp/llama/gitRelease.bundle
    local bin=$dir/build/bin/llama-bench
    if [[ ! -x $bin ]]; then
        if [[ ! -f $bundle ]]; then
            echo "bench: $bundle is missing (the peer's npm install ships it)" >&2
            exit 1
        fi
        echo "building llama.cpp for AVX2 only into $dir (once)" >&2
        [[ -d $dir/src ]] || git clone --quiet "$bundle" "$dir/src" >&2
        cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX2=ON \
            -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DLLAMA_CURL=OFF >&2
        cmake --build "$dir/build" -j "${EMBER_JOBS:-2}" --target llama-bench >&2
    fi
    echo "$bin"
}

# One llama-bench round in the peer's JSON line form ({"prefill_tok_s", "decode_tok_s"}):
# the prompt at depth 0, then GEN tokens generated after PROMPT tokens of context (-d), as
# `ember bench` decodes after its prefill. KV cache F16, llama.cpp's default and the peer's:
# llama-bench's -ctk/-ctv take no f32 (its ggml_type_from_name knows f16, bf16 and the
# quants), so llama.cpp keeps the cache half the size of Ember's F32 one.
bench_llama_bench_round() {  # LLAMA_BENCH MODEL PROMPT GEN THREADS
    local common=(-m "$2" -t "$5" -r 1 -ctk f16 -ctv f16 -o jsonl)
    {
        "$1" "${common[@]}" -p "$3" -n 0
        "$1" "${common[@]}" -p 0 -n "$4" -d "$3"
    } 2>/dev/null | python3 -c '
import json, sys
tests = [json.loads(line) for line in sys.stdin if line.startswith("{")]
pp = [t["avg_ts"] for t in tests if t["n_prompt"] > 0 and t["n_gen"] == 0]
tg = [t["avg_ts"] for t in tests if t["n_gen"] > 0 and t["n_prompt"] == 0]
if len(pp) != 1 or len(tg) != 1: sys.exit("llama-bench: expected one prompt and one generation test")
print(json.dumps({"prefill_tok_s": pp[0], "decode_tok_s": tg[0], "engine": "llama-bench (AVX2 build)"}))'
}
