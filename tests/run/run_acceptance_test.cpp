// Rungs: activation-reference and interventions, through the real CLI. A plugin written
// outside the project (tests/experiments/outside/counter.cpp, built with exactly
// `g++ -std=c++20 -shared -fPIC -I<sdk include> counter.cpp`) runs with `ember run` on one
// fixture model per family, on golden prompt 0 of each:
// - it sees one on_model_loaded, one before_prefill, one prefill and N-1 decode
//   evaluations each calling every tensor stage once per layer in increasing order, one
//   on_generation_complete;
// - before_layer(l+1) == after_layer(l), and for Llama and Qwen3 the residual identity
//   after_layer = (before_layer + after_attention) + after_mlp, bit for bit;
// - the after_layer and before_logits values it sees equal llama.cpp's l_out-N and
//   result_norm within the reference tolerances;
// - a write at prefill position 0 changes the decode logits.
// And: a plugin failing in after_attention at decode layer 1 stops the run with the exact
// message, exit 1 and no completion; zeroing after_layer at the last layer makes every
// logit 0 and every greedy token id 0.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ember_run.hpp"
#include "support/golden.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

struct Family {
    const char* model;
    const char* family;
    std::size_t n_layers;
};
constexpr Family kFamilies[] = {
    {"stories260K", "llama", 5},
    {"synth-qwen3-q8_0", "qwen3", 3},
    {"synth-gemma4-e-q8_0", "gemma4", 4},
};
constexpr int kTokens = 4;  // one prefill and 3 decode evaluations

std::vector<float> read_f32(const fs::path& path) {
    const std::string bytes = read_text(path);
    REQUIRE(bytes.size() % sizeof(float) == 0);
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
}

// One run of golden prompt 0 on `f`'s model with the given experiments.
EmberRun run_prompt0(const TempDir& dir, const Family& f, const std::string& experiments) {
    const GoldenPrompt prompt = load_golden(f32_golden_path(f.model)).prompts.at(0);
    const auto run = ember_run(dir, run_config(fixture_path(std::string("models/") + f.model + ".gguf"), prompt.text,
                                               kTokens, experiments));
    REQUIRE_MESSAGE(run.has_report, run.err);
    REQUIRE(str(run.report.at("model").at("family")) == f.family);
    REQUIRE(run.report.at("model").at("n_layers").to_number<std::size_t>() == f.n_layers);
    std::vector<std::int64_t> golden_tokens(prompt.tokens.begin(), prompt.tokens.end());
    REQUIRE(int_list(run.report.at("prompt").at("tokens")) == golden_tokens);
    return run;
}

// Golden prompt 0 on every family's model, with the experiments `entries(family,
// counter)` writes (counter: the outside plugin, built once), each run handed to `check`.
template <class Entries, class Check>
void in_every_family(Entries entries, Check check) {
    TempDir build;
    const auto counter = build_outside_counter(build);
    for (const Family& f : kFamilies) {
        CAPTURE(f.model);
        TempDir dir;
        check(f, run_prompt0(dir, f, entries(f, counter)));
    }
}

}  // namespace

TEST_CASE("an outside plugin sees the stage counts, the order and the residual identities in every family") {
    const auto entries = [](const Family&, const fs::path& counter) { return experiment(counter); };
    in_every_family(entries, [](const Family& f, const EmberRun& run) {
        REQUIRE_MESSAGE(run.exit_code == 0, run.err);
        CHECK(run.report.at("generated").at("tokens").as_array().size() == kTokens);

        const std::size_t per_stage = kTokens * f.n_layers;
        const auto counts = run.err_lines("[counter] info: counts ");
        REQUIRE(counts.size() == 1);
        CHECK(counts[0] == fmt::format("[counter] info: counts 1 1 {0} {0} {0} {0} {1} {1} 1 0", per_stage, kTokens));

        const auto checks = run.err_lines("[counter] info: checks ");
        REQUIRE(checks.size() == 1);
        const std::string expected =
            fmt::format("[counter] info: checks prefill=1 decode={} order=0 chain=0 residual=", kTokens - 1);
        REQUIRE(checks[0].rfind(expected, 0) == 0);
        const long residual_mismatches = std::stol(checks[0].substr(expected.size()));
        if (std::string(f.family) == "gemma4") {
            CHECK(residual_mismatches > 0);  // post-norms and layer_output_scale: no identity, and the check sees it
        } else {
            CHECK(residual_mismatches == 0);
        }
    });
}

