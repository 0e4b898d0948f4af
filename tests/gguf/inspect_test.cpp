// Rung: smoke + file-structure checks. `ember inspect --json` on every fixture model
// parses with Boost.JSON and reports the counts, types and hyperparameters in the files.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "support/fixtures.hpp"

namespace json = boost::json;
using ember::test::fixture_path;
using ember::test::run_command;
using ember::test::shell_quote;

namespace {

json::object inspect(const std::string& model, const std::string& extra = "--tensors") {
    const auto path = fixture_path("models/" + model + ".gguf");
    const auto r = run_command(std::string(EMBER_BINARY) + " inspect --json " + extra + " " + shell_quote(path.string()));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return json::parse(r.output).as_object();
}

const json::object& tensor(const json::object& o, std::string_view name) {
    for (const auto& t : o.at("tensors").as_array()) {
        if (t.as_object().at("name").as_string() == name) return t.as_object();
    }
    FAIL("no tensor " << name);
    throw;
}

}  // namespace

TEST_CASE("inspect: every fixture model parses and its JSON has the documented keys") {
    for (const char* model : ember::test::kFixtureModels) {
        CAPTURE(model);
        const auto o = inspect(model);
        for (const char* key : {"architecture", "family", "name", "n_layers", "n_embd", "tensor_count", "tokenizer", "tensors",
                                "layers", "weight_types"}) {
            CHECK_MESSAGE(o.contains(key), key);
        }
        CHECK(o.at("tensors").as_array().size() == o.at("tensor_count").as_int64());
        const auto& tok = o.at("tokenizer").as_object();
        for (const char* key : {"model", "pre", "vocab_size", "bos_id", "eos_id", "add_bos"}) CHECK_MESSAGE(tok.contains(key), key);
    }
}

TEST_CASE("inspect: stories260K") {
    const auto o = inspect("stories260K");
    CHECK(o.at("family") == "llama");
    CHECK(o.at("tensor_count") == 48);
    CHECK(o.at("n_layers") == 5);
    CHECK(o.at("n_embd") == 64);
    CHECK(o.at("n_vocab") == 512);
    for (const auto& layer : o.at("layers").as_array()) {
        CHECK(layer.at("n_head") == 8);
        CHECK(layer.at("n_head_kv") == 4);
        CHECK(layer.at("head_dim") == 8);
    }
    CHECK(o.at("tokenizer").at("model") == "llama");
    CHECK(o.at("tokenizer").at("vocab_size") == 512);
    CHECK(o.at("tokenizer").at("add_bos") == true);
    CHECK(o.at("weight_types").as_object().size() == 1);
    CHECK(o.at("weight_types").at("F32").at("tensors") == 48);
    const auto& embd = tensor(o, "token_embd.weight");
    CHECK(embd.at("type") == "F32");
    CHECK(embd.at("shape") == json::array{64, 512});
    CHECK(embd.at("bytes") == 64 * 512 * 4);
    CHECK(embd.at("layout") == "row-major [512, 64] (ne[0]=64 contiguous)");
    CHECK(o.at("lm_head") == "output.weight");
}

TEST_CASE("inspect: stories260K-q8_0 mixes Q8_0, F16 (rows of 172) and F32") {
    const auto o = inspect("stories260K-q8_0");
    CHECK(tensor(o, "blk.0.attn_q.weight").at("type") == "Q8_0");
    CHECK(tensor(o, "blk.0.ffn_down.weight").at("type") == "F16");
    CHECK(tensor(o, "blk.0.ffn_down.weight").at("shape") == json::array{172, 64});
    CHECK(tensor(o, "blk.0.attn_norm.weight").at("type") == "F32");
    // Q8_0: 34 bytes per 32 elements.
    CHECK(tensor(o, "blk.0.attn_q.weight").at("bytes") == 64 / 32 * 34 * 64);
}

TEST_CASE("inspect: synth-gemma4-e has the E2B-style geometry") {
    const auto o = inspect("synth-gemma4-e-q8_0");
    CHECK(o.at("family") == "gemma4");
    CHECK(o.at("n_layers") == 4);
    CHECK(o.at("n_embd_per_layer") == 8);
    CHECK(o.at("n_shared_kv_layers") == 2);
    CHECK(o.at("tied_output") == true);
    const auto& layers = o.at("layers").as_array();
    const char* pattern[] = {"sliding_window", "full", "sliding_window", "full"};
    for (std::size_t l = 0; l < 4; ++l) CHECK(layers[l].at("attention") == pattern[l]);
    // The last two layers read the K/V of the last SWA and full layers with their own.
    CHECK(layers[2].at("kv_source") == 0);
    CHECK(layers[3].at("kv_source") == 1);
    CHECK(tensor(o, "blk.0.proj.weight").at("type") == "F16");
    CHECK(tensor(o, "per_layer_token_embd.weight").at("type") == "Q8_0");
    CHECK(o.at("tokenizer").at("model") == "gemma4");
    CHECK(o.at("tokenizer").at("add_bos") == true);
}

TEST_CASE("inspect: synth-gemma4 has per-layer head dims, KV heads and rope bases") {
    const auto o = inspect("synth-gemma4-q8_0");
    const auto& layers = o.at("layers").as_array();
    const bool swa[] = {true, true, false, true, false};
    for (std::size_t l = 0; l < 5; ++l) {
        CAPTURE(l);
        CHECK(layers[l].at("attention") == (swa[l] ? "sliding_window" : "full"));
        CHECK(layers[l].at("head_dim") == (swa[l] ? 32 : 64));
        CHECK(layers[l].at("uses_rope_freqs") == !swa[l]);
    }
    CHECK(o.at("sliding_window") == 4);
    CHECK(o.at("final_logit_softcap").to_number<double>() == 30.0);
}

TEST_CASE("inspect: qwen3 head_dim x heads differs from n_embd, and llama3 is tied with rope_freqs") {
    const auto q = inspect("synth-qwen3-q8_0");
    CHECK(q.at("family") == "qwen3");
    CHECK(q.at("layers").at(0).at("head_dim") == 32);
    CHECK(q.at("layers").at(0).at("n_head") == 4);
    CHECK(q.at("n_embd") == 64);
    CHECK(q.at("tokenizer").at("pre") == "qwen2");
    CHECK(q.at("tokenizer").at("add_bos") == false);
    const auto l3 = inspect("synth-llama3-q8_0");
    CHECK(l3.at("tied_output") == true);
    CHECK(l3.at("lm_head") == "token_embd.weight");
    CHECK(l3.at("rope").at("has_rope_freqs") == true);
    CHECK(l3.at("tokenizer").at("pre") == "llama-bpe");
    CHECK(l3.at("tokenizer").at("bos_id") == 128000);
}

TEST_CASE("inspect: a mismatched --arch is an error naming both") {
    const auto path = fixture_path("models/stories260K.gguf");
    const auto r = run_command(std::string(EMBER_BINARY) + " inspect --arch qwen3 " + shell_quote(path.string()), true);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("qwen3") != std::string::npos);
    CHECK(r.output.find("'llama'") != std::string::npos);
}
