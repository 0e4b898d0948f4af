// Rung: interventions (synthetic tensors; the end-to-end tests against the reference path
// come with `ember run`). The built-in ablate, steer and finite-check plugins, loaded from
// build/plugins like any outside plugin and driven by the synthetic forward pass: their
// effect is exactly what their config says, at exactly the selected sites, and bad
// configs are refused by name.
#include <doctest/doctest.h>

#include <ember/npy.hpp>
#include "synthetic_run.hpp"

using namespace ember;
using namespace ember::test;
using experiments::ExperimentFailure;
using experiments::ExperimentRunner;

namespace {

const SyntheticModel kModel;  // 3 layers, n_embd 4, n_vocab 6

struct Run {
    std::vector<Trace> traces;
    std::string failure;  // empty when the run succeeded
};

Run run_with(const std::vector<experiments::ExperimentSpec>& specs, std::size_t prompt = 3, std::size_t generated = 3) {
    Run run;
    experiments::RunnerOptions options;
    options.log = [](experiments::LogLevel, std::string_view, std::string_view) {};
    try {
        ExperimentRunner runner(specs, test_run_info(prompt), options);
        run.traces = generate(runner, kModel, prompt, generated);
    } catch (const ExperimentFailure& e) {
        run.failure = e.what();
    }
    return run;
}

std::vector<Trace> clean_run(std::size_t prompt = 3, std::size_t generated = 3) { return run_with({}, prompt, generated).traces; }

std::vector<float> row(const std::vector<float>& tensor, std::size_t r, std::size_t cols = 4) {
    return {tensor.begin() + static_cast<std::ptrdiff_t>(r * cols), tensor.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols)};
}

std::string write_vector(const TempDir& dir, const std::string& name, std::vector<float> values,
                         std::vector<std::size_t> shape = {}) {
    if (shape.empty()) shape = {values.size()};
    ember::npy::write_f32(dir.path() / name, values.data(), shape);
    return name;
}

}  // namespace

TEST_CASE("ablate zeroing after_mlp at a layer: that layer's output is its input plus attention only") {
    const auto clean = clean_run();
    const auto run = run_with({spec(builtin_plugin("ablate"), R"({"stage": "after_mlp", "layers": [1]})")});
    REQUIRE(run.failure.empty());
    for (std::size_t e = 0; e < run.traces.size(); ++e) {
        const Trace& t = run.traces[e];
        for (float v : t.after_mlp[1]) CHECK(v == 0.0f);
        for (std::size_t i = 0; i < t.after_layer[1].size(); ++i)
            CHECK(t.after_layer[1][i] == t.before_layer[1][i] + t.after_attention[1][i]);
        CHECK(t.after_layer[0] == clean[e].after_layer[0]);  // the layer before is untouched
        CHECK(t.after_mlp[0] == clean[e].after_mlp[0]);
        CHECK(t.after_mlp[2] != clean[e].after_mlp[2]);      // later layers see the change
    }
}

TEST_CASE("ablate scaling at chosen positions and phase touches only those rows") {
    const auto clean = clean_run();
    const auto run = run_with({spec(builtin_plugin("ablate"),
                                    R"({"stage": "after_attention", "layers": [0], "positions": [1], "phase": "prefill",)"
                                    R"( "mode": "scale", "scale": 0.5})")});
    REQUIRE(run.failure.empty());
    const Trace& prefill = run.traces[0];
    CHECK(row(prefill.after_attention[0], 0) == row(clean[0].after_attention[0], 0));
    for (std::size_t c = 0; c < 4; ++c) CHECK(prefill.after_attention[0][4 + c] == 0.5f * clean[0].after_attention[0][4 + c]);
    CHECK(row(prefill.after_attention[0], 2) == row(clean[0].after_attention[0], 2));
    // Decode evaluations (positions 3 and 4) are not selected.
    CHECK(run.traces[1].after_attention[0] == clean[1].after_attention[0]);
}

TEST_CASE("ablate positions = \"last\" takes the last row of every evaluation") {
    const auto run = run_with({spec(builtin_plugin("ablate"), R"({"stage": "before_layer", "layers": [2], "positions": "last"})")});
    REQUIRE(run.failure.empty());
    const auto& prefill = run.traces[0].before_layer[2];
    CHECK(row(prefill, 0) != std::vector<float>(4, 0.0f));
    CHECK(row(prefill, 2) == std::vector<float>(4, 0.0f));
    CHECK(run.traces[1].before_layer[2] == std::vector<float>(4, 0.0f));
    CHECK(run.traces[2].before_layer[2] == std::vector<float>(4, 0.0f));
}

