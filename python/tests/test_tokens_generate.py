"""tokenize, to_str_tokens and generate against the CLI's `ember tokenize` and `ember generate`.

Rungs: golden logits (tokens equal llama.cpp's golden ids; greedy tokens equal the CLI's,
which its own suites hold to llama.cpp's greedy goldens); smoke (spans, errors).
"""

import json

import pytest

from conftest import FAMILY_MODELS, cli_json, fixture, model_path

TEXT = "كتب الطالب الدرس 📚 in the library"


@pytest.mark.parametrize("name", FAMILY_MODELS + ["synth-llama3-q8_0"])
def test_tokenize_equals_ember_tokenize(ember_mod, name):
    cli = cli_json("tokenize", "--model", model_path(name), "--prompt", TEXT)
    with ember_mod.Model(model_path(name)) as m:
        t = m.tokenize(TEXT)
        assert t.ids == [x["id"] for x in cli["tokens"]]
        assert t.spans == [(x["start"], x["end"]) for x in cli["tokens"]]
        for piece, x in zip(t.pieces, cli["tokens"]):
            assert piece.hex() == x.get("piece_hex", piece.hex()) and (x["piece"] is None or piece.decode() == x["piece"])
        raw = TEXT.encode()
        assert b"".join(raw[s:e] for s, e in t.spans) == raw  # the spans tile the text
        assert m.to_str_tokens(TEXT) == t.str_tokens == m.to_str_tokens(t.ids)
    no_bos = cli_json("tokenize", "--model", model_path(name), "--prompt", TEXT, "--no-bos")
    with ember_mod.Model(model_path(name)) as m:
        assert m.tokenize(TEXT, add_bos=False).ids == [x["id"] for x in no_bos["tokens"]]


def test_special_tokens_parse_only_when_asked(ember_mod):
    with ember_mod.Model(model_path("synth-llama3-q8_0")) as m:
        plain = m.tokenize("<|eot_id|>hi", add_bos=False)
        special = m.tokenize("<|eot_id|>hi", special=True, add_bos=False)
        cli = cli_json("tokenize", "--model", model_path("synth-llama3-q8_0"), "--prompt", "<|eot_id|>hi", "--special",
                       "--no-bos")
    assert special.ids == [x["id"] for x in cli["tokens"]]
    assert len(special.ids) < len(plain.ids)


@pytest.mark.parametrize("name", ["stories260K", "synth-qwen3-k-q5_1"])
def test_tokens_equal_llama_cpp_goldens(ember_mod, name):
    golden = json.load(open(fixture(f"golden/{name}.golden.json")))
    with ember_mod.Model(model_path(name)) as m:
        for p in golden["prompts"]:
            assert m.tokenize(p["text"]).ids == p["tokens"]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
@pytest.mark.parametrize("name", ["stories260K", "synth-gemma4-k-q4_1"])
def test_generate_equals_ember_generate(ember_mod, name, temperature):
    prompt = "Once upon a time"
    cli = cli_json("generate", "--model", model_path(name), "--prompt", prompt, "--max-tokens", "12",
                   "--temperature", str(temperature), "--seed", "7", "--threads", "2")
    with ember_mod.Model(model_path(name), threads=2) as m:
        g = m.generate(prompt, max_tokens=12, temperature=temperature, seed=7)
    assert g.prompt_tokens == cli["prompt_tokens"]
    assert g.tokens == cli["tokens"]
    assert g.stop_reason == cli["stop_reason"]
    assert [s["logit"] for s in g.steps] == [s["logit"] for s in cli["steps"]]


def test_generate_refuses_bad_input(ember_mod):
    with ember_mod.Model(model_path("stories260K")) as m:
        with pytest.raises(TypeError, match="chat messages"):
            m.generate([{"role": "user", "content": "hi"}])
        with pytest.raises(ember_mod.UsageError, match="top"):
            m.generate("hi", temperature=0.5, top_p=2.0)
