#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and runs Ember's main job
# on the default model: $EMBER_MODEL if set, else ../shared/fixtures/models/stories260K.gguf.
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
"$root/scripts/setup.sh" >/dev/null
"$root/scripts/build.sh" >/dev/null
exec "$root/build/app/ember" generate --route reference --model "$model" \
  --prompt "Once upon a time, there was a little girl" --max-tokens 64
