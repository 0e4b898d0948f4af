#!/bin/sh
# Renders tests/chat/goldens/cases.json with the reference (@huggingface/jinja 0.5.11, via
# ../shared/tools/chat-goldens) into more_goldens.json. Run from the repository root:
#   sh tests/chat/goldens/make.sh
# The expected texts are the reference's output, never typed by hand.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
fixtures=${EMBER_FIXTURES:-$here/../../../../shared/fixtures}
work=${CHAT_GOLDENS_DIR:-/tmp/chat-goldens}
if [ ! -d "$work/node_modules/@huggingface/jinja" ]; then
  mkdir -p "$work"
  cp "$fixtures/../tools/chat-goldens/"* "$work/"
  chmod u+w "$work/"*
  (cd "$work" && npm install --no-audit --no-fund)
fi
node "$work/render.mjs" "$fixtures/chat/templates:$here/templates" "$here/cases.json" "$here/more_goldens.json"
