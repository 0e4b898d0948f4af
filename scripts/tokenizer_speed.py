#!/usr/bin/env python3
"""Times `ember tokenize` against llama.cpp's tokenizer on a ~1 MB mixed text.

    scripts/tokenizer_speed.py [--ember build/app/ember] [--peer ../peer/tokenize.mjs] (or EMBER_PEER_DIR=DIR)
                               [--runs 5] [--bytes 1000000] [--text FILE]

For each of the four fixture vocabularies (llama-spm, llama-bpe, qwen2, gemma-4) it runs,
interleaved, `ember tokenize --model M --file F --no-bos --ids --timing` and
`node tokenize.mjs M F --ids` RUNS times each, as whole processes, and prints the median
wall time of each, their ratio, the tokenizer-only and load times each reports, and
whether the two id lists are identical (they must be: the same run cross-checks Ember's
ids on a text nobody wrote tests for). Exits 1 if any ids differ.

Absolute times drift on shared machines; the ratio of medians measured together holds.
The text comes from scripts/make_mixed_text.py (deterministic) unless --text is given.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.environ.get("EMBER_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))
VOCABS = [
    ("llama-spm", "tokenizer/ggml-vocab-llama-spm.gguf"),
    ("llama-bpe", "models/synth-llama3-q8_0.gguf"),
    ("qwen2", "models/synth-qwen3-q8_0.gguf"),
    ("gemma-4", "models/synth-gemma4-q8_0.gguf"),
]


def default_peer():
    if os.environ.get("EMBER_PEER_DIR"):  # as scripts/bench.sh: the llama.cpp peer's directory
        return os.path.join(os.environ["EMBER_PEER_DIR"], "tokenize.mjs")
    for candidate in (os.path.join(ROOT, "..", "peer", "tokenize.mjs"),
                      os.path.join(ROOT, "..", "shared", "tools", "peer-llamacpp", "tokenize.mjs")):
        if os.path.exists(os.path.join(os.path.dirname(candidate), "node_modules")):
            return candidate
    return os.path.join(ROOT, "..", "shared", "tools", "peer-llamacpp", "tokenize.mjs")


def timed(cmd):
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr.decode(errors='replace')}")
    return wall, done.stdout, done.stderr


def last_json_line(data):
    for line in reversed(data.decode(errors="replace").splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.exit("no JSON line in output")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ember", default=os.path.join(ROOT, "build", "app", "ember"))
    parser.add_argument("--peer", default=default_peer())
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bytes", type=int, default=1_000_000)
    parser.add_argument("--vocab", action="append", help="only these vocabularies (llama-spm, llama-bpe, qwen2, gemma-4)")
    parser.add_argument("--text", help="tokenize this file instead of a generated one")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ember-tokenizer-speed-") as tmp:
        text = args.text
        if not text:
            text = os.path.join(tmp, "mixed.txt")
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_mixed_text.py"), text,
                            "--bytes", str(args.bytes)], check=True)
        size = os.path.getsize(text)
        print(f"text: {size} bytes; {args.runs} interleaved runs each; times are medians, whole process")
        print(f"{'vocab':<10} {'ember_s':>8} {'llama_s':>8} {'ratio':>6} | {'ember_tok_s':>11} {'llama_tok_s':>11} "
              f"{'ember_load_s':>12} {'llama_load_s':>12} | {'tokens':>7} ids")
        all_same = True
        for name, model in VOCABS:
            if args.vocab and name not in args.vocab:
                continue
            path = os.path.join(FIXTURES, model)
            ember_cmd = [args.ember, "tokenize", "--model", path, "--file", text, "--no-bos", "--ids", "--timing"]
            peer_cmd = ["node", args.peer, path, text, "--ids"]
            ember_wall, peer_wall, ember_tok, peer_tok, ember_load, peer_load = [], [], [], [], [], []
            ember_ids = peer_ids = None
            for _ in range(args.runs):
                wall, out, err = timed(ember_cmd)
                ember_wall.append(wall)
                report = last_json_line(err)
                ember_tok.append(report["tokenize_s"])
                ember_load.append(report["load_s"])
                ember_ids = [int(x) for x in out.split()]
                wall, out, _ = timed(peer_cmd)
                peer_wall.append(wall)
                report = last_json_line(out)
                peer_tok.append(report["tokenize_s"])
                peer_load.append(report["load_s"])
                peer_ids = report["ids"]
            same = ember_ids == peer_ids
            all_same &= same
            med = statistics.median
            print(f"{name:<10} {med(ember_wall):8.3f} {med(peer_wall):8.3f} {med(peer_wall) / med(ember_wall):6.1f} | "
                  f"{med(ember_tok):11.3f} {med(peer_tok):11.3f} {med(ember_load):12.3f} {med(peer_load):12.3f} | "
                  f"{len(ember_ids):>7} {'identical' if same else 'DIFFERENT'}")
        print("ratio = llama.cpp wall time / Ember wall time (above 1: Ember is faster)")
        return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
