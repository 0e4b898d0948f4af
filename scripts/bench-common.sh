# Sourced by scripts/bench.sh and scripts/bench-dataset.sh: the settings they share, the
# llama.cpp peer check, building `ember` and writing the random-weight llama-1b models once.
# Sets root, threads, build, models, peer, vocab and ember (and, with bench_choose_cpu, cpu).
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

# EMBER_BENCH_CPU=avx2 / avxvnni: llama.cpp for that instruction set alone. The peer
# package ships ggml's per-CPU backends (llama.cpp's ggml/src/CMakeLists.txt, built with
# GGML_CPU_ALL_VARIANTS: haswell = SSE4.2 AVX F16C FMA AVX2 BMI2, alderlake = those +
# AVX_VNNI, the AVX-512 ones above), and ggml loads the best backend its directory holds
# that this CPU runs. A copy of the peer whose bins hold only the wanted one (hard links
# where the file system allows, made once into $EMBER_BENCH_PEERS, default
# ~/.cache/ember/peers) is llama.cpp built for that set, the same commit and harness as the
# default peer. Prints the copy's directory.
bench_peer_for_cpu() {  # VARIANT
    local backend
    case $1 in
        avx2) backend=haswell ;;
        avxvnni) backend=alderlake ;;
        *) echo "bench: no llama.cpp CPU backend is chosen for EMBER_BENCH_CPU=$1 (avx2, avxvnni)" >&2; exit 2 ;;
    esac
    local dir=${EMBER_BENCH_PEERS:-$HOME/.cache/ember/peers}/$1
    local bins=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
    if [[ ! -f $dir/.ember-peer-copy ]]; then
        if [[ -e $dir ]]; then
            echo "bench: $dir exists but is not a peer copy this script made; move it away" >&2
            exit 1
        fi
        if [[ ! -f $peer/$bins/libggml-cpu-$backend.so ]]; then
            echo "bench: $peer/$bins/libggml-cpu-$backend.so is missing (the peer's npm install ships it)" >&2
            exit 1
        fi
        echo "making $dir: the peer with llama.cpp's $backend CPU backend alone (once)" >&2
        local tmp=$dir.tmp.$$
        mkdir -p "$(dirname "$dir")"
        cp -al "$peer" "$tmp" 2>/dev/null || { rm -rf "$tmp"; cp -a "$peer" "$tmp"; }
        local f
        for f in "$tmp/$bins"/libggml-cpu-*.so; do
            [[ $(basename "$f") == "libggml-cpu-$backend.so" ]] || rm "$f"
        done
        echo "$backend" >"$tmp/.ember-peer-copy"
        mv "$tmp" "$dir"
    fi
    echo "$dir"
}

# EMBER_BENCH_CPU (unset, avx2 or avxvnni): for a set, Ember runs it (EMBER_CPU) and $peer
# becomes llama.cpp's backend for the same set (bench_peer_for_cpu). Sets cpu.
bench_choose_cpu() {  # CALLER: the calling script, for the message
    cpu=${EMBER_BENCH_CPU:-}
    case $cpu in
        "") ;;
        avx2 | avxvnni) export EMBER_CPU=$cpu; peer=$(bench_peer_for_cpu "$cpu") ;;
        *) echo "$1: EMBER_BENCH_CPU=$cpu: expected avx2, avxvnni (or unset)" >&2; exit 2 ;;
    esac
}
