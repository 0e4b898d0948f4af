#!/usr/bin/env python3
"""Cross-checks Ember's token ids against llama.cpp (node-llama-cpp) on generated texts.

    scripts/tokenizer_crosscheck.py [--ember build/app/ember] [--peer-dir ../peer]

For each of the four fixture vocabularies, tokenizes with both (no BOS) and compares the
ids exactly, in both special-token modes:
  - edge cases: unassigned, private-use, control and whitespace code points, lone
    combining marks, digits of many scripts, contractions in every case, emoji sequences,
    special-token texts of all four vocabularies;
  - random texts drawn from every assigned code point (two seeds);
  - a text dense with special-token texts.
Texts are valid UTF-8 (node decodes the file as UTF-8 before llama.cpp sees it, so
invalid bytes cannot be compared this way). Code points of CJK Extension I
(U+2EBF0-U+2EE5D) are left out: they are new in Unicode 15.1, which llama.cpp's tables
have and Debian bookworm's do not (docs/tokenizer.md). Exits 1 on any difference.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.environ.get("EMBER_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))
VOCABS = [
    ("llama-spm", "tokenizer/ggml-vocab-llama-spm.gguf"),
    ("llama-bpe", "models/synth-llama3-q8_0.gguf"),
    ("qwen2", "models/synth-qwen3-q8_0.gguf"),
    ("gemma-4", "models/synth-gemma4-q8_0.gguf"),
]
SPECIALS = ["<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
            "<|im_start|>", "<|im_end|>", "<|endoftext|>", "[PAD151650]", "<bos>", "<eos>", "<|turn>", "<turn|>",
            "<|channel>", "<channel|>", "<|tool_response>", "<|image|>", "<|image>", "<pad>", "<mask>",
            "<|reserved_special_token_10|>", "<|reserved_special_token_1|>"]

# Tokenizes a file with node-llama-cpp, special-token parsing on or off, and prints the ids.
NODE_SCRIPT = """
const {getLlama, LlamaLogLevel} = await import(process.env.NODE_LLAMA_CPP);
const {readFileSync} = await import("node:fs");
const [model, file, special] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const m = await llama.loadModel({modelPath: model, vocabOnly: true});
console.log(JSON.stringify(Array.from(m.tokenize(readFileSync(file, "utf8"), special === "1"))));
"""


def edge_text():
    cases = [
        "\u0378\u0379 x\u0378y \u0378\u0378\u0378 5\u0378 a\u0378b '\u0378 \u0378'",
        "\u2FFC\u2FFD \u31EF \U00010D40\U00010D50 \U0001FAE9",
        "\uE000\uE001 x\uF8FFy \U000F0000",
        "\u0000\u0001\u001F\u007F x\u0085y \u00A0z \u2028 \u2029 \uFEFFbom \u200Dzwj \u200B",
        "\u0301 \u064E\u064Fكَتَبَ \u0301x",
        "ـــ تطويل ١٢٣٤٥ ۱۲۳ ०१२ １２３ ²³ ⅫⅣ ½¾ ⑳",
        "'S 'LL 'Ve 'RE 'D 'M 'T \u2019s \u2019ll I'M YOU'RE x'y '1 ''s",
        "\u3000\u3000x \t\n x  \r\n\r\n  y\u2003\u2003z   \n",
        "a.b,c;d:e!f?g(h)[i]{j}<k>@#$%^&*_-+=|\\/~`\"",
        "12345678901234567890 1.5e-10 0x1F -42 3,000,000 ٣٫١٤",
        "👩‍💻👨‍👩‍👧 🏳️‍🌈 1️⃣ #️⃣ 🇯🇵🇺🇸 ☺️ ✌🏿",
        "Ǆǅǆ ǈ ǋ ᾈ ﬁ ﬀ Ⅰ ⓐ 𝐀𝐁 𝟏𝟐 ℌ ℍ Å K ẞß İı ΐ ǰ",
        " ".join(SPECIALS),
        "   \n\n\n\t\t\t    \n   end",
        " leading and trailing spaces   ",
    ]
    return "\n".join(cases)


def random_text(seed, n=40000):
    rng = random.Random(seed)
    assigned = [c for c in range(0x110000)
                if unicodedata.category(chr(c)) != "Cs" and not 0x2EBF0 <= c <= 0x2EE5D]
    ascii_ = [chr(c) for c in range(0x20, 0x7F)] + ["\n", "\t", "\r", "  ", "'s", "'LL"]
    out = []
    for _ in range(n):
        r = rng.random()
        out.append(rng.choice(ascii_) if r < 0.5 else chr(rng.choice(assigned[:0x3000] if r < 0.8 else assigned)))
    return "".join(out)


def special_text(seed):
    rng = random.Random(seed)
    words = ["hello", " world", "كتب", " الطالب", "\n", " ", "  ", "x", "123", "!", "<", "|", ">", "<|", "s>"]
    return "".join(rng.choice(SPECIALS) if rng.random() < 0.3 else rng.choice(words) for _ in range(3000))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ember", default=os.path.join(ROOT, "build", "app", "ember"))
    parser.add_argument("--peer-dir", default=os.path.join(ROOT, "..", "peer"),
                        help="a folder with node_modules/node-llama-cpp installed")
    args = parser.parse_args()
    package = os.path.join(os.path.abspath(args.peer_dir), "node_modules", "node-llama-cpp", "dist", "index.js")
    if not os.path.exists(package):
        sys.exit(f"node-llama-cpp not found at {package} (see ../shared/tools/peer-llamacpp/README.md)")
    env = dict(os.environ, NODE_LLAMA_CPP="file://" + package)

    failures = 0
    with tempfile.TemporaryDirectory(prefix="ember-tokenizer-crosscheck-") as tmp:
        script = os.path.join(tmp, "tokenize.mjs")
        with open(script, "w") as f:
            f.write(NODE_SCRIPT)
        texts = {"edge": edge_text(), "random-1": random_text(1), "random-2": random_text(2), "specials": special_text(5)}
        for text_name, text in texts.items():
            path = os.path.join(tmp, text_name + ".txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            for vocab, model in VOCABS:
                model_path = os.path.join(FIXTURES, model)
                for special in (False, True):
                    cmd = [args.ember, "tokenize", "--model", model_path, "--file", path, "--no-bos", "--ids"]
                    ours = [int(x) for x in subprocess.run(cmd + (["--special"] if special else []), check=True,
                                                           capture_output=True).stdout.split()]
                    peer = json.loads(subprocess.run(["node", script, model_path, path, "1" if special else "0"],
                                                     check=True, capture_output=True, env=env).stdout)
                    same = ours == peer
                    failures += not same
                    where = ""
                    if not same:
                        i = next((k for k in range(min(len(ours), len(peer))) if ours[k] != peer[k]), min(len(ours), len(peer)))
                        where = f" first difference at token {i}: ours {ours[i:i + 5]} llama.cpp {peer[i:i + 5]}"
                    print(f"{text_name:<9} {vocab:<10} special={'on ' if special else 'off'} {len(ours):>7} tokens "
                          f"{'identical' if same else 'DIFFERENT'}{where}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
