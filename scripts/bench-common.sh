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

bench_model() {  # TYPE (any `ember synth --type`): writes $models/llama-1b-TYPE.gguf once, prints its path
    local model=$models/llama-1b-$1.gguf
    mkdir -p "$models"
    if [[ ! -f $model ]]; then
        echo "writing $model (once)" >&2
        "$ember" synth --shape llama-1b --vocab-from "$vocab" --type "$1" "$model" >&2
    fi
    echo "$model"
}
