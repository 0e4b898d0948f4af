#!/usr/bin/env python3
"""Runs the worked examples of docs/*.md on the fixtures, so that they cannot rot.

An example is a run of fenced blocks in one page, each preceded by a marker line

    <!-- example: NAME -->                  (or <!-- example: NAME model=FIXTURE.gguf -->)

Blocks with the same NAME run in page order in one scratch directory laid out like a
checkout: `repo/` (the working directory) holds a copy of `configs/`, links to `tests/`
(for its scripts) and to `build` (the build tree), and `model.gguf` (a link to the fixture
model, stories260K.gguf unless `model=` names another), and `shared` beside it links the
fixtures' parent, so the configs' relative paths resolve as they do in the repository,
while nothing is written into the repository itself. `ember` is on PATH, and `python3` is
the Python running this script (Debian's, with NumPy), in blocks and shell lines alike.

    ```sh       runs with bash -euo pipefail
    ```python   runs with python3
    ```toml / ```jsonl / ```json   are written to the file their first line names in a
                comment (`# study.toml`); for JSON Lines and JSON the name comes from the
                marker (`<!-- example: NAME file=roots.jsonl -->`)

A block that exits non-zero fails the example, and the test fails if no example is found
(a test that finds nothing to check must not pass). Rung: smoke (the examples run as
written); the suites named in each page check the numbers.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = re.compile(r"^<!--\s*example:\s*(\S+)((?:\s+\w+=\S+)*)\s*-->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")


def parse_examples(page: Path):
    """[(name, options, [(lang, text, line)])] in page order."""
    examples = {}
    order = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        name = m.group(1)
        options = dict(kv.split("=", 1) for kv in m.group(2).split())
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        fence = FENCE.match(lines[j]) if j < len(lines) else None
        if not fence:
            sys.exit(f"{page}:{i + 1}: an example marker must be followed by a fenced block")
        k = j + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        if k == len(lines):
            sys.exit(f"{page}:{j + 1}: the fenced block is not closed")
        if name not in examples:
            examples[name] = ({}, [])
            order.append(name)
        examples[name][0].update(options)
        examples[name][1].append((fence.group(1), "\n".join(lines[j + 1:k]) + "\n", j + 1, options))
        i = k + 1
    return [(n, examples[n][0], examples[n][1]) for n in order]


def scratch_checkout(root: Path, repo: Path, build: Path, fixtures: Path, model: str) -> Path:
    work = root / "repo"
    work.mkdir()
    shutil.copytree(repo / "configs", work / "configs")
    (work / "build").symlink_to(build)
    (work / "tests").symlink_to(repo.resolve() / "tests")
    model_path = fixtures / "models" / model
    if not model_path.is_file():
        sys.exit(f"doc examples: fixture model {model_path} is missing (set EMBER_FIXTURES)")
    (work / "model.gguf").symlink_to(model_path)
    (root / "shared").symlink_to(fixtures.parent)
    return work


def run_block(lang, text, work: Path, env, where, options):
    if lang == "sh":
        cmd = ["bash", "-euo", "pipefail", "-c", text]
    elif lang == "python":
        cmd = [sys.executable, "-c", text]
    elif lang in ("toml", "jsonl", "json"):
        first = text.splitlines()[0] if text else ""
        name = options.get("file") or (first[1:].split()[0] if first.startswith("#") else None)
        if not name:
            sys.exit(f"{where}: a {lang} block in an example needs a file name")
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
        return True
    else:
        sys.exit(f"{where}: don't know how to run a '{lang}' block")
    result = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        print(f"FAILED {where} ({lang}, exit {result.returncode})\n--- stdout\n{result.stdout}"
              f"--- stderr\n{result.stderr}", file=sys.stderr)
        return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=Path, required=True)
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--fixtures", type=Path, required=True, help="$EMBER_FIXTURES overrides")
    args = ap.parse_args()
    if os.environ.get("EMBER_FIXTURES"):
        args.fixtures = Path(os.environ["EMBER_FIXTURES"])
    if not args.fixtures.is_dir():
        sys.exit(f"doc examples: no fixtures at {args.fixtures} (set EMBER_FIXTURES)")
    env = dict(os.environ)
    python_dir = tempfile.TemporaryDirectory(prefix="ember-doc-python-")
    (Path(python_dir.name) / "python3").symlink_to(sys.executable)
    env["PATH"] = f"{args.build / 'app'}:{python_dir.name}:{env['PATH']}"
    passed = failed = 0
    for page in sorted(args.docs.glob("*.md")):
        for name, options, blocks in parse_examples(page):
            with tempfile.TemporaryDirectory(prefix=f"ember-doc-{name}-") as tmp:
                work = scratch_checkout(Path(tmp), args.repo, args.build.resolve(), args.fixtures.resolve(),
                                        options.get("model", "stories260K.gguf"))
                ok = all(run_block(lang, text, work, env, f"{page.name}:{line} [{name}]", opts)
                         for lang, text, line, opts in blocks)
            print(f"{'ok' if ok else 'FAILED'}  {page.name}: {name} ({len(blocks)} blocks)")
            passed += ok
            failed += not ok
    python_dir.cleanup()
    print(f"{passed} passed, {failed} failed")
    if passed + failed == 0:
        sys.exit("doc examples: no example found in the docs (markers: <!-- example: NAME -->)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
