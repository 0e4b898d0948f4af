#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and runs Ember's main job,
# a run config with experiments, on the default model: $EMBER_MODEL if set, else
# ../shared/fixtures/models/stories260K.gguf.
#   configs/demo.toml              the prompt, and `ablate` zeroing layer 1's MLP output
#   --experiment libfinite-check   composed after it: fails the run if a NaN/Inf appears
# The generated text goes to stdout; runs/demo/run.json records the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${EMBER_MODEL:-$root/../shared/fixtures/models/stories260K.gguf}
if [ ! -f "$model" ]; then
  cat >&2 <<MSG
demo: no model at $model
  Download stories260K.gguf (a 1 MB TinyStories Llama, e.g. from the Hugging Face repo
  ggml-org/models, file tinyllamas/stories260K.gguf) and point EMBER_MODEL at it:
    EMBER_MODEL=/path/to/stories260K.gguf scripts/demo.sh
MSG
  exit 1
fi
model=$(realpath "$model")
"$root/scripts/setup.sh" >/dev/null
"$root/scripts/build.sh" >/dev/null
cd "$root"
exec build/app/ember run --model "$model" --experiment build/plugins/libfinite-check.so configs/demo.toml
