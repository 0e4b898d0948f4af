"""Reading Ember's run directories with NumPy alone (no engine needed; docs/python.md).

    r = ember.open_run("roots")          # checks the seal and every file's SHA-256
    X = r.array("after_layer", 8)        # [rows, n_embd] float32, memory-mapped, read-only
    r.rows                               # a list of dicts, or a DataFrame when pandas is present
    r.select(substring="كتب").array("after_layer", 8)

The checks are those of `ember verify` that matter to a reader (docs/formats.md,
"Verification"): the manifest's seal, every listed file's size and SHA-256, no file the
manifest does not list. Any failure is a RunError naming the file.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from typing import Optional

import numpy as np

MANIFEST = "manifest.json"
_LOCK = ".ember-lock"  # a writer's lock: not a file of any run


class RunError(Exception):
    """A run directory that does not match its manifest (or has none)."""


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_manifest(directory: str) -> dict:
    path = os.path.join(directory, MANIFEST)
    try:
        raw = open(path, "rb").read()
    except FileNotFoundError:
        raise RunError(f"{path}: no manifest (not a run directory, or an unfinished run)") from None
    try:
        manifest = json.loads(raw)
        seal = manifest["manifest_sha256"]
    except (ValueError, KeyError, TypeError) as e:
        raise RunError(f"{path}: not a sealed manifest ({e})") from None
    zeroed = raw.replace(f'"manifest_sha256": "{seal}"'.encode(), f'"manifest_sha256": "{"0" * 64}"'.encode())
    if hashlib.sha256(zeroed).hexdigest() != seal:
        raise RunError(f"{path}: the seal does not match: the manifest changed after it was written")
    return manifest


def verify_run(directory: str) -> dict:
    """The manifest of `directory` after checking it and every file it lists; RunError naming the first problem."""
    manifest = _read_manifest(directory)
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise RunError(f"{os.path.join(directory, MANIFEST)}: no 'files' record")
    for name, record in files.items():
        path = os.path.join(directory, name)
        if os.path.isabs(name) or ".." in name.split("/"):
            raise RunError(f"{os.path.join(directory, MANIFEST)}: files: '{name}' is not a path inside the directory")
        if not os.path.isfile(path):
            raise RunError(f"{path}: missing (the manifest lists it)")
        size = os.path.getsize(path)
        if size != record.get("bytes"):
            raise RunError(f"{path}: {size} bytes, the manifest says {record.get('bytes')}: the file changed")
        if _sha256_file(path) != record.get("sha256"):
            raise RunError(f"{path}: its SHA-256 does not match the manifest: the file changed")
    for root, _, names in os.walk(directory):
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), directory).replace(os.sep, "/")
            if rel != MANIFEST and rel != _LOCK and rel not in files and not rel.endswith("/" + MANIFEST):
                raise RunError(f"{os.path.join(directory, rel)}: not listed in the manifest (a file added after the run)")
    return manifest


def _jsonl(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _frame(records: list):
    try:
        import pandas
    except ImportError:
        return records
    return pandas.DataFrame.from_records(records)


class Run:
    """A verified run directory: an extraction (`ember extract`), a dataset run, a merged
    dataset run (`ember merge`: the unsharded run's files) or `ember run`'s directory."""

    def __init__(self, directory: str, manifest: dict):
        self.dir = os.fspath(directory)
        self.manifest = manifest
        self.kind = manifest.get("kind")
        self._tensors = {}
        for t in manifest.get("tensors") or []:
            self._tensors[(t["stage"], t.get("layer"))] = t
        self._rows = None

    def __repr__(self):
        return f"ember.Run('{self.dir}', {self.kind}, {len(self._tensors)} arrays)"

    @property
    def is_dataset(self) -> bool:
        return self.kind == "ember.dataset_extraction"

    @property
    def arrays(self) -> list:
        """(stage, layer) of every array; layer None for the logits stages."""
        return list(self._tensors)

    def array(self, stage: str, layer: Optional[int] = None, mmap: bool = True) -> np.ndarray:
        """STAGE.layerN.npy (or STAGE.npy, "logits" for logits.npy): [rows, cols], read-only."""
        if stage == "logits":
            entry = self.manifest.get("logits")
            if not entry:
                raise KeyError(f"{self.dir}: the run wrote no logits.npy")
            file = entry["file"]
        else:
            entry = self._tensors.get((stage, layer))
            if entry is None:
                have = ", ".join(f"{s}" + (f" layer {l}" if l is not None else "") for s, l in self._tensors)
                raise KeyError(f"{self.dir}: no array for {stage}" + (f" layer {layer}" if layer is not None else "")
                               + f" (it has: {have or 'none'})")
            file = entry["file"]
        return np.load(os.path.join(self.dir, file), mmap_mode="r" if mmap else None, allow_pickle=False)

    def logit_lens(self, layer: int):
        """(ids [rows, K] int32, logits [rows, K] float32, pieces) of the logit lens at `layer`."""
        lens = self.manifest.get("logit_lens") or {}
        for l in lens.get("layers", []):
            if l["layer"] == layer:
                if l.get("pieces_file"):
                    with open(os.path.join(self.dir, l["pieces_file"]), encoding="utf-8") as f:
                        pieces = json.load(f)
                else:  # a dataset run: in rows.jsonl
                    pieces = [r.get("logit_lens_pieces", {}).get(str(layer)) for r in self._row_records()]
                return (np.load(os.path.join(self.dir, l["ids_file"]), mmap_mode="r"),
                        np.load(os.path.join(self.dir, l["logits_file"]), mmap_mode="r"), pieces)
        raise KeyError(f"{self.dir}: no logit lens for layer {layer}")

    def _row_records(self) -> list:
        if self._rows is None:
            if os.path.exists(os.path.join(self.dir, "rows.jsonl")):
                self._rows = _jsonl(os.path.join(self.dir, "rows.jsonl"))
            else:  # one prompt: its rows are the tensor contract's positions
                tok = self.manifest["tokenizer"]
                contract = self.manifest.get("tensor_contract") or {}
                partial = contract.get("partial") or []
                self._rows = []
                for r, p in enumerate(contract.get("positions") or []):
                    t = tok["tokens"][p]
                    self._rows.append({"row": r, "sample": 0, "position": p, "token": t["id"], "piece": t["piece"],
                                       "piece_hex": t["piece_hex"], "byte_start": t["start"], "byte_end": t["end"],
                                       "partial": partial[r] if r < len(partial) else False,
                                       "select": contract.get("select")})
        return self._rows

    @property
    def rows(self):
        """One record per array row: sample, id, position, token, piece, byte span, partial, spec
        (a pandas DataFrame when pandas is installed, else a list of dicts)."""
        return _frame(self._row_records())

    @property
    def samples(self) -> list:
        path = os.path.join(self.dir, "samples.jsonl")
        if os.path.exists(path):
            return _jsonl(path)
        return list(self.manifest.get("samples") or [])

    @property
    def targets(self) -> list:
        """targets.jsonl: per sample with a target, its summed log-probability and tokens."""
        path = os.path.join(self.dir, "targets.jsonl")
        return _jsonl(path) if os.path.exists(path) else []

    @property
    def target_logprobs(self) -> Optional[np.ndarray]:
        """targets.npy: float64 [samples], NaN for a sample without a target."""
        path = os.path.join(self.dir, "targets.npy")
        return np.load(path) if os.path.exists(path) else None

    def select(self, sample=None, substring: Optional[str] = None) -> "RowSelection":
        """The rows of one sample (its index, or its id as written) and/or whose token
        overlaps an occurrence of `substring` in its sample's text (bytes, not characters)."""
        records = self._row_records()
        samples = self.samples
        texts = {i: s.get("text") for i, s in enumerate(samples)}
        chosen = []
        for i, r in enumerate(records):
            if sample is not None and r.get("sample") != sample and r.get("id") != sample:
                continue
            if substring is not None:
                text = texts.get(r.get("sample", 0))
                if text is None and not self.is_dataset:
                    text = self._prompt_text()
                if not _overlaps(text or "", substring, r["byte_start"], r["byte_end"]):
                    continue
            chosen.append(i)
        return RowSelection(self, chosen)

    def _prompt_text(self) -> Optional[str]:
        pieces = self.manifest.get("tokenizer", {}).get("tokens", [])
        try:
            return b"".join(bytes.fromhex(t["piece_hex"]) for t in pieces if t["end"] > t["start"]).decode("utf-8")
        except (UnicodeDecodeError, KeyError):
            return None


def _overlaps(text: str, substring: str, start: int, end: int) -> bool:
    data, needle = text.encode("utf-8"), substring.encode("utf-8")
    if not needle:
        return False
    at = data.find(needle)
    while at >= 0:
        if start < at + len(needle) and at < end:
            return True
        at = data.find(needle, at + len(needle))
    return False


class RowSelection:
    """Some rows of a run: .indices, .rows, .array(stage, layer) (a copy of those rows)."""

    def __init__(self, run: Run, indices: list):
        self.run = run
        self.indices = np.asarray(indices, dtype=np.int64)

    def __len__(self):
        return len(self.indices)

    @property
    def rows(self):
        records = self.run._row_records()
        return _frame([records[i] for i in self.indices])

    def array(self, stage: str, layer: Optional[int] = None) -> np.ndarray:
        # The first axis is the row in every array (attention_pattern: [rows, n_head, n_kv]).
        return np.asarray(self.run.array(stage, layer)[self.indices])


def open_run(directory) -> Run:
    """A run directory, verified: RunError naming the file that changed, is missing or was added."""
    directory = os.fspath(directory)
    return Run(directory, verify_run(directory))


def read_sweep_summary(path):
    """`ember sweep --summary FILE.json|FILE.csv`: one record per run (a DataFrame with pandas)."""
    path = os.fspath(path)
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            records = json.load(f)
    elif path.endswith(".csv"):
        with open(path, encoding="utf-8", newline="") as f:
            records = list(csv.DictReader(f))
    else:
        raise ValueError(f"{path}: a sweep summary is .json or .csv")
    return _frame(records)