TEST_CASE("ablate at the last layer's after_layer makes every logit 0") {
    const auto run = run_with({spec(builtin_plugin("ablate"), R"({"stage": "after_layer", "layers": [2]})")});
    REQUIRE(run.failure.empty());
    for (const auto& t : run.traces) CHECK(t.logits == std::vector<float>(6, 0.0f));
}

TEST_CASE("ablate refuses bad configs by name") {
    const auto ablate = builtin_plugin("ablate");
    const std::string stages = "before_layer, attention_pattern, head_outputs, after_attention, residual_mid, mlp_input, mlp_activation, "
                               "after_mlp, after_layer, sae_features, before_logits, after_logits";
    CHECK(run_with({spec(ablate, "{}")}).failure ==
          "experiment 'ablate' failed in create: config key 'stage' is required (one of " + stages + ")");
    CHECK(run_with({spec(ablate, R"({"stage": "after_mpl"})")}).failure ==
          "experiment 'ablate' failed in create: unknown stage 'after_mpl' (one of " + stages + ")");
    CHECK(run_with({spec(ablate, R"({"stage": "after_mlp", "layer": [1]})")}).failure ==
          "experiment 'ablate' failed in create: unknown config key 'layer' (known: stage, stages, layers, positions, select, "
          "phase, mode, scale, heads, neurons, features)");
    // The stages inside the blocks: a read-only stage, selectors on the wrong stage.
    CHECK(run_with({spec(ablate, R"({"stage": "attention_pattern"})")}).failure ==
          "experiment 'ablate' failed in create: attention_pattern is read-only: ablate cannot change it");
    CHECK(run_with({spec(ablate, R"({"stage": "after_mlp", "heads": [0]})")}).failure ==
          "experiment 'ablate' failed in create: config key 'heads' applies only to head_outputs or attention_pattern");
    CHECK(run_with({spec(ablate, R"({"stage": "head_outputs", "neurons": [0]})")}).failure ==
          "experiment 'ablate' failed in create: config key 'neurons' applies only to mlp_activation");
    CHECK(run_with({spec(ablate, R"({"stage": "after_mlp", "scale": 2})")}).failure ==
          "experiment 'ablate' failed in create: config key 'scale' applies only with mode = \"scale\"");
    CHECK(run_with({spec(ablate, R"({"stage": "after_mlp", "layers": [3]})")}).failure ==
          "experiment 'ablate' failed in on_model_loaded: config key 'layers' names layer 3 but the model has 3 layers");
    CHECK(run_with({spec(ablate, R"({"stage": "after_mlp", "positions": "first"})")}).failure ==
          "experiment 'ablate' failed in create: config key 'positions' must be \"all\", \"last\" or a list");
}

TEST_CASE("steer adds coefficient * vector at the chosen layer, the next layer's input changes by exactly that") {
    TempDir dir;
    const std::vector<float> v = {1.0f, -2.0f, 0.5f, 3.0f};
    write_vector(dir, "v.npy", v);
    const auto clean = clean_run();
    const auto run = run_with({spec(builtin_plugin("steer"),
                                    R"({"vector": "v.npy", "coefficient": 2, "stage": "before_layer", "layers": [1]})",
                                    dir.path())});
    REQUIRE(run.failure.empty());
    for (std::size_t e = 0; e < run.traces.size(); ++e) {
        const Trace& t = run.traces[e];
        CHECK(t.after_layer[0] == clean[e].after_layer[0]);
        const std::size_t rows = t.before_layer[1].size() / 4;
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < 4; ++c)
                CHECK(t.before_layer[1][r * 4 + c] == clean[e].after_layer[0][r * 4 + c] + 2.0f * v[c]);
    }
}

