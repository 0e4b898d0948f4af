// Rungs: activation-reference and interventions, on the reference path of one fixture
// model per family. The ExperimentRunner is handed to the real generation loop
// (runtime::generate) the way `ember run` will hand it, with the built-in plugins:
// call counts per evaluation, capture arrays equal to llama.cpp's golden hidden states,
// ablate's and steer's exact effects, patch reproducing a run bit for bit, a strict
// failure stopping the loop with the exact message, and a zeroed last layer making
// every logit 0 and every greedy token id 0.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/sha256_file.hpp"
#include <ember/npy.hpp>
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "support/fixtures.hpp"
#include "support/golden.hpp"
#include "synthetic_run.hpp"

using namespace ember;
using namespace ember::test;
using experiments::ExperimentFailure;
using experiments::ExperimentRunner;
using experiments::StageId;
namespace fs = std::filesystem;

namespace {

constexpr const char* kModels[] = {"stories260K", "synth-qwen3-q8_0", "synth-gemma4-e-q8_0"};
constexpr std::size_t kTokens = 4;  // one prefill + 3 decode evaluations

// One fixture model loaded with golden prompt 0, ready to run with experiments.
struct Fixture {
    std::string name;
    gguf::File file;
    std::unique_ptr<models::Model> model;
    GoldenPrompt prompt;
    experiments::RunInfo info;

    Fixture(const std::string& model_name, const fs::path& output_dir)
        : name(model_name), file(gguf::File::open(fixture_path("models/" + model_name + ".gguf"))) {
        model = models::load_model(file);
        prompt = load_golden(f32_golden_path(model_name)).prompts.at(0);
        info.run_id = "real-model-test";
        info.output_dir = output_dir.string();
        info.model_path = fixture_path("models/" + model_name + ".gguf").string();
        info.model_sha256 = sha256_file_hex(info.model_path);
        info.route = "reference";
        info.config_hash = std::string(64, '0');
        for (auto t : prompt.tokens) info.prompt_token_ids.push_back(static_cast<std::uint32_t>(t));
    }
    const models::ModelConfig& config() const { return model->config(); }
};

struct Outcome {
    runtime::GenerationResult result;
    std::string failure;
    std::vector<experiments::ExperimentRecord> records;
};

// What `ember run` does around the loop: on_model_loaded, before_prefill, generate,
// on_generation_complete; notify_error on any failure.
Outcome run(const Fixture& f, const std::vector<experiments::ExperimentSpec>& specs) {
    Outcome out;
    experiments::RunnerOptions options;
    options.log = [](experiments::LogLevel, std::string_view, std::string_view) {};
    ExperimentRunner runner(specs, f.info, options);
    runtime::Session session(*f.model, {.route = runtime::Route::Reference, .threads = 1, .max_batch = f.prompt.tokens.size()});
    try {
        runner.on_model_loaded(f.config());
        hooks::EvalInfo prefill;
        prefill.n_tokens = f.prompt.tokens.size();
        runner.before_prefill(prefill);
        runtime::GenerationOptions greedy;
        greedy.max_tokens = kTokens;
        out.result = runtime::generate(session, f.prompt.tokens, greedy, {}, {}, &runner);
        runner.on_generation_complete(out.result.tokens.size(), experiments::StopReason::MaxTokens);
    } catch (const ExperimentFailure& e) {
        runner.notify_error(e.what());
        out.failure = e.what();
    }
    out.records = runner.records();
    return out;
}

ember::npy::Array captured(const fs::path& dir, const std::string& file) {
    return ember::npy::read(dir / "capture" / file);
}

}  // namespace

