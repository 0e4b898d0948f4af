// Rung: interventions (synthetic tensors; against the reference path once `ember run`
// exists). capture writes .npy files that NumPy reads without ember (checked with
// python3 + numpy, as a researcher would) holding exactly the activations the run
// computed, with a manifest recording run information and every array's stage, layer,
// phase and positions; patch puts captured activations back (route-locked).
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "support/fixtures.hpp"
#include "synthetic_run.hpp"

using namespace ember;
using namespace ember::test;
using experiments::ExperimentFailure;
using experiments::ExperimentRunner;
namespace fs = std::filesystem;

namespace {

const SyntheticModel kModel;

struct Run {
    std::vector<Trace> traces;
    std::string failure;
};

Run run_with(const std::vector<experiments::ExperimentSpec>& specs, const experiments::RunInfo& info, float seed = 0,
             std::size_t generated = 3) {
    Run run;
    experiments::RunnerOptions options;
    options.log = [](experiments::LogLevel, std::string_view, std::string_view) {};
    try {
        ExperimentRunner runner(specs, info, options);
        run.traces = generate(runner, kModel, info.prompt_token_ids.size(), generated, seed);
    } catch (const ExperimentFailure& e) {
        run.failure = e.what();
    }
    return run;
}

boost::json::object read_manifest(const fs::path& dir) {
    std::ifstream in(dir / "manifest.json");
    REQUIRE_MESSAGE(in, "no manifest in " << dir);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return boost::json::parse(text).as_object();
}

// A python3 that has NumPy: the Debian one (python3-numpy, scripts/setup.sh) when the
// first python3 on PATH lacks it.
std::string numpy_python() {
    for (const char* candidate : {"python3", "/usr/bin/python3"}) {
        if (run_command(std::string(candidate) + " -c 'import numpy' 2>/dev/null").exit_code == 0) return candidate;
    }
    FAIL("no python3 with NumPy found; install python3-numpy (scripts/setup.sh does)");
    return {};
}

std::string hex_of(const std::vector<float>& values) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    for (std::size_t i = 0; i < values.size() * sizeof(float); ++i) {
        out += digits[bytes[i] >> 4];
        out += digits[bytes[i] & 15];
    }
    return out;
}

std::vector<float> rows_of(const std::vector<Trace>& traces, std::size_t first, std::size_t last,
                           std::vector<float> Trace::*field) {
    std::vector<float> out;
    for (std::size_t e = first; e < last; ++e) out.insert(out.end(), (traces[e].*field).begin(), (traces[e].*field).end());
    return out;
}

std::vector<float> layer_rows(const std::vector<Trace>& traces, std::size_t first, std::size_t last, std::size_t layer) {
    std::vector<float> out;
    for (std::size_t e = first; e < last; ++e)
        out.insert(out.end(), traces[e].after_layer[layer].begin(), traces[e].after_layer[layer].end());
    return out;
}

}  // namespace

