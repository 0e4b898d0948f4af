#!/usr/bin/env python3
"""llama.cpp's token ids for the reference's renderings of chat templates, on the fixture
models: the golden the chat tokenization test (tests/chat/tokens_test.cpp) checks
`ember tokenize --model M --template T --chat VARS --ids` against.

For every error-free rendering of a template of the Llama 3, Qwen3 and Gemma 4 families
in ../shared/fixtures/chat/goldens.json and tests/chat/goldens/more_goldens.json (texts
made by @huggingface/jinja), the rendered text is tokenized by llama.cpp with special
tokens parsed and no BOS added (../shared/tools/peer-llamacpp/tokenize.mjs --ids
--special). Run from the repository root, after copying the peer tool to /tmp/peer and
`npm install` there:
    python3 tests/chat/tokens/make_llamacpp_ids.py
"""
import json, os, subprocess, tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
fixtures = os.environ.get("EMBER_FIXTURES", os.path.join(root, "..", "shared", "fixtures"))
peer = os.environ.get("PEER_DIR", "/tmp/peer")
models = {  # template -> fixture model
    "meta-llama-Llama-3.1-8B-Instruct": "synth-llama3-q8_0",
    "Qwen-Qwen3-0.6B": "synth-qwen3-q8_0",
    "google-gemma-4-31B-it": "synth-gemma4-q8_0",
}
sources = [("fixtures:chat/goldens.json", os.path.join(fixtures, "chat", "goldens.json")),
           ("tests/chat/goldens/more_goldens.json", os.path.join(root, "tests", "chat", "goldens", "more_goldens.json"))]
out = []
for label, path in sources:
    for r in json.load(open(path, encoding="utf-8"))["results"]:
        if r["template"] not in models or r["error"] is not None:
            continue
        model = models[r["template"]]
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
            f.write(r["rendered"])
        try:
            line = subprocess.run(["node", os.path.join(peer, "tokenize.mjs"),
                                   os.path.join(fixtures, "models", model + ".gguf"), f.name, "--ids", "--special"],
                                  check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        finally:
            os.unlink(f.name)
        out.append({"goldens": label, "template": r["template"], "case": r["case"], "model": model,
                    "ids": json.loads(line)["ids"]})
        print(model, r["case"], len(out[-1]["ids"]))
dest = os.path.join(root, "tests", "chat", "tokens", "llamacpp_ids.json")
with open(dest, "w", encoding="utf-8") as f:
    f.write('{"made_by": "tests/chat/tokens/make_llamacpp_ids.py (node-llama-cpp 3.21.1, tokenize.mjs --ids --special)",\n'
            ' "results": [\n' + ",\n".join(json.dumps(r, ensure_ascii=False) for r in out) + "\n]}\n")
print(len(out), "renderings")
