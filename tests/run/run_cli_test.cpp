// Rungs: smoke and golden logits, through the real CLI. `ember run` with no experiment
// prints exactly what `ember generate` prints for the same options and takes the
// DisabledHooks path; run.json records the config (canonical) and its hash, the model's
// sha256, the route, the prompt's token ids (llama.cpp's), the generated tokens and
// text, timings and the outcome; paths are relative to the config file; --model
// overrides the config's model; usage and config errors have their exit codes.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <regex>

#include "ember_run.hpp"
#include "support/fixtures.hpp"
#include "support/golden.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrompt = "Once upon a time, there was a little girl";

std::string sha256_from_sums(const std::string& model_file) {
    std::istringstream sums(read_text(fixture_path("models/SHA256SUMS")));
    for (std::string line; std::getline(sums, line);)
        if (line.ends_with("  models/" + model_file)) return line.substr(0, 64);
    FAIL("no SHA256SUMS line for " << model_file);
    return {};
}

}  // namespace

TEST_CASE("with no experiment, ember run prints what ember generate prints and records the run in run.json") {
    TempDir dir;
    const fs::path model = fixture_path("models/stories260K.gguf").lexically_normal();
    const auto run = ember_run(dir, run_config(model, kPrompt, 16));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    const auto generated = run_command(fmt::format("{} generate --model {} --prompt {} --max-tokens 16 --threads 1",
                                                   shell_quote(EMBER_BINARY), shell_quote(model.string()),
                                                   shell_quote(kPrompt)));
    REQUIRE(generated.exit_code == 0);
    CHECK(run.out == generated.output);

    const auto& r = run.report;
    CHECK(r.at("schema_version") == 1);
    CHECK(str(r.at("kind")) == "ember.run");
    CHECK(str(r.at("outcome")) == "ok");
    CHECK(r.at("error").is_null());
    CHECK(str(r.at("hooks")) == "disabled");
    CHECK(std::regex_match(std::string(r.at("run_id").as_string()), std::regex(R"(\d{8}T\d{6}Z-[0-9a-f]{8})")));
    CHECK(std::regex_match(std::string(r.at("config_hash").as_string()), std::regex("[0-9a-f]{64}")));
    CHECK(str(r.at("config_file")) == (dir.path() / "run.toml").string());
    CHECK(r.at("config").at("generation").at("max_tokens") == 16);
    CHECK(str(r.at("config").at("output").at("dir")) == (dir.path() / "out").string());
    CHECK(str(r.at("model").at("path")) == model.string());
    CHECK(str(r.at("model").at("sha256")) == sha256_from_sums("stories260K.gguf"));
    CHECK(str(r.at("model").at("family")) == "llama");
    CHECK(str(r.at("route")) == "reference");
    CHECK(str(r.at("cpu_variant")) == "scalar-reference");
    CHECK(str(r.at("kv_type")) == "f32");
    CHECK(r.at("threads") == 1);

    const GoldenPrompt golden = load_golden(f32_golden_path("stories260K")).prompts.at(0);
    REQUIRE(golden.text == kPrompt);
    CHECK(int_list(r.at("prompt").at("tokens")) == std::vector<std::int64_t>(golden.tokens.begin(), golden.tokens.end()));
    // The golden greedy continuation, as far as its margins are clear (all of the first 16 here).
    std::vector<std::int64_t> greedy;
    for (std::size_t i = 0; i < 16; ++i) greedy.push_back(golden.greedy.at(i).token);
    CHECK(int_list(r.at("generated").at("tokens")) == greedy);
    CHECK(str(r.at("generated").at("text")) + "\n" == run.out);
    CHECK(str(r.at("generated").at("stop_reason")) == "max_tokens");
    CHECK(r.at("generated").at("steps").as_array().size() == 16);
    CHECK(r.at("timings").at("decode_evaluations") == 15);
    CHECK(r.at("experiments").at("experiments").as_array().empty());
    CHECK(r.at("experiments").at("failures").as_array().empty());
    CHECK(run.err_lines("ember: run " + std::string(r.at("run_id").as_string()) + " written to ").size() == 1);
}