TEST_CASE("capture writes .npy files NumPy reads, equal to the run's activations, with a manifest") {
    TempDir out;
    const auto info = test_run_info(3, out.path());
    const auto run = run_with({spec(builtin_plugin("capture"), R"({"stages": ["after_layer", "after_logits"]})")}, info);
    REQUIRE(run.failure.empty());
    const fs::path dir = out.path() / "capture";

    const auto manifest = read_manifest(dir);
    CHECK(manifest.at("schema_version").as_int64() == 1);
    CHECK(manifest.at("complete").as_bool());
    const auto& r = manifest.at("run").as_object();
    CHECK(r.at("run_id").as_string() == "test-run");
    CHECK(r.at("model_sha256").as_string() == info.model_sha256);
    CHECK(r.at("route").as_string() == "reference");
    CHECK(r.at("config_hash").as_string() == info.config_hash);
    CHECK(r.at("model_path").as_string() == info.model_path);
    CHECK(boost::json::value_to<std::vector<std::uint32_t>>(r.at("prompt_token_ids")) == info.prompt_token_ids);
    CHECK(manifest.at("model").as_object().at("n_layers").as_int64() == 3);
    CHECK(manifest.at("model").as_object().at("family").as_string() == "qwen3");

    // 3 layers x 2 phases of after_layer, and after_logits for 2 phases.
    const auto& arrays = manifest.at("arrays").as_array();
    REQUIRE(arrays.size() == 8);
    std::string script = "import json, sys, numpy as np\nd = sys.argv[1]\n"
                         "for a in json.load(open(d + '/manifest.json'))['arrays']:\n"
                         "    x = np.load(d + '/' + a['file'])\n"
                         "    print(a['file'], x.dtype, x.shape[0], x.shape[1], x.flags['C_CONTIGUOUS'], x.tobytes().hex())\n";
    const auto py = run_command(numpy_python() + " -c " + shell_quote(script) + " " + shell_quote(dir.string()), true);
    REQUIRE_MESSAGE(py.exit_code == 0, py.output);

    std::map<std::string, std::string> expected;  // file -> "dtype rows cols contiguous hex"
    for (std::size_t l = 0; l < 3; ++l) {
        expected["after_layer.layer" + std::to_string(l) + ".prefill.npy"] =
            "float32 3 4 True " + hex_of(layer_rows(run.traces, 0, 1, l));
        expected["after_layer.layer" + std::to_string(l) + ".decode.npy"] =
            "float32 2 4 True " + hex_of(layer_rows(run.traces, 1, 3, l));
    }
    expected["after_logits.prefill.npy"] = "float32 1 6 True " + hex_of(rows_of(run.traces, 0, 1, &Trace::logits));
    expected["after_logits.decode.npy"] = "float32 2 6 True " + hex_of(rows_of(run.traces, 1, 3, &Trace::logits));
    std::istringstream lines(py.output);
    std::string file, rest;
    std::size_t seen = 0;
    while (lines >> file && std::getline(lines, rest)) {
        CAPTURE(file);
        REQUIRE(expected.count(file) == 1);
        CHECK(rest.substr(1) == expected[file]);
        ++seen;
    }
    CHECK(seen == 8);

    for (const auto& a : arrays) {
        const auto& o = a.as_object();
        if (o.at("file").as_string() != "after_layer.layer1.decode.npy") continue;
        CHECK(o.at("stage").as_string() == "after_layer");
        CHECK(o.at("layer").as_int64() == 1);
        CHECK(o.at("phase").as_string() == "decode");
        CHECK(boost::json::value_to<std::vector<int>>(o.at("positions")) == std::vector<int>{3, 4});
        CHECK(o.at("dtype").as_string() == "float32");
    }
    for (const auto& a : arrays) {
        const auto& o = a.as_object();
        if (o.at("file").as_string() != "after_logits.prefill.npy") continue;
        CHECK(o.at("layer").is_null());
        CHECK(boost::json::value_to<std::vector<int>>(o.at("positions")) == std::vector<int>{2});
    }
    for (const auto& entry : fs::directory_iterator(dir))
        CHECK_MESSAGE(entry.path().string().find(".tmp.") == std::string::npos, "left behind: " << entry.path());
}

TEST_CASE("capture of selected layers, positions and phase") {
    TempDir out;
    const auto run = run_with({spec(builtin_plugin("capture"),
                                    R"({"stage": "after_mlp", "layers": [2], "positions": [0, 2], "phase": "prefill",)"
                                    R"( "dir": "mlp"})")},
                              test_run_info(3, out.path()));
    REQUIRE(run.failure.empty());
    const auto manifest = read_manifest(out.path() / "mlp");
    const auto& arrays = manifest.at("arrays").as_array();
    REQUIRE(arrays.size() == 1);
    CHECK(arrays[0].as_object().at("file").as_string() == "after_mlp.layer2.prefill.npy");
    CHECK(boost::json::value_to<std::vector<int>>(arrays[0].as_object().at("positions")) == std::vector<int>{0, 2});
    CHECK(boost::json::value_to<std::vector<int>>(arrays[0].as_object().at("shape")) == std::vector<int>{2, 4});
}

TEST_CASE("capture in a failed run writes what it has, marked incomplete") {
    TempDir out;
    const auto run = run_with({spec(builtin_plugin("capture")),
                               spec(test_plugin("failing"), R"({"stage": "after_layer", "phase": "decode", "layer": 2})")},
                              test_run_info(3, out.path()));
    REQUIRE(!run.failure.empty());
    const auto manifest = read_manifest(out.path() / "capture");
    CHECK(!manifest.at("complete").as_bool());
    CHECK(manifest.at("error").as_string() == run.failure);
    CHECK(manifest.at("arrays").as_array().size() == 6);  // prefill x3, decode x3 (the failing layer's row included)
}

