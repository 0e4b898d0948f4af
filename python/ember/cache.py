"""Activations with their origin, and the cache a run returns (docs/python.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class Origin:
    """Where an activation came from: enough to reproduce it with `ember extract`."""

    model_sha256: str
    model_path: str
    stage: str
    layer: Optional[int]  # None for the logits stages
    phase: str  # "prefill"
    route: str  # "fast" | "reference"
    kernel: str  # the kernels' CPU variant (the manifest's backend.variant)
    positions: tuple  # the prompt position of each row (attention_pattern: n_head rows each)
    rows_per_position: int = 1
    select: str = "all"  # the selection spec's text form
    threads: int = 0


class Activation(np.ndarray):
    """A float32 NumPy array that knows its `.origin`.

    A run's activations are read-only views of the engine's own buffers (no copy); the
    buffer lives as long as any view of it. Arrays derived from one (a slice, a sum) are
    plain arrays again and carry no origin: their rows may no longer be the origin's.
    """

    origin: Optional[Origin] = None

    def __array_finalize__(self, obj):
        self.origin = None

    def __array_wrap__(self, out_arr, context=None, *args):
        return np.asarray(out_arr)

    def __getitem__(self, item):
        out = super().__getitem__(item)
        return out.view(np.ndarray) if isinstance(out, np.ndarray) else out

    def __reduce__(self):  # pickles as a plain array
        return np.asarray(self).copy().__reduce__()


def activation(array: np.ndarray, origin: Origin) -> Activation:
    a = array.view(Activation)
    a.origin = origin
    return a


def _key_text(key) -> str:
    return repr(key) if not isinstance(key, str) else f"'{key}'"


class Cache(Mapping):
    """The activations of one run: cache["after_layer", 5] -> [positions, n_embd].

    Keys are (stage, layer) for the layer stages and the stage name alone (or
    (stage, None)) for before_logits / after_logits.
    """

    def __init__(self, entries: dict, resolve_alias=None):
        self._entries = entries  # (stage, layer or None) -> Activation
        self._resolve_alias = resolve_alias

    def _key(self, key):
        if isinstance(key, str):
            if (key, None) in self._entries:
                return (key, None)
            if self._resolve_alias is not None:
                resolved = self._resolve_alias(key, None)
                if resolved is not None:
                    return resolved
            return (key, None)
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str):
            stage, layer = key
            if layer is not None and not isinstance(layer, (int, np.integer)):
                raise TypeError(f"cache key {key!r}: the layer must be an int (or None for a logits stage)")
            layer = None if layer is None else int(layer)
            if (stage, layer) not in self._entries and self._resolve_alias is not None:
                resolved = self._resolve_alias(stage, layer)
                if resolved is not None:
                    return resolved
            return (stage, layer)
        raise TypeError(f"cache key {key!r}: give (stage, layer) or a stage name")

    def __getitem__(self, key) -> Activation:
        k = self._key(key)
        if k not in self._entries:
            raise KeyError(f"{_key_text(key)} is not in this cache (it holds {self.describe()}); "
                           "ask for it with stages=[...], layers=[...]")
        return self._entries[k]

    def __iter__(self):
        return iter(self._entries)

    def __len__(self):
        return len(self._entries)

    def __contains__(self, key):
        try:
            return self._key(key) in self._entries
        except TypeError:
            return False

    @property
    def stages(self) -> list:
        return list(dict.fromkeys(stage for stage, _ in self._entries))

    def layers(self, stage: str) -> list:
        return [layer for s, layer in self._entries if s == stage]

    def describe(self) -> str:
        parts = []
        for stage in self.stages:
            layers = [l for l in self.layers(stage) if l is not None]
            parts.append(f"{stage} layers {layers}" if layers else stage)
        return "; ".join(parts) if parts else "nothing"

    def __repr__(self):
        return f"Cache({self.describe()})"