TEST_CASE("what an outside plugin sees at after_layer and before_logits equals llama.cpp's l_out-N and result_norm") {
    const auto entries = [](const Family&, const fs::path& counter) { return experiment(counter, "dump = \"seen\""); };
    in_every_family(entries, [](const Family& f, const EmberRun& run) {
        REQUIRE_MESSAGE(run.exit_code == 0, run.err);
        const GoldenPrompt prompt = load_golden(f32_golden_path(f.model)).prompts.at(0);
        const double tol = f32_golden_tolerance(f.family);
        const fs::path seen = run.output_dir / "seen";
        for (std::size_t l = 0; l < f.n_layers; ++l) {
            const GoldenTensor& golden = prompt.hidden.at(fmt::format("l_out-{}", l));
            const auto ours = read_f32(seen / fmt::format("after_layer.layer{}.prefill.f32", l));
            const double error = relative_error(ours, golden.values);
            CHECK_MESSAGE(error <= tol, "layer " << l << ": relative error " << error);
        }
        // before_logits holds the prompt's last row; result_norm has every row.
        const GoldenTensor& normed = prompt.hidden.at("result_norm");
        const std::vector<float> last(normed.values.end() - static_cast<std::ptrdiff_t>(normed.cols), normed.values.end());
        const double error = relative_error(read_f32(seen / "before_logits.prefill.f32"), last);
        CHECK_MESSAGE(error <= tol, "result_norm: relative error " << error);
    });
}

TEST_CASE("a write at prefill position 0 changes the decode logits") {
    TempDir build;
    const auto counter = build_outside_counter(build);
    for (const Family& f : kFamilies) {
        CAPTURE(f.model);
        TempDir clean_dir, written_dir;
        const auto clean = run_prompt0(clean_dir, f, experiment(counter, "dump = \"seen\""));
        const auto written = run_prompt0(written_dir, f, experiment(counter, "dump = \"seen\"\nadd_at_position_0 = 0.5"));
        REQUIRE(clean.exit_code == 0);
        REQUIRE(written.exit_code == 0);
        for (int step = 1; step < kTokens; ++step) {
            CAPTURE(step);
            const auto file = fmt::format("after_logits.step{}.f32", step);
            const auto a = read_f32(clean.output_dir / "seen" / file);
            const auto b = read_f32(written.output_dir / "seen" / file);
            REQUIRE(a.size() == b.size());
            CHECK(a != b);
        }
    }
}

TEST_CASE("a plugin failing in after_attention at decode layer 1 stops the run with the exact message") {
    const auto entries = [](const Family&, const fs::path& counter) {
        return experiment(test_plugin("failing"), "stage = \"after_attention\"\nphase = \"decode\"\nlayer = 1") +
               experiment(counter);
    };
    in_every_family(entries, [](const Family& f, const EmberRun& run) {
        const std::string message =
            "experiment 'failing' failed in after_attention (phase=decode, layer=1): planned failure";
        CHECK(run.exit_code == 1);
        CHECK(run.err_lines("error: ") == std::vector<std::string>{"error: " + message});
        // on_error was told, completion was not.
        CHECK(run.err_lines("[failing] info: failing on_error ").size() == 1);
        CHECK(run.err_lines("[failing] info: failing on_generation_complete").empty());
        CHECK(run.err_lines("[counter] info: counts").empty());

        CHECK(str(run.report.at("outcome")) == "failed");
        CHECK(str(run.report.at("error")) == message);
        CHECK(run.report.at("generated").at("tokens").as_array().size() == 1);  // chosen from the prefill
        const auto& failing = run.experiments().at(0);
        const auto& counter_record = run.experiments().at(1);
        CHECK(str(failing.at("outcome")) == "failed");
        CHECK(str(counter_record.at("outcome")) == "ok");
        CHECK(stage_calls(counter_record, "on_error") == 1);
        CHECK(stage_calls(counter_record, "on_generation_complete") == 0);
        // The prefill's layers, then decode layer 0; layer 1's stages never ran after the failure.
        CHECK(stage_calls(counter_record, "after_attention") == static_cast<std::int64_t>(f.n_layers + 1));
        CHECK(stage_calls(counter_record, "after_mlp") == static_cast<std::int64_t>(f.n_layers + 1));
    });
}

TEST_CASE("zeroing after_layer at the last layer makes every logit 0 and every greedy token id 0") {
    const auto entries = [](const Family& f, const fs::path& counter) {
        return experiment(builtin_plugin("ablate"), fmt::format("stage = \"after_layer\"\nlayers = [{}]", f.n_layers - 1)) +
               experiment(counter, "dump = \"seen\"");
    };
    in_every_family(entries, [](const Family&, const EmberRun& run) {
        REQUIRE_MESSAGE(run.exit_code == 0, run.err);
        CHECK(int_list(run.report.at("generated").at("tokens")) == std::vector<std::int64_t>(kTokens, 0));
        for (int step = 0; step < kTokens; ++step) {
            const auto logits = read_f32(run.output_dir / "seen" / fmt::format("after_logits.step{}.f32", step));
            CHECK(std::count(logits.begin(), logits.end(), 0.0f) == static_cast<std::ptrdiff_t>(logits.size()));
        }
    });
}

}  // namespace ember::test
