#!/usr/bin/env python3
"""The one strict-JSON check of the test suite (RFC 8259, as any strict parser reads it).

Every TempDir runs this on itself before it is removed (tests/support/temp_dir.hpp), so
every run.json, manifest.json and other JSON file any test made Ember write is checked:
valid UTF-8, no NaN/Infinity constants, no number that overflows to infinity (1e99999),
and for *.jsonl files every line. Usage: strict_json_check.py DIR... ; exit 1 naming each
bad file."""
import json
import math
import pathlib
import sys


def refuse_constant(name):
    raise ValueError(f"non-standard constant {name}")


def finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is not finite")
    return value


def check(text):
    json.loads(text, parse_constant=refuse_constant, parse_float=finite_float)


def main(roots):
    bad = 0
    for root in roots:
        for path in sorted(pathlib.Path(root).rglob("*")):
            if not path.is_file() or path.suffix not in (".json", ".jsonl") or ".tmp." in path.name:
                continue
            if path.name.endswith((".input.json", ".input.jsonl")):  # malformed on purpose: a test's input
                continue
            try:
                text = path.read_bytes().decode("utf-8")
                if path.suffix == ".jsonl":
                    for number, line in enumerate(text.splitlines(), 1):
                        if line.strip():
                            try:
                                check(line)
                            except ValueError as e:
                                raise ValueError(f"line {number}: {e}")
                else:
                    check(text)
            except (ValueError, UnicodeDecodeError) as e:
                print(f"{path}: not strict JSON: {e}")
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
