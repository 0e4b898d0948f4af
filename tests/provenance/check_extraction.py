#!/usr/bin/python3
"""Reads an `ember extract` run directory with NumPy alone (no Ember code) and checks it
against llama.cpp's golden hidden states.

    check_extraction.py RUN_DIR GOLDEN.f32.golden.json PROMPT_INDEX TOLERANCE

Checks, independently of Ember's own verify: the manifest's seal (SHA-256 of its bytes with
the digest zeroed), every listed file's size and SHA-256, every array's dtype and shape,
the token ids against the golden, and after_layer.layerN.npy (l_out-N) and
before_logits.npy (result_norm) against the golden within TOLERANCE, relative to the
largest |golden value| of each tensor. Prints one line per tensor; exits 1 on any failure.
"""
import hashlib
import json
import os
import sys

import numpy as np


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    run_dir, golden_path, prompt_index, tolerance = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    raw = open(os.path.join(run_dir, "manifest.json"), "rb").read()
    manifest = json.loads(raw)
    seal = manifest["manifest_sha256"]
    zeroed = raw.replace(('"manifest_sha256": "%s"' % seal).encode(), ('"manifest_sha256": "%s"' % ("0" * 64)).encode())
    if hashlib.sha256(zeroed).hexdigest() != seal:
        fail("manifest seal does not match")
    for name, entry in manifest["files"].items():
        data = open(os.path.join(run_dir, name), "rb").read()
        if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            fail("checksum of " + name)

    golden = json.load(open(golden_path))["prompts"][prompt_index]
    if manifest["tokenizer"]["token_ids"] != golden["tokens"]:
        fail("token ids differ from the golden")
    n_tokens = len(golden["tokens"])

    compared = 0
    for tensor in manifest["tensors"]:
        array = np.load(os.path.join(run_dir, tensor["file"]))
        if array.dtype != np.float32 or not array.flags["C_CONTIGUOUS"] or list(array.shape) != tensor["shape"]:
            fail("%s: dtype %s shape %s" % (tensor["file"], array.dtype, array.shape))
        if tensor["stage"] == "after_layer":
            key = "l_out-%d" % tensor["layer"]
        elif tensor["stage"] == "before_logits":
            key = "result_norm"
        else:
            continue
        g = golden["hidden"][key]
        expected = np.array(g["values"], dtype=np.float64).reshape(g["rows"], g["cols"])
        if array.shape != (n_tokens, g["cols"]) or tensor["positions"] != list(range(n_tokens)):
            fail("%s: shape %s, the golden has %s" % (tensor["file"], array.shape, expected.shape))
        error = np.abs(array.astype(np.float64) - expected).max() / np.abs(expected).max()
        print("%s %s relative error %.3g" % (tensor["file"], key, error))
        if not error <= tolerance:
            fail("%s: relative error %g > %g" % (tensor["file"], error, tolerance))
        compared += 1
    if compared != len(golden["hidden"]):
        fail("compared %d tensors, the golden has %d" % (compared, len(golden["hidden"])))
    print("ok")


if __name__ == "__main__":
    main()