TEST_CASE("steer with coefficient 0 changes nothing, bit for bit") {
    TempDir dir;
    write_vector(dir, "v.npy", {1.0f, -2.0f, 0.5f, 3.0f});
    const auto clean = clean_run();
    const auto run = run_with({spec(builtin_plugin("steer"), R"({"vector": "v.npy", "coefficient": 0, "stage": "after_mlp"})",
                                    dir.path())});
    REQUIRE(run.failure.empty());
    for (std::size_t e = 0; e < clean.size(); ++e) {
        CHECK(run.traces[e].after_layer == clean[e].after_layer);
        CHECK(run.traces[e].logits == clean[e].logits);
    }
}

TEST_CASE("steer on after_logits takes a vector of n_vocab values") {
    TempDir dir;
    write_vector(dir, "bias.npy", {0, 0, 0, 0, 0, 100.0f});
    const auto clean = clean_run();
    const auto run = run_with({spec(builtin_plugin("steer"), R"({"vector": "bias.npy", "stage": "after_logits"})", dir.path())});
    REQUIRE(run.failure.empty());
    CHECK(run.traces[0].logits[5] == clean[0].logits[5] + 100.0f);
    CHECK(run.traces[0].logits[0] == clean[0].logits[0]);
}

TEST_CASE("steer refuses a vector of the wrong length, a missing file and a bad shape, by name") {
    TempDir dir;
    write_vector(dir, "five.npy", {1, 2, 3, 4, 5});
    write_vector(dir, "matrix.npy", {1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
    const auto steer = builtin_plugin("steer");
    const std::string five = (dir.path() / "five.npy").string();
    CHECK(run_with({spec(steer, R"({"vector": "five.npy", "stage": "after_mlp"})", dir.path())}).failure ==
          "experiment 'steer' failed in on_model_loaded: steer vector '" + five +
              "' has 5 values, but after_mlp is 4 wide (the model's n_embd)");
    CHECK(run_with({spec(steer, R"({"vector": "absent.npy", "stage": "after_mlp"})", dir.path())}).failure ==
          "experiment 'steer' failed in create: '" + (dir.path() / "absent.npy").string() + "': cannot open");
    CHECK(run_with({spec(steer, R"({"vector": "matrix.npy", "stage": "after_mlp"})", dir.path())}).failure ==
          "experiment 'steer' failed in create: steer vector '" + (dir.path() / "matrix.npy").string() +
              "' must have shape (n,) or (1, n)");
    CHECK(run_with({spec(steer, R"({"stage": "after_mlp"})", dir.path())}).failure ==
          "experiment 'steer' failed in create: config key 'vector' (a .npy file) is required");
}

TEST_CASE("finite-check catches a NaN planted by a test plugin, naming the first bad position and column") {
    const auto planter = test_plugin("nan-planter");
    const auto check = builtin_plugin("finite-check");
    CHECK(run_with({spec(planter, R"({"stage": "after_mlp", "layer": 1, "row": 2, "column": 3})"), spec(check)}).failure ==
          "experiment 'finite-check' failed in after_mlp (phase=prefill, layer=1): expected a finite activation, found "
          "nan at position 2 (row 2), column 3");
    // In decode the row is the one token: position 3 + step - 1.
    CHECK(run_with({spec(planter, R"({"stage": "after_attention", "phase": "decode", "layer": 0, "column": 1,)"
                                  R"( "value": "-inf"})"),
                    spec(check)})
              .failure ==
          "experiment 'finite-check' failed in after_attention (phase=decode, layer=0): expected a finite activation, "
          "found -inf at position 3 (row 0), column 1");
    // Watching only after_layer, the NaN is caught where it reaches the residual stream.
    CHECK(run_with({spec(planter, R"({"stage": "after_mlp", "layer": 1, "row": 2, "column": 3})"),
                    spec(check, R"({"stages": ["after_layer"]})")})
              .failure ==
          "experiment 'finite-check' failed in after_layer (phase=prefill, layer=1): expected a finite activation, "
          "found nan at position 2 (row 2), column 3");
    // Composed before the planter, it sees the clean tensor at that stage and the NaN one stage later.
    CHECK(run_with({spec(check), spec(planter, R"({"stage": "after_mlp", "layer": 1, "row": 2, "column": 3})")}).failure ==
          "experiment 'finite-check' failed in after_layer (phase=prefill, layer=1): expected a finite activation, "
          "found nan at position 2 (row 2), column 3");
    CHECK(run_with({spec(check)}).failure.empty());
}