TEST_CASE("through the real generation loop every stage is called once per layer per evaluation") {
    for (const char* name : kModels) {
        CAPTURE(name);
        TempDir out;
        const Fixture f(name, out.path());
        const auto o = run(f, {spec(test_plugin("recorder"))});
        REQUIRE(o.failure.empty());
        REQUIRE(o.result.tokens.size() == kTokens);
        const auto& t = o.records[0].timings;
        const auto calls = [&](StageId s) { return t[static_cast<std::size_t>(s)].calls; };
        CHECK(calls(StageId::OnModelLoaded) == 1);
        CHECK(calls(StageId::BeforePrefill) == 1);
        for (auto s : {StageId::BeforeLayer, StageId::AfterAttention, StageId::AfterMlp, StageId::AfterLayer})
            CHECK(calls(s) == kTokens * f.config().n_layers);
        CHECK(calls(StageId::BeforeLogits) == kTokens);
        CHECK(calls(StageId::AfterLogits) == kTokens);
        CHECK(calls(StageId::OnGenerationComplete) == 1);
    }
}

TEST_CASE("capture's arrays equal llama.cpp's golden hidden states (l_out-N, result_norm)") {
    for (const char* name : kModels) {
        CAPTURE(name);
        TempDir out;
        const Fixture f(name, out.path());
        const auto o = run(f, {spec(builtin_plugin("capture"),
                                    R"({"stages": ["after_layer", "before_logits"], "positions": "all"})")});
        REQUIRE(o.failure.empty());
        const double tol = f32_golden_tolerance(models::family_name(f.config().family));
        for (std::uint32_t l = 0; l < f.config().n_layers; ++l) {
            const auto array = captured(out.path(), fmt::format("after_layer.layer{}.prefill.npy", l));
            const GoldenTensor& golden = f.prompt.hidden.at(fmt::format("l_out-{}", l));
            REQUIRE(array.shape == std::vector<std::size_t>{golden.rows, golden.cols});
            CHECK_MESSAGE(relative_error(array.values, golden.values) <= tol, "layer " << l);
        }
        // before_logits holds the last prompt row; the golden result_norm every row.
        const auto normed = captured(out.path(), "before_logits.prefill.npy");
        const GoldenTensor& golden = f.prompt.hidden.at("result_norm");
        REQUIRE(normed.shape == std::vector<std::size_t>{1, golden.cols});
        const std::vector<float> last(golden.values.end() - static_cast<std::ptrdiff_t>(golden.cols), golden.values.end());
        CHECK(relative_error(normed.values, last) <= tol);
    }
}

TEST_CASE("ablate zeroing after_mlp at a layer leaves that layer's output = input + attention") {
    for (const char* name : {"stories260K", "synth-qwen3-q8_0"}) {  // Gemma 4 scales the residual
        CAPTURE(name);
        TempDir out;
        const Fixture f(name, out.path());
        const auto o = run(f, {spec(builtin_plugin("ablate"), R"({"stage": "after_mlp", "layers": [1]})"),
                               spec(builtin_plugin("capture"),
                                    R"({"stages": ["before_layer", "after_attention", "after_mlp", "after_layer"], "layers": [1]})")});
        REQUIRE(o.failure.empty());
        for (const char* phase : {"prefill", "decode"}) {
            const auto before = captured(out.path(), fmt::format("before_layer.layer1.{}.npy", phase));
            const auto attention = captured(out.path(), fmt::format("after_attention.layer1.{}.npy", phase));
            const auto mlp = captured(out.path(), fmt::format("after_mlp.layer1.{}.npy", phase));
            const auto after = captured(out.path(), fmt::format("after_layer.layer1.{}.npy", phase));
            CHECK(std::count(mlp.values.begin(), mlp.values.end(), 0.0f) == static_cast<std::ptrdiff_t>(mlp.values.size()));
            std::size_t mismatches = 0;
            for (std::size_t i = 0; i < after.values.size(); ++i)
                if (after.values[i] != before.values[i] + attention.values[i]) ++mismatches;
            CHECK_MESSAGE(mismatches == 0, phase);
        }
    }
}

