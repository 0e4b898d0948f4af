"""extract() and score() against `ember extract --dataset`; open_run on good and tampered runs.

Rungs: activation-reference (m.extract writes the CLI's directory byte for byte, manifest
included; a score equals the CLI's targets.jsonl and the log-softmax of the joined text's
logits); smoke (open_run reads what the CLI wrote and names every tampered file).
"""

import json
import math
import os
import shutil

import numpy as np
import pytest

from conftest import model_path, run_cli

SAMPLES = [
    {"text": "كتب الطالب الدرس في المكتبة", "select": "substring:كتب:last", "root": "ktb", "target": " اليوم"},
    {"text": "درس الطالب الكتاب في البيت", "select": "substring:درس:last", "root": "drs"},
    {"text": "يكتب المعلم على السبورة", "select": "substring:يكتب", "root": "ktb", "target": " كل يوم"},
    {"id": "s4", "text": "المدرسة قريبة من البيت", "select": "substring:المدرسة", "root": "drs"},
]
MODEL = "synth-llama3-q8_0"


def write_dataset(path):
    with open(path, "w", encoding="utf-8") as f:
        for s in SAMPLES:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")


def files(directory):
    out = {}
    for root, _, names in os.walk(directory):
        for n in names:
            p = os.path.join(root, n)
            out[os.path.relpath(p, directory)] = open(p, "rb").read()
    return out


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dataset")
    write_dataset(tmp / "roots.jsonl")
    run_cli("extract", "--model", model_path(MODEL), "--dataset", str(tmp / "roots.jsonl"), "--out", str(tmp / "run"),
            "--stages", "after_layer,after_mlp", "--layers", "0,2", "--logit-lens", "3", "--route", "fast",
            "--threads", "2")
    shutil.move(tmp / "run", tmp / "cli")
    return tmp


def test_extract_writes_the_clis_directory_byte_for_byte(ember_mod, cli_run):
    with ember_mod.Model(model_path(MODEL), route="fast", threads=2) as m:
        r = m.extract(cli_run / "roots.jsonl", cli_run / "run", stages=["after_layer", "after_mlp"], layers=[0, 2],
                      logit_lens=3)
    assert isinstance(r, ember_mod.Run)
    cli, py = files(cli_run / "cli"), files(cli_run / "run")
    assert sorted(cli) == sorted(py)
    for name in cli:
        assert cli[name] == py[name], name  # the manifest too: a dataset manifest has no timing
    shutil.rmtree(cli_run / "run")


def test_extract_refuses_bad_requests(ember_mod, cli_run, tmp_path):
    with ember_mod.Model(model_path(MODEL)) as m:
        with pytest.raises(ember_mod.UsageError, match="unknown stage"):
            m.extract(cli_run / "roots.jsonl", tmp_path / "x", stages=["residual"])
        with pytest.raises(ember_mod.EmberError, match="missing.jsonl"):
            m.extract(tmp_path / "missing.jsonl", tmp_path / "y")
        with pytest.raises(ember_mod.EmberError):  # a directory holding another run is refused
            m.extract(cli_run / "roots.jsonl", cli_run / "cli")


def test_score_equals_the_clis_target_scoring_and_the_logits(ember_mod, cli_run):
    targets = {t["sample"]: t for t in ember_mod.open_run(cli_run / "cli").targets}
    with ember_mod.Model(model_path(MODEL), route="fast", threads=2) as m:
        for i, s in enumerate(SAMPLES):
            if "target" not in s:
                continue
            score = m.score(s["text"], s["target"])
            assert score.logprob == targets[i]["logprob"]
            assert [t["id"] for t in score.tokens] == [t["id"] for t in targets[i]["tokens"]]
            # Independently: the log-softmax of the joined text's logits, in double.
            logits, _ = m.run_with_cache(s["text"] + s["target"], stages=["after_layer"], layers=[0], logits="all")
            total = 0.0
            for t in score.tokens:
                row = logits[t["position"] - 1].astype(np.float64)
                top = row.max()
                total += row[t["id"]] - (top + math.log(np.exp(row - top).sum()))
            assert abs(total - score.logprob) < 1e-9 * max(1.0, abs(total))


def test_open_run_reads_a_dataset_run(ember_mod, cli_run):
    r = ember_mod.open_run(cli_run / "cli")
    assert r.is_dataset and sorted(r.arrays) == [("after_layer", 0), ("after_layer", 2), ("after_mlp", 0), ("after_mlp", 2)]
    rows = r.rows if isinstance(r.rows, list) else r.rows.to_dict("records")
    a = r.array("after_layer", 2)
    assert a.shape[0] == len(rows) and not a.flags.writeable
    assert [s["id"] for s in r.samples] == [1, 2, 3, "s4"]
    assert len(r.targets) == 2 and np.isnan(r.target_logprobs[1])
    sel = r.select(sample="s4")
    assert [rows[i]["sample"] for i in sel.indices] == [3] * len(sel)
    assert np.array_equal(sel.array("after_layer", 2), a[sel.indices])
    # "كتب" is in sample 0 and inside sample 2's يكتب: the rows selected there overlap it.
    ktb = r.select(substring="كتب")
    assert sorted({rows[i]["sample"] for i in ktb.indices}) == [0, 2]
    ids, lens_logits, pieces = r.logit_lens(2)
    assert ids.shape == (len(rows), 3) and len(pieces) == len(rows)
    with pytest.raises(KeyError, match="before_layer"):
        r.array("before_layer", 0)


