"""The Python package's overhead against the CLI doing the same work (docs/python.md, "Overhead").

    PYTHONPATH=build/python python3 python/bench/overhead.py MODEL.gguf [ROUNDS] [THREADS]

run_with_cache (every layer's after_layer of a 32-token prompt) against `ember extract`'s
own prefill_ms (the same prefill and capture, without writing files), and generate (64
tokens, greedy) against `ember generate`'s prefill + decode + sampling ms; medians of
ROUNDS, each measured in process (the model loaded once) and by the CLI's --json timings.
A benchmark, not a test.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import ember

model = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
threads = sys.argv[3] if len(sys.argv) > 3 else "2"
cli = os.environ.get("EMBER_BINARY", os.path.join(os.path.dirname(__file__), "..", "..", "build", "app", "ember"))
prompt = " ".join(["كتب الطالب الدرس في المكتبة"] * 5)

m = ember.Model(model, threads=int(threads))
n_tokens = len(m.tokenize(prompt))
m.run_with_cache(prompt)  # warm: pages of the mapping, the session
py_extract, cli_extract, py_generate, cli_generate = [], [], [], []
for _ in range(rounds):
    t = time.perf_counter()
    m.run_with_cache(prompt, logits="none")
    py_extract.append((time.perf_counter() - t) * 1e3)
    with tempfile.TemporaryDirectory() as tmp:
        out = json.loads(subprocess.run([cli, "extract", "--model", model, "--prompt", prompt, "--out", tmp + "/r",
                                         "--threads", threads, "--json"], capture_output=True, check=True, text=True).stdout)
    cli_extract.append(out["prefill_ms"])
    t = time.perf_counter()
    m.generate(prompt, max_tokens=64)
    py_generate.append((time.perf_counter() - t) * 1e3)
    g = json.loads(subprocess.run([cli, "generate", "--model", model, "--prompt", prompt, "--max-tokens", "64",
                                   "--threads", threads, "--json"], capture_output=True, check=True, text=True).stdout)
    cli_generate.append(g["timings"]["prefill_ms"] + g["timings"]["decode_ms"] + g["timings"]["sampling_ms"])


def line(name, py, c):
    p, q = statistics.median(py), statistics.median(c)
    print(f"{name}: python {p:.1f} ms, cli {q:.1f} ms, python/cli {p / q:.3f} "
          f"(rounds python {[round(x, 1) for x in py]}, cli {[round(x, 1) for x in c]})")


print(f"{os.path.basename(model)}, {n_tokens} prompt tokens, threads {threads}, {rounds} rounds")
line("run_with_cache vs extract prefill", py_extract, cli_extract)
line("generate 64 vs ember generate", py_generate, cli_generate)
