"""Ember from Python (docs/python.md).

    import ember
    m = ember.Model("model.gguf")                      # the engine, in this process
    logits, cache = m.run_with_cache("كتب الطالب الدرس")
    cache["after_layer", 5]                            # [T, n_embd] float32, bit for bit `ember extract`'s
    r = ember.open_run("runs/roots")                   # any run directory, verified (NumPy alone)

Reading runs (open_run, read_sweep_summary) needs only NumPy; Model needs the native
module `ember._ember`, built by the project's CMake.
"""

from .run import Run, RowSelection, RunError, open_run, read_sweep_summary, verify_run

__version__ = "0.1.0"

try:
    from ._ember import EmberError, ExperimentError, HookError, UsageError
    from .cache import Activation, Cache, Origin
    from .model import Generation, Model, Score, Tokens
except ImportError as _e:  # a laptop with results only: reading runs still works
    _native_error = _e

    def Model(*args, **kwargs):  # noqa: N802 (the class's name)
        raise ImportError(f"ember.Model needs the native module ember._ember, which did not import ({_native_error}); "
                          "build it with the project's CMake (docs/python.md)") from _native_error


def stages() -> list:
    """Every tensor stage: name, layer_stage, read_only, extractable (run_with_cache and extract
    take it: all but sae_features), shape, meaning (the stage table)."""
    from ._ember import tensor_stages

    return tensor_stages()
