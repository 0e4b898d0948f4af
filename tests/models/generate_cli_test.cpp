// Rungs: smoke (the command runs, its errors and exit codes) and golden logits (the
// greedy continuation of stories260K and the JSON steps against llama.cpp's golden).
// Every run pins --route reference except the fast-route story.
#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "support/fixtures.hpp"
#include "support/golden.hpp"

namespace ember::test {
namespace {

namespace json = boost::json;

const char* kPrompt = "Once upon a time, there was a little girl";

CommandResult generate(const std::string& model, const std::string& options, bool merge_stderr = false) {
    const std::string command = std::string(EMBER_BINARY) + " generate --route reference --model " +
                                shell_quote(fixture_path("models/" + model + ".gguf").string()) + " " + options;
    return run_command(command, merge_stderr);
}

json::object generate_json(const std::string& model, const std::string& options) {
    const CommandResult r = generate(model, options + " --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return json::parse(r.output).as_object();
}

std::vector<std::int32_t> ids(const json::value& v) { return json::value_to<std::vector<std::int32_t>>(v); }

}  // namespace

TEST_CASE("ember generate: stories260K continues the story greedily, streamed as text") {
    const CommandResult r = generate("stories260K", "--prompt " + shell_quote(kPrompt) + " --max-tokens 24 --threads 2");
    REQUIRE(r.exit_code == 0);
    CHECK(r.output == " named Lily. She loved to play outside in the park. One day, she saw\n");
}

TEST_CASE("ember generate --json: prompt tokens, tokens, text and steps match llama.cpp's greedy run") {
    const Golden golden = load_golden(f32_golden_path("stories260K"));
    const GoldenPrompt& p = golden.prompts.at(0);
    const json::object o = generate_json("stories260K", "--prompt " + shell_quote(kPrompt) + " --max-tokens 24 --threads 2");
    CHECK(o.at("cpu_variant").as_string() == "scalar-reference");
    CHECK(ids(o.at("prompt_tokens")) == p.tokens);
    const auto tokens = ids(o.at("tokens"));
    REQUIRE(tokens.size() == 24);
    std::string text;
    const json::array& steps = o.at("steps").as_array();
    REQUIRE(steps.size() == 24);
    for (std::size_t i = 0; i < 24; ++i) {
        const GoldenStep& g = p.greedy[i];
        CHECK(tokens[i] == g.token);
        CHECK(steps[i].at("token").to_number<std::int32_t>() == g.token);
        // tol = 1e-5 of the largest |logit| (about 20 here), so at most 2e-4 absolute.
        CHECK(std::abs(steps[i].at("logit").to_number<double>() - g.logit) < 2e-4);
        CHECK(std::abs(steps[i].at("margin").to_number<double>() - g.margin) < 2e-4);
        CHECK(hex_to_bytes(std::string(steps[i].at("piece_hex").as_string())) == g.piece);
        text += g.piece;
    }
    CHECK(o.at("text").as_string() == text);
    CHECK(o.at("stop_reason").as_string() == "max_tokens");
    CHECK(o.at("route").as_string() == "reference");
    for (const char* key : {"load_ms", "prefill_ms", "decode_ms", "total_ms", "prefill_tok_s", "decode_tok_s"}) {
        CHECK_MESSAGE(o.at("timings").as_object().contains(key), key);
    }
}

TEST_CASE("ember generate: the same seed gives the same tokens, with 1 or 2 threads") {
    const std::string options = "--prompt " + shell_quote(kPrompt) + " --max-tokens 16 --temperature 1.0 --seed 11";
    const auto a = ids(generate_json("stories260K", options + " --threads 1").at("tokens"));
    const auto b = ids(generate_json("stories260K", options + " --threads 2").at("tokens"));
    const auto c = ids(generate_json("stories260K", options + " --threads 2").at("tokens"));
    CHECK(a.size() == 16);
    CHECK(a == b);
    CHECK(b == c);
    const auto other = ids(generate_json("stories260K", "--prompt " + shell_quote(kPrompt) +
                                                             " --max-tokens 16 --temperature 1.0 --seed 12").at("tokens"));
    CHECK(other != a);
}

TEST_CASE("ember generate --route fast: the same story on every CPU variant, and the variant named") {
    if (test::fast_route_missing()) return;
    for (const char* variant : {"scalar", "avx2", "avxvnni", "avx512"}) {
        CAPTURE(variant);
        const auto on_variant = [&](const std::string& options) {
            return run_command(std::string("EMBER_CPU=") + variant + " " + EMBER_BINARY + " generate --threads 2 " + options +
                                   " --model " + shell_quote(fixture_path("models/stories260K-q8_0.gguf").string()) +
                                   " --prompt " + shell_quote(kPrompt),
                               false);
        };
        const CommandResult r = on_variant("--route fast --max-tokens 24");
        if (r.exit_code != 0) {  // a variant this CPU lacks is refused by name
            CHECK(r.exit_code == 1);
            continue;
        }
        CHECK(r.output == " named Lily. She loved to play outside in the park. One day, she saw\n");
        const CommandResult j = on_variant("--json --max-tokens 2");
        REQUIRE(j.exit_code == 0);
        const json::object o = json::parse(j.output).as_object();
        CHECK(o.at("route").as_string() == "fast");  // the default
        CHECK(std::string(o.at("cpu_variant").as_string()).rfind(variant, 0) == 0);
        CHECK(o.at("kv_type").as_string() == "f32");
    }
}

TEST_CASE("ember generate --kv-type f16: an F16 cache on both routes, named in the JSON") {
    for (const char* route : test::built_routes()) {
        CAPTURE(route);
        const CommandResult r = run_command(std::string(EMBER_BINARY) + " generate --json --kv-type f16 --route " + route +
                                                " --threads 2 --max-tokens 24 --model " +
                                                shell_quote(fixture_path("models/stories260K.gguf").string()) +
                                                " --prompt " + shell_quote(kPrompt),
                                            false);
        REQUIRE(r.exit_code == 0);
        const json::object o = json::parse(r.output).as_object();
        CHECK(o.at("kv_type").as_string() == "f16");
        CHECK(o.at("text").as_string() == " named Lily. She loved to play outside in the park. One day, she saw");
    }
    CHECK(generate("stories260K", "--prompt x --kv-type q8_0", true).exit_code == 2);
}

TEST_CASE("ember generate: clear errors and exit codes") {
    const std::string prompt = "--prompt " + shell_quote(kPrompt);
    SUBCASE("an unknown route is a usage error") {
        const CommandResult r = generate("stories260K", prompt + " --route gpu", true);
        CHECK(r.exit_code == 2);
    }
    SUBCASE("a mismatched --arch") {
        const CommandResult r = generate("stories260K", prompt + " --arch gemma4", true);
        CHECK(r.exit_code == 1);
        CHECK(r.output.find("--arch gemma4 was requested but the file's architecture is 'llama'") != std::string::npos);
    }
    SUBCASE("a prompt longer than the context") {
        const CommandResult r = generate("stories260K", prompt + " --ctx 4", true);
        CHECK(r.exit_code == 1);
        CHECK(r.output.find("the prompt has 13 tokens but the context holds only 4 (--ctx)") != std::string::npos);
    }
    SUBCASE("generation that would run past the context") {
        const CommandResult r = generate("stories260K", prompt + " --ctx 20 --max-tokens 10", true);
        CHECK(r.exit_code == 1);
        CHECK(r.output.find("need 22 positions, more than the context of 20 (--ctx)") != std::string::npos);
    }
    SUBCASE("sampling options out of range") {
        CHECK(generate("stories260K", prompt + " --temperature -1", true).exit_code == 2);
        CHECK(generate("stories260K", prompt + " --top-p 0", true).exit_code == 2);
        CHECK(generate("stories260K", prompt + " --threads -1", true).exit_code == 2);  // 0: every hardware thread
        CHECK(generate("stories260K", prompt + " --max-tokens -3", true).exit_code == 2);
    }
    SUBCASE("a missing model file") {
        const CommandResult r = run_command(std::string(EMBER_BINARY) + " generate --model /nonexistent.gguf " + prompt, true);
        CHECK(r.exit_code == 1);
        CHECK(r.output.find("/nonexistent.gguf") != std::string::npos);
    }
}

}  // namespace ember::test
