"""ember.Model: a GGUF model run in this process by Ember's engine (docs/python.md).

Every method makes the engine calls the CLI makes (python/src/model_handle.hpp), so its
numbers are the CLI's bit for bit: run_with_cache's arrays are `ember extract`'s, extract()
writes the directory `ember extract --dataset` writes, generate() is `ember generate`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import numpy as np

from . import _ember
from .cache import Cache, Origin, activation
from .run import Run, open_run

Prompt = str
_STAGE_NAMES = frozenset(s["name"] for s in _ember.tensor_stages())


@dataclass(frozen=True)
class Tokens:
    """A text's tokens: ids, each token's bytes and its byte span [start, end) in the UTF-8 text."""

    ids: list
    pieces: list  # bytes of each token (special tokens as their text)
    spans: list  # (start, end) byte offsets; BOS covers no byte (start == end == 0)

    def __len__(self):
        return len(self.ids)

    @property
    def str_tokens(self) -> list:
        """The pieces as text; a piece that is part of a character shows its bytes as \\xNN."""
        return [p.decode("utf-8", errors="backslashreplace") for p in self.pieces]


@dataclass(frozen=True)
class Generation:
    text: str  # the generated tokens decoded (invalid UTF-8 replaced)
    tokens: list
    prompt_tokens: list
    steps: list  # per token: token, logit, margin (its logit minus the best other)
    stop_reason: str  # "max_tokens" | "end_of_generation"
    route: str
    kernel: str


@dataclass(frozen=True)
class Score:
    """A target's teacher-forced log-probability after a text (`ember extract --dataset`'s target scoring)."""

    logprob: float  # the sum over the target's tokens, natural log
    tokens: list = field(default_factory=list)  # per target token: position, id, piece, logprob


def _join(values, what: str) -> str:
    if isinstance(values, str):
        return values
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"{what}: give a string or a list, not {type(values).__name__}") from None
    if what == "layers":
        for v in items:
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"layers: {v!r} is not a layer index")
    return ",".join(str(v) for v in items)


def _positions(positions):
    """(positions, select) for the engine: all / last / a list of indices, or a selection spec."""
    if isinstance(positions, str):
        if positions in ("all", "last"):
            return positions, None
        return "all", positions  # a selection spec: "substring:كتب", "bytes:0-4", "-1", ...
    items = list(positions)
    for p in items:
        if not isinstance(p, (int, np.integer)) or isinstance(p, bool):
            raise TypeError(f"positions: {p!r} is not a position")
    if any(p < 0 for p in items):
        return "all", ",".join(str(p) for p in items)  # negative indices are a spec's
    return ",".join(str(p) for p in items), None


class Model:
    """A model file, loaded once: ember.Model("model.gguf", route=None, threads=0).

    route: "fast" (llama.cpp's numerics; the default where built) or "reference"; threads 0 = every
    hardware thread (results are the same for every count); ctx, kv_type and arch as the
    CLI's --ctx, --kv-type and --arch. Use it as a context manager or call close().
    """

    def __init__(self, path: Union[str, os.PathLike], route: Optional[str] = None, threads: int = 0, ctx: int = 0,
                 kv_type: str = "f32", arch: str = "auto"):
        if route is None:  # the CLI's default: fast where this build has it (-DEMBER_FAST=OFF has not)
            route = "fast" if _ember.has_route("fast") else "reference"
        if not isinstance(threads, int) or threads < 0:
            raise ValueError(f"threads={threads!r}: give an int >= 0 (0: every hardware thread)")
        if not isinstance(ctx, int) or ctx < 0:
            raise ValueError(f"ctx={ctx!r}: give an int >= 0 (0: the default context)")
        self._h = _ember.ModelHandle(os.fspath(path), route, threads, ctx, kv_type, arch)
        self._info = None
        self._sites = (self._h.n_layers, self._h.block_post_norms)  # what hook names are checked against

    # -- the model ----------------------------------------------------------------------
    def close(self):
        """Releases the weights and the session; arrays handed out stay valid."""
        self._h.close()

    @property
    def closed(self) -> bool:
        return self._h.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"{self.info['family']}, {self.n_layers} layers"
        return f"ember.Model('{self._h.path}', {state})"

    @property
    def info(self) -> dict:
        """The manifest's model record (family, dims with per-layer geometry, weight types) and the tokenizer's."""
        if self._info is None:
            self._info = json.loads(self._h.info_json())
        self._h.sha256  # a closed model says so
        return self._info

    @property
    def n_layers(self) -> int:
        return self._h.n_layers

    @property
    def sha256(self) -> str:
        return self._h.sha256

    @property
    def path(self) -> str:
        return self._h.path

    # -- tokens -------------------------------------------------------------------------
    def tokenize(self, text: str, special: bool = False, add_bos: Optional[bool] = None) -> Tokens:
        """The ids llama.cpp gives `text`, with pieces and byte spans. special=True parses
        special-token texts (<|eot_id|>); add_bos None = as the model's metadata says."""
        t = self._h.tokenize(_text(text), bool(special), add_bos)
        return Tokens(t["ids"], t["pieces"], list(zip(t["starts"], t["ends"])))

    def to_str_tokens(self, text_or_ids, special: bool = False, add_bos: Optional[bool] = None) -> list:
        """Each token as text (TransformerLens's to_str_tokens): from a text, or from ids."""
        if isinstance(text_or_ids, str):
            return self.tokenize(text_or_ids, special, add_bos).str_tokens
        return [self._h.piece(int(i), True).decode("utf-8", errors="backslashreplace") for i in text_or_ids]

    def decode(self, ids: Sequence[int]) -> str:
        return self._h.decode([int(i) for i in ids]).decode("utf-8", errors="replace")

    # -- generation ---------------------------------------------------------------------
    def generate(self, prompt: Prompt, max_tokens: int = 32, temperature: float = 0.0, seed: int = 42,
                 top_k: int = 40, top_p: float = 0.95, add_bos: Optional[bool] = None) -> Generation:
        """`ember generate`: greedy at temperature 0, else seeded sampling (the same tokens as the CLI's)."""
        if not isinstance(prompt, str):
            raise TypeError("generate: give the prompt as a str (chat messages are not supported yet)")
        if max_tokens < 0:
            raise ValueError(f"max_tokens={max_tokens}: give a count >= 0")
        g = self._h.generate(prompt, int(max_tokens), float(temperature), int(top_k), float(top_p), int(seed), add_bos)
        return Generation(g["text"].decode("utf-8", errors="replace"), g["tokens"], g["prompt_tokens"], g["steps"],
                          g["stop_reason"], g["route"], g["kernel"])

    # -- one prefill, with its activations ----------------------------------------------
    def run_with_cache(self, prompt: Prompt, stages=("after_layer",), layers="all", positions="all",
                       logits: str = "last", add_bos: Optional[bool] = None):
        """`logits, cache = m.run_with_cache(prompt)`: one prefill, as `ember extract --prompt`.

        stages: names (or "all"); layers: "all" or a list; positions: "all", "last", a list
        of indices or a selection spec ("substring:كتب:last"); logits: "last", "all",
        "selected" or "none". Returns the logits [rows, n_vocab] (None for "none") and a
        Cache of [positions, cols] arrays, bit for bit the CLI's .npy files.
        """
        return self.run_with_hooks(prompt, hooks=None, stages=stages, layers=layers, positions=positions,
                                   logits=logits, add_bos=add_bos)

    def run_with_hooks(self, prompt: Prompt, hooks: Optional[dict] = None, stages=("after_layer",), layers="all",
                       positions="all", logits: str = "last", add_bos: Optional[bool] = None,
                       experiments: Sequence = (), config=None, failure: str = "strict"):
        """run_with_cache with Python callables and .so experiments at hook sites.

        hooks: {("after_mlp", 3): fn, ("after_layer", "all"): fn, "after_logits": fn}. Each
        fn(activation, context) gets a writable float32 view of the engine's tensor (no
        copy; valid during the call) and a context (stage, layer, phase, positions, ...):
        read it to observe, write it (or return a replacement of the same shape) to
        intervene. experiments: plugin paths run before the hooks, with config: one dict
        (one experiment) or a list of dicts. The cache records what the model then
        computed with. An exception in a hook stops the run: ember.HookError, naming the
        hook and the site, with the hook's exception as its __cause__.
        """
        if not isinstance(prompt, str):
            raise TypeError(f"the prompt must be a str, not {type(prompt).__name__}")
        stage_names = self._stage_list(stages)
        pos, select = _positions(positions)
        hook_list = self._hook_list(hooks or {})
        experiment_list = _experiment_list(experiments, config)
        r = self._h.run(prompt, stage_names, _join(layers, "layers"), pos, select, logits, add_bos, hook_list,
                        experiment_list, failure)
        return self._result(r)

    # -- datasets and targets -----------------------------------------------------------
    def extract(self, dataset, out, select: Optional[str] = None, stages=("after_layer",), layers="all",
                logits: str = "none", logit_lens: int = 0, batch_tokens: int = 0, on_empty: str = "error",
                evaluate: str = "needed", experiments: Sequence = (), overwrite: bool = False) -> Run:
        """`ember extract --dataset DATASET --out OUT ...`: the same files, the same manifest.
        Returns the run directory, opened (open_run)."""
        self._h.extract_dataset(os.fspath(dataset), os.fspath(out), self._stage_list(stages), _join(layers, "layers"),
                                select, logits, int(logit_lens), int(batch_tokens), on_empty, evaluate,
                                [os.fspath(e) for e in experiments], bool(overwrite))
        return open_run(out)

    def score(self, text: str, target: str) -> Score:
        """log p(target | text) by teacher forcing, as a dataset sample's target is scored
        (docs/extraction.md, "Target scoring"): the CLI's own code, on a one-sample dataset."""
        if not isinstance(text, str) or not isinstance(target, str):
            raise TypeError("score(text, target): give two str")
        with tempfile.TemporaryDirectory(prefix="ember-score-") as tmp:
            dataset = os.path.join(tmp, "sample.jsonl")
            with open(dataset, "w", encoding="utf-8") as f:
                f.write(json.dumps({"text": text, "target": target}, ensure_ascii=False) + "\n")
            last = self.n_layers - 1
            self._h.extract_dataset(dataset, os.path.join(tmp, "run"), "after_layer", str(last), "last", "none", 0, 0,
                                    "error", "needed", [], False)
            with open(os.path.join(tmp, "run", "targets.jsonl"), encoding="utf-8") as f:
                record = json.loads(f.readline())
        return Score(record["logprob"], record["tokens"])

    # -- other tools' hook names --------------------------------------------------------
    def hook_site(self, name: str, layer: Optional[int] = None):
        """(stage, layer) of another tool's hook name, from the engine's one table
        (engine/hooks/hook_names; docs/features.md): "blocks.5.hook_resid_post",
        "model.layers.5.mlp", "after_layer:5"; or a TransformerLens short name with a layer,
        spelled out as its get_act_name does ("resid_post", 5 -> blocks.5.hook_resid_post;
        "z" -> blocks.5.attn.hook_z; "post" -> blocks.5.mlp.hook_post). None when no spelling
        is a known name; EmberError when the table refuses the name (and says why) or the
        layer does not exist."""
        if layer is None:
            candidates = [name]
        else:
            candidates = [f"blocks.{layer}.hook_{name}", f"blocks.{layer}.{name}", f"blocks.{layer}.attn.hook_{name}",
                          f"blocks.{layer}.mlp.hook_{name}"]
        for full in candidates:
            try:
                return _ember.resolve_hook_name(full, *self._sites)
            except _ember.EmberError as e:
                if "not a site Ember knows" not in str(e):
                    raise
        return None

    # -- helpers ------------------------------------------------------------------------
    def _stage_list(self, stages) -> str:
        if isinstance(stages, str) and stages == "all":
            return ",".join(s["name"] for s in _ember.tensor_stages() if s["extractable"])
        return _join(stages, "stages")

    def _hook_list(self, hooks: dict) -> list:
        if not isinstance(hooks, dict):
            raise TypeError(f"hooks: give a dict {{(stage, layer): fn}}, not {type(hooks).__name__}")
        out = []
        for key, fn in hooks.items():
            if not callable(fn):
                raise TypeError(f"hooks[{key!r}]: {fn!r} is not callable")
            name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
            if isinstance(key, str):
                site = None if key in _STAGE_NAMES else self.hook_site(key)
                out.append((*(site or (key, None)), fn, name))
                continue
            if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str)):
                raise TypeError(f"hooks: key {key!r} is not (stage, layer) or a stage name")
            stage, layer = key
            if stage not in _STAGE_NAMES and isinstance(layer, (int, np.integer)) and not isinstance(layer, bool):
                site = self.hook_site(stage, int(layer))
                if site is not None:
                    out.append((*site, fn, name))
                    continue
            if layer == "all":
                out.extend((stage, l, fn, name) for l in range(self.n_layers))
            elif layer is None or (isinstance(layer, (int, np.integer)) and not isinstance(layer, bool)):
                if layer is not None and layer < 0:
                    raise ValueError(f"hooks: key {key!r}: layer {layer} does not exist (layers 0-{self.n_layers - 1})")
                out.append((stage, None if layer is None else int(layer), fn, name))
            else:
                raise TypeError(f"hooks: key {key!r}: the layer must be an int, \"all\" or None")
        return out

    def _result(self, r: dict):
        sha, path = self._h.sha256, self._h.path

        def origin(c):
            return Origin(sha, path, c["stage"], c["layer"], "prefill", r["route"], r["kernel"], tuple(c["positions"]),
                          c["rows_per_position"], r["select"], r["threads"])

        entries = {(c["stage"], c["layer"]): activation(c["array"], origin(c)) for c in r["captures"]}
        logits = None
        if r["logits"] is not None:
            logits = activation(r["logits"]["array"], origin(dict(r["logits"], stage="logits")))
        return logits, Cache(entries, resolve_alias=self._cache_alias)

    def _cache_alias(self, stage, layer):
        if stage in _STAGE_NAMES:
            return None
        return self.hook_site(stage, layer)


def _text(text) -> str:
    if not isinstance(text, str):
        raise TypeError(f"give a str, not {type(text).__name__}")
    return text


def _experiment_list(experiments, config) -> list:
    if isinstance(experiments, (str, os.PathLike)):
        experiments = [experiments]
    paths = [os.fspath(e) for e in experiments]
    if config is None:
        configs = [{} for _ in paths]
    elif isinstance(config, dict):
        if len(paths) != 1:
            raise ValueError(f"config: one dict configures one experiment; give a list of {len(paths)} dicts")
        configs = [config]
    else:
        configs = list(config)
        if len(configs) != len(paths):
            raise ValueError(f"config: {len(configs)} configs for {len(paths)} experiments")
    for p in paths:
        if not os.path.isfile(p):
            raise FileNotFoundError(f"experiment plugin {p}: no such file")
    return [(p, json.dumps(c, ensure_ascii=False)) for p, c in zip(paths, configs)]
