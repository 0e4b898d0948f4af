// Rung: interventions, end to end with `ember run` + capture + patch, on one fixture
// model per family:
// - patching a run with its own captures (after_layer, every layer, every position, both
//   phases) reproduces its logits bit for bit;
// - patching prompt A's run with prompt B's captures at every layer (two prompts of the
//   same token length) reproduces B's logits at the patched positions, bit for bit, and
//   B's greedy tokens;
// - patch refuses, by name, a source captured from a prompt of another length or on
//   another route.
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include "ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModels[] = {"stories260K", "synth-qwen3-q8_0", "synth-gemma4-e-q8_0"};
constexpr const char* kPromptA = "Once upon a time, there was a little girl";
constexpr const char* kPromptB = "Once upon a time, there was a little boy";
constexpr int kTokens = 4;

// A run of `prompt` capturing every layer's after_layer and the logits (in out/capture).
EmberRun capture_run(const TempDir& dir, const std::string& model, const std::string& prompt) {
    const auto run = ember_run(dir, run_config(fixture_path("models/" + model + ".gguf"), prompt, kTokens,
                                               experiment(builtin_plugin("capture"),
                                                          "stages = [\"after_layer\", \"after_logits\"]")));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    return run;
}

// A run of `prompt` whose after_layer is patched at every layer from `source`, with its
// logits captured after the patch (in out/capture).
EmberRun patched_run(const TempDir& dir, const std::string& model, const std::string& prompt, const fs::path& source,
                     const std::string& route = "reference") {
    return ember_run(dir, run_config(fixture_path("models/" + model + ".gguf"), prompt, kTokens,
                                     experiment(builtin_plugin("patch"),
                                                fmt::format("source = {}\nstages = [\"after_layer\"]",
                                                            toml_literal(source.string()))) +
                                         experiment(builtin_plugin("capture"), "stages = [\"after_logits\"]"),
                                     route));
}

void check_same_logits(const EmberRun& a, const EmberRun& b) {
    for (const char* phase : {"prefill", "decode"}) {
        CAPTURE(phase);
        const auto file = fmt::format("capture/after_logits.{}.npy", phase);
        const auto x = ember::npy::read(a.output_dir / file);
        const auto y = ember::npy::read(b.output_dir / file);
        CHECK(x.shape == y.shape);
        CHECK(x.values == y.values);  // bit for bit (no NaN here)
    }
    CHECK(a.report.at("generated").at("tokens") == b.report.at("generated").at("tokens"));
}

}  // namespace

TEST_CASE("patch with a clean run's own captures reproduces its logits bit for bit") {
    for (const char* model : kModels) {
        CAPTURE(model);
        TempDir clean_dir, patched_dir;
        const auto clean = capture_run(clean_dir, model, kPromptA);
        const auto patched = patched_run(patched_dir, model, kPromptA, clean.output_dir / "capture");
        REQUIRE_MESSAGE(patched.exit_code == 0, patched.err);
        check_same_logits(patched, clean);
    }
}

TEST_CASE("patch with another prompt's captures at every layer reproduces that prompt's logits") {
    for (const char* model : kModels) {
        CAPTURE(model);
        TempDir a_dir, b_dir, patched_dir;
        const auto a = capture_run(a_dir, model, kPromptA);
        const auto b = capture_run(b_dir, model, kPromptB);
        REQUIRE(a.report.at("prompt").at("tokens").as_array().size() == b.report.at("prompt").at("tokens").as_array().size());
        REQUIRE(a.report.at("prompt").at("tokens") != b.report.at("prompt").at("tokens"));
        const auto a_logits = ember::npy::read(a.output_dir / "capture/after_logits.prefill.npy");
        const auto b_logits = ember::npy::read(b.output_dir / "capture/after_logits.prefill.npy");
        REQUIRE(a_logits.values != b_logits.values);  // the prompts lead to different logits

        const auto patched = patched_run(patched_dir, model, kPromptA, b.output_dir / "capture");
        REQUIRE_MESSAGE(patched.exit_code == 0, patched.err);
        check_same_logits(patched, b);
    }
}

TEST_CASE("patch refuses, by name, a source from a prompt of another length or from another route") {
    const struct {
        const char* source_prompt;
        const char* route;
        const char* says;
    } cases[] = {
        {"Once upon a time", "reference", "-token prompt, this run's has "},
        {kPromptA, "fast", "captured on route 'reference', this run uses 'fast'"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.says);
        TempDir source_dir, patched_dir;
        const auto source = capture_run(source_dir, "synth-qwen3-q8_0", c.source_prompt);
        const auto patched = patched_run(patched_dir, "synth-qwen3-q8_0", kPromptA, source.output_dir / "capture", c.route);
        CHECK(patched.exit_code == 1);
        const auto errors = patched.err_lines("error: experiment 'patch' failed in create: ");
        REQUIRE(errors.size() == 1);
        CHECK(errors[0].find((source.output_dir / "capture").string()) != std::string::npos);
        CHECK(errors[0].find(c.says) != std::string::npos);
    }
}

}  // namespace ember::test
