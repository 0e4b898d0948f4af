#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and shows what an
# intervention does, on the default model: $EMBER_MODEL if set, else
# ../shared/fixtures/models/stories260K.gguf.
#   clean      ember generate: configs/demo.toml's prompt, route and token count, no hooks
#   ablated    ember run configs/demo.toml: the same, with `ablate` zeroing layer 1's MLP
#              output, and `finite-check` composed after it (fails the run on a NaN/Inf)
# The two continuations are printed one above the other, then where the run record
# (run.json) and the sealed manifest are, and the command that verifies them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
caller=$PWD  # the paths printed at the end are relative to where the demo was started
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
# Only what the demo runs: the ember binary and the two experiments it loads (the test
# command builds everything else).
source "$root/scripts/cmake-args.sh"
quietly "$root/scripts/build.sh" --target ember ember_plugin_ablate ember_plugin_finite_check ||
  { echo "demo: the build failed" >&2; exit 1; }
cd "$root"
config=configs/demo.toml
ember=build/app/ember
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# A failed step shows what it printed on stderr and stops the demo.
run() {
  if ! "$@" 2>"$log"; then
    cat "$log" >&2
    echo "demo: failed: $*" >&2
    exit 1
  fi
}

# The clean run asks for what the config asks for, read from the config itself.
IFS=$'\t' read -r prompt max_tokens route < <(python3 - "$config" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
print(c["prompt"]["text"], c["generation"]["max_tokens"], c["model"].get("route", ""), sep="\t")
PY
)
[ -n "$prompt" ] || { echo "demo: $config has no [prompt] text" >&2; exit 1; }
route_option=()
[ -n "$route" ] && route_option=(--route "$route")

clean=$(run "$ember" generate --model "$model" --prompt "$prompt" --max-tokens "$max_tokens" "${route_option[@]}")
ablated=$(run "$ember" run --model "$model" --experiment build/plugins/libfinite-check.so "$config")
record=$(sed -n 's/^ember: run .* written to //p' "$log")
# A path as the user can type it where the demo was started: relative below there.
shown() {
  local path
  path=$(realpath "$1")
  case "$path" in "$caller"/*) echo "${path#"$caller"/}" ;; *) echo "$path" ;; esac
}
dir=$(shown "$(dirname "$record")")
record=$(shown "$record")
ember_shown=$(shown "$ember")

indent=$'\n         '  # a continuation's own line breaks stay inside its column
printf 'prompt   %s\n' "$prompt"
printf 'clean    %s\n' "${clean//$'\n'/$indent}"
printf 'ablated  %s\n' "${ablated//$'\n'/$indent}"
printf '         (%s: layer 1 MLP output zeroed)\n' "$config"
echo
echo "run record       $record"
echo "sealed manifest  $dir/manifest.json"
echo "verify them      $ember_shown verify $dir"