def test_open_run_reads_a_single_prompt_extraction(ember_mod, tmp_path):
    run_cli("extract", "--model", model_path(MODEL), "--prompt", "كتب الطالب", "--out", str(tmp_path / "one"),
            "--layers", "1", "--select", "substring:الطالب")
    r = ember_mod.open_run(tmp_path / "one")
    rows = r.rows if isinstance(r.rows, list) else r.rows.to_dict("records")
    assert len(rows) == r.array("after_layer", 1).shape[0] and all(row["byte_end"] > row["byte_start"] for row in rows)
    assert len(r.select(substring="الطالب")) == len(rows)
    with ember_mod.Model(model_path(MODEL)) as m:
        _, cache = m.run_with_cache("كتب الطالب", layers=[1], positions="substring:الطالب")
    assert cache["after_layer", 1].tobytes() == np.asarray(r.array("after_layer", 1)).tobytes()


def tamper(src, dst, how):
    shutil.copytree(src, dst)
    how(dst)
    return dst


@pytest.mark.parametrize("case,how,message", [
    ("array", lambda d: _flip(d / "after_layer.layer0.npy", 200), "after_layer.layer0.npy: its SHA-256 does not match"),
    ("rows", lambda d: _append(d / "rows.jsonl", b"\n"), "rows.jsonl: .* bytes, the manifest says"),
    ("manifest", lambda d: _flip(d / "manifest.json", 40), "manifest.json: the seal does not match"),
    ("added", lambda d: (d / "notes.txt").write_text("hi"), "notes.txt: not listed in the manifest"),
    ("removed", lambda d: os.remove(d / "samples.jsonl"), "samples.jsonl: missing"),
    ("no manifest", lambda d: os.remove(d / "manifest.json"), "no manifest"),
])
def test_open_run_names_what_changed(ember_mod, cli_run, tmp_path, case, how, message):
    d = tamper(cli_run / "cli", tmp_path / "t", how)
    with pytest.raises(ember_mod.RunError, match=message):
        ember_mod.open_run(d)


def _flip(path, offset):
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x01
    open(path, "wb").write(bytes(data))


def _append(path, extra):
    with open(path, "ab") as f:
        f.write(extra)


def test_open_run_reads_merged_shards_as_the_unsharded_run(ember_mod, cli_run, tmp_path):
    # Rung: smoke. ember merge writes the unsharded run's directory: open_run reads it as one.
    for k in range(2):
        run_cli("extract", "--model", model_path(MODEL), "--dataset", str(cli_run / "roots.jsonl"), "--out",
                str(tmp_path / f"shard{k}"), "--stages", "after_layer,after_mlp", "--layers", "0,2", "--logit-lens", "3",
                "--route", "fast", "--batch-tokens", "16", "--shard", f"{k}/2")
    run_cli("merge", str(tmp_path / "shard0"), str(tmp_path / "shard1"), "--out", str(tmp_path / "merged"))
    merged, whole = ember_mod.open_run(tmp_path / "merged"), ember_mod.open_run(cli_run / "cli")
    assert merged.array("after_mlp", 2).tobytes() == whole.array("after_mlp", 2).tobytes()
    assert len(merged.samples) == len(SAMPLES)


def test_read_sweep_summary(ember_mod, tmp_path):
    # Rung: smoke. The summary `ember sweep` writes, as records.
    config = tmp_path / "one.toml"
    config.write_text(f'[model]\npath = "{model_path("stories260K")}"\n[prompt]\ntext = "Once"\n'
                      f'[generation]\nmax_tokens = 2\n[output]\ndir = "{tmp_path / "out"}"\n[hooks]\ndefaults = false\n')
    run_cli("sweep", str(config), "--summary", str(tmp_path / "s.csv"))
    run_cli("sweep", str(config), "--summary", str(tmp_path / "s.json"))
    for name in ("s.csv", "s.json"):
        records = ember_mod.read_sweep_summary(tmp_path / name)
        records = records if isinstance(records, list) else records.to_dict("records")
        assert len(records) == 1 and records[0]["config"].endswith("one.toml")
        assert records[0]["outcome"] in ("ok", "skipped")


def test_extract_leaves_the_interpreters_signal_handlers(ember_mod, cli_run, tmp_path):
    # Rung: smoke. The engine's run directory installs SIGINT/SIGTERM cleanup handlers
    # for the CLI; in Python, Ctrl-C must stay a KeyboardInterrupt, not kill the process.
    import signal

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with ember_mod.Model(model_path("stories260K")) as m:
        m.extract(cli_run / "roots.jsonl", tmp_path / "r")
        m.score("Once upon", " a time")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    # The C-level handler too: raising SIGINT gives Python's KeyboardInterrupt.
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