TEST_CASE("steer changes the next layer's input by exactly the vector, coefficient 0 changes nothing") {
    for (const char* name : kModels) {
        CAPTURE(name);
        TempDir out;
        const Fixture f(name, out.path());
        std::vector<float> v(f.config().n_embd);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
        ember::npy::write_f32(out.path() / "v.npy", v.data(), {v.size()});

        const auto clean = run(f, {});
        const auto zero = run(f, {spec(builtin_plugin("steer"), R"({"vector": "v.npy", "coefficient": 0, "stage": "before_layer"})",
                                       out.path())});
        REQUIRE(zero.failure.empty());
        CHECK(zero.result.tokens == clean.result.tokens);
        for (std::size_t i = 0; i < clean.result.steps.size(); ++i) CHECK(zero.result.steps[i].logit == clean.result.steps[i].logit);

        const auto steered = run(f, {spec(builtin_plugin("capture"), R"({"stage": "after_layer", "layers": [0]})"),
                                     spec(builtin_plugin("steer"), R"({"vector": "v.npy", "stage": "before_layer", "layers": [1]})",
                                          out.path()),
                                     spec(builtin_plugin("capture"), R"({"stage": "before_layer", "layers": [1], "dir": "steered"})")});
        REQUIRE(steered.failure.empty());
        for (const char* phase : {"prefill", "decode"}) {
            const auto after0 = captured(out.path(), fmt::format("after_layer.layer0.{}.npy", phase));
            const auto before1 = ember::npy::read(out.path() / "steered" / fmt::format("before_layer.layer1.{}.npy", phase));
            std::size_t mismatches = 0;
            for (std::size_t i = 0; i < before1.values.size(); ++i)
                if (before1.values[i] != after0.values[i] + v[i % v.size()]) ++mismatches;
            CHECK_MESSAGE(mismatches == 0, phase);
        }
    }
}

TEST_CASE("patch with the run's own captures reproduces its logits bit for bit") {
    for (const char* name : kModels) {
        CAPTURE(name);
        TempDir out;
        const Fixture f(name, out.path());
        const auto clean = run(f, {spec(builtin_plugin("capture"))});
        const auto patched = run(f, {spec(builtin_plugin("patch"), R"({"source": "capture"})", out.path())});
        REQUIRE(patched.failure.empty());
        CHECK(patched.result.tokens == clean.result.tokens);
        for (std::size_t i = 0; i < clean.result.steps.size(); ++i) {
            CHECK(patched.result.steps[i].logit == clean.result.steps[i].logit);
            CHECK(patched.result.steps[i].margin == clean.result.steps[i].margin);
        }
    }
}

TEST_CASE("zeroing after_layer at the last layer makes every logit 0 and every greedy token id 0") {
    for (const char* name : kModels) {
        CAPTURE(name);
        TempDir out;
        const Fixture f(name, out.path());
        const std::string config = fmt::format(R"({{"stage": "after_layer", "layers": [{}]}})", f.config().n_layers - 1);
        const auto o = run(f, {spec(builtin_plugin("ablate"), config),
                               spec(builtin_plugin("capture"), R"({"stage": "after_logits"})")});
        REQUIRE(o.failure.empty());
        CHECK(o.result.tokens == std::vector<std::int32_t>(kTokens, 0));
        for (const char* phase : {"prefill", "decode"}) {
            const auto logits = captured(out.path(), fmt::format("after_logits.{}.npy", phase)).values;
            CHECK(std::count(logits.begin(), logits.end(), 0.0f) == static_cast<std::ptrdiff_t>(logits.size()));
        }
    }
}

TEST_CASE("a strict failure in after_attention at decode layer 1 stops the loop with the exact message") {
    for (const char* name : kModels) {
        CAPTURE(name);
        TempDir out;
        const Fixture f(name, out.path());
        const auto o = run(f, {spec(test_plugin("failing"), R"({"stage": "after_attention", "phase": "decode", "layer": 1})"),
                               spec(builtin_plugin("finite-check"))});
        CHECK(o.failure == "experiment 'failing' failed in after_attention (phase=decode, layer=1): planned failure");
        CHECK(o.records[0].timings[static_cast<std::size_t>(StageId::OnGenerationComplete)].calls == 0);
        CHECK(o.records[0].timings[static_cast<std::size_t>(StageId::OnError)].calls == 1);
        // finite-check ran through the prefill and decode layer 0, then nothing more.
        CHECK(o.records[1].timings[static_cast<std::size_t>(StageId::AfterLayer)].calls == f.config().n_layers + 1);
    }
}