TEST_CASE("configs that mean the same run hash the same, a change of meaning changes the hash") {
    TempDir dir;
    const fs::path model = fixture_path("models/stories260K.gguf");
    const auto hash_of = [&](const std::string& toml) {
        const auto run = ember_run(dir, toml, "--overwrite");
        REQUIRE_MESSAGE(run.exit_code == 0, run.err);
        return std::string(run.report.at("config_hash").as_string());
    };
    const std::string plain = hash_of(run_config(model, kPrompt, 2));
    const std::string spelled_out = hash_of(fmt::format(
        "[output]\ndir = './out/'\n[generation]\ntemperature = 0\nmax_tokens = 2\nseed = 42\n[prompt]\ntext = {}\n"
        "add_bos = \"auto\"\n[model]\nthreads = 1\nroute = \"reference\"\npath = {}\n",
        toml_literal(kPrompt), toml_literal(model.string())));
    CHECK(spelled_out == plain);
    CHECK(hash_of(run_config(model, kPrompt, 3)) != plain);
}

TEST_CASE("paths in a config are relative to the config file, not to the current directory") {
    TempDir dir;
    fs::create_directories(dir.path() / "configs" / "sub");
    const fs::path config = dir.path() / "configs" / "sub" / "relative.toml";
    const fs::path model = fixture_path("models/stories260K.gguf").lexically_normal();
    write_text(dir.path() / "configs" / "prompt.txt", kPrompt);
    write_text(config, fmt::format("[model]\npath = {}\nthreads = 1\n[prompt]\nfile = '../prompt.txt'\n"
                                   "[generation]\nmax_tokens = 2\n[output]\ndir = '../runs/rel'\n",
                                   toml_literal(fs::relative(model, config.parent_path()).string())));
    const auto run = run_command(fmt::format("cd / && {} run {} 2>&1", shell_quote(EMBER_BINARY), shell_quote(config.string())));
    REQUIRE_MESSAGE(run.exit_code == 0, run.output);
    const auto report = boost::json::parse(read_text(dir.path() / "configs" / "runs" / "rel" / "run.json")).as_object();
    // The same file (../shared may be reached through a symbolic link).
    CHECK(fs::canonical(str(report.at("model").at("path"))) == fs::canonical(model));
    CHECK(str(report.at("prompt").at("text")) == kPrompt);
}

TEST_CASE("--model runs another model than the config's, and run.json says which") {
    TempDir dir;
    const fs::path model = fixture_path("models/synth-qwen3-q8_0.gguf").lexically_normal();
    const auto run = ember_run(dir, run_config(dir.path() / "no-such-model.gguf", kPrompt, 2),
                               "--model " + shell_quote(model.string()));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(str(run.report.at("model").at("path")) == model.string());
    CHECK(str(run.report.at("model").at("family")) == "qwen3");
    CHECK(str(run.report.at("config").at("model").at("path")) == model.string());

    TempDir without;
    const auto missing = ember_run(without, run_config(without.path() / "no-such-model.gguf", kPrompt, 2));
    CHECK(missing.exit_code == 1);
    CHECK(missing.err.find("no-such-model.gguf") != std::string::npos);
}

TEST_CASE("usage errors exit 2, config errors exit 1 naming file:line:column") {
    TempDir dir;
    const auto ember = shell_quote(EMBER_BINARY);
    CHECK(run_command(ember + " run 2>/dev/null").exit_code == 2);
    CHECK(run_command(ember + " run a.toml b.toml 2>/dev/null").exit_code == 2);
    CHECK(run_command(ember + " run --no-such-option a.toml 2>/dev/null").exit_code == 2);
    CHECK(run_command(ember + " run --experiment 2>/dev/null").exit_code == 2);

    const auto typo = ember_run(dir, run_config(fixture_path("models/stories260K.gguf"), kPrompt, 2) + "[hooks]\ntimeout = 5\n");
    CHECK(typo.exit_code == 1);
    CHECK(typo.err.find("error: run.toml:17:1: unknown key 'timeout' in [hooks]") != std::string::npos);
    CHECK_FALSE(typo.has_report);

    const auto missing = run_command(ember + " run " + shell_quote((dir.path() / "absent.toml").string()) + " 2>&1");
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("absent.toml: cannot open") != std::string::npos);
}

TEST_CASE("route = \"fast\" runs the fast route and generates what ember generate --route fast does") {
    if (test::fast_route_missing()) return;
    TempDir dir;
    const fs::path model = fixture_path("models/synth-qwen3-q8_0.gguf");
    const auto run = ember_run(dir, run_config(model, kPrompt, 8, "", "fast"));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(str(run.report.at("route")) == "fast");
    CHECK(!str(run.report.at("cpu_variant")).empty());
    const auto generated = run_command(fmt::format("{} generate --route fast --model {} --prompt {} --max-tokens 8 "
                                                   "--threads 1",
                                                   shell_quote(EMBER_BINARY), shell_quote(model.string()),
                                                   shell_quote(kPrompt)));
    REQUIRE(generated.exit_code == 0);
    CHECK(run.out == generated.output);
}

}  // namespace ember::test