TEST_CASE("patch with the clean run's own captures reproduces it bit for bit") {
    TempDir out;
    const auto info = test_run_info(3, out.path());
    const auto clean = run_with({spec(builtin_plugin("capture"))}, info);
    REQUIRE(clean.failure.empty());
    const auto patched = run_with({spec(builtin_plugin("patch"), R"({"source": "capture"})", out.path())}, info);
    REQUIRE(patched.failure.empty());
    for (std::size_t e = 0; e < clean.traces.size(); ++e) {
        CHECK(patched.traces[e].after_layer == clean.traces[e].after_layer);
        CHECK(patched.traces[e].logits == clean.traces[e].logits);
    }
}

TEST_CASE("patch with another prompt's captures at every layer reproduces that prompt's activations and logits") {
    TempDir out;
    const auto info = test_run_info(3, out.path());
    const auto source = run_with({spec(builtin_plugin("capture"))}, info, /*seed=*/5.0f);
    const auto target = run_with({}, info, /*seed=*/0.0f);
    REQUIRE(source.traces[0].logits != target.traces[0].logits);
    const auto patched = run_with({spec(builtin_plugin("patch"), R"({"source": "capture/manifest.json"})", out.path())}, info, 0.0f);
    REQUIRE(patched.failure.empty());
    for (std::size_t e = 0; e < source.traces.size(); ++e) {
        CHECK(patched.traces[e].after_layer == source.traces[e].after_layer);
        CHECK(patched.traces[e].logits == source.traces[e].logits);
        CHECK(patched.traces[e].before_layer[0] == target.traces[e].before_layer[0]);  // layer 0's input is its own
    }
}

TEST_CASE("patch at one position and layer replaces only that row") {
    TempDir out;
    const auto info = test_run_info(3, out.path());
    const auto source = run_with({spec(builtin_plugin("capture"))}, info, 5.0f);
    const auto target = run_with({}, info, 0.0f);
    const auto patched = run_with({spec(builtin_plugin("patch"),
                                        R"({"source": "capture", "layers": [0], "positions": [1], "phase": "prefill"})",
                                        out.path())},
                                  info, 0.0f);
    REQUIRE(patched.failure.empty());
    const auto& got = patched.traces[0].after_layer[0];
    for (std::size_t c = 0; c < 4; ++c) {
        CHECK(got[c] == target.traces[0].after_layer[0][c]);
        CHECK(got[4 + c] == source.traces[0].after_layer[0][4 + c]);
        CHECK(got[8 + c] == target.traces[0].after_layer[0][8 + c]);
    }
}

TEST_CASE("patch is route-locked: it refuses by name a source from another model, prompt length or route") {
    TempDir out;
    const auto info = test_run_info(3, out.path());
    REQUIRE(run_with({spec(builtin_plugin("capture"))}, info).failure.empty());
    const std::string source = "patch source '" + (out.path() / "capture").string() + "'";
    const auto patch = spec(builtin_plugin("patch"), R"({"source": "capture"})", out.path());

    auto other_model = info;
    other_model.model_sha256 = std::string(64, 'b');
    CHECK(run_with({patch}, other_model).failure == "experiment 'patch' failed in create: " + source +
                                                        " was captured from another model (sha256 " + info.model_sha256 +
                                                        "), this run's is " + other_model.model_sha256);
    auto longer = test_run_info(4, out.path());
    CHECK(run_with({patch}, longer).failure ==
          "experiment 'patch' failed in create: " + source + " has a 3-token prompt, this run's has 4");
    auto fast = info;
    fast.route = "fast";
    CHECK(run_with({patch}, fast).failure ==
          "experiment 'patch' failed in create: " + source + " was captured on route 'reference', this run uses 'fast'");
    CHECK(run_with({spec(builtin_plugin("patch"), R"({"source": "nowhere"})", out.path())}, info).failure.find(
              "cannot open") != std::string::npos);
}

TEST_CASE("patch refuses an incomplete capture") {
    TempDir out;
    const auto info = test_run_info(3, out.path());
    run_with({spec(builtin_plugin("capture")), spec(test_plugin("failing"), R"({"stage": "after_logits"})")}, info);
    CHECK(run_with({spec(builtin_plugin("patch"), R"({"source": "capture"})", out.path())}, info).failure ==
          "experiment 'patch' failed in create: patch source '" + (out.path() / "capture").string() +
              "' is incomplete (the run that captured it failed)");
}
