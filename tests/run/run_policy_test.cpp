// Rung: interventions (the runner's lifecycle policies), through `ember run` on
// stories260K: composition order (defaults file via $EMBER_DEFAULTS, the config's
// entries, each --experiment) visible in the values each experiment sees; fail_open
// exits 0 and lists the failure; strict exits 1 and run.json says why; a slow plugin
// trips timeout_ms; on_error is called once; a failing create; plugins that cannot be
// loaded are refused by name before anything runs.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <regex>

#include "ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kLayers = 5;  // stories260K
constexpr int kTokens = 4;

std::string stories(const std::string& more = "") {
    return run_config(fixture_path("models/stories260K.gguf"), "Once upon a time", kTokens, more);
}

std::string recorder(const std::string& tag, double add = 0) {
    return experiment(test_plugin("recorder"), fmt::format("tag = \"{}\"\nadd = {:.1f}", tag, add));
}

const std::string kFailAtDecodeLayer1 = "stage = \"after_attention\"\nphase = \"decode\"\nlayer = 1";
const std::string kFailure = "experiment 'failing' failed in after_attention (phase=decode, layer=1): planned failure";

// The value "first=V" a recorder line reports.
double first_value(const std::string& line) {
    const auto at = line.find(" first=");
    REQUIRE(at != std::string::npos);
    return std::stod(line.substr(at + 7));
}

}  // namespace

TEST_CASE("experiments compose as defaults file, config entries, --experiment, each sees the previous one's writes") {
    TempDir dir;
    write_text(dir.path() / "defaults.toml", recorder("defaults", 1));
    const auto run = ember_run(dir, stories(recorder("config", 1)), fmt::format("--experiment {}", test_plugin("recorder").string()),
                               "EMBER_DEFAULTS=" + (dir.path() / "defaults.toml").string());
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);

    const auto lines = run.err_lines("[recorder] info: ");
    std::vector<std::string> first_stage;  // before_layer of the prefill at layer 0, in call order
    for (const auto& l : lines)
        if (l.find(" before_layer phase=prefill") != std::string::npos && l.find(" layer=0 ") != std::string::npos)
            first_stage.push_back(l);
    REQUIRE(first_stage.size() == 3);
    CHECK(first_stage[0].rfind("[recorder] info: defaults before_layer", 0) == 0);
    CHECK(first_stage[1].rfind("[recorder] info: config before_layer", 0) == 0);
    CHECK(first_stage[2].rfind("[recorder] info: recorder before_layer", 0) == 0);  // --experiment: no config, default tag
    const double seen_by_defaults = first_value(first_stage[0]);
    CHECK(first_value(first_stage[1]) == doctest::Approx(seen_by_defaults + 1).epsilon(1e-4));
    CHECK(first_value(first_stage[2]) == doctest::Approx(seen_by_defaults + 2).epsilon(1e-4));

    const auto& experiments = run.experiments();
    REQUIRE(experiments.size() == 3);
    CHECK(experiments[0].at("origin").as_string().starts_with("defaults "));
    CHECK(experiments[1].at("origin").as_string().starts_with("run.toml:"));  // the config as named on the command line
    CHECK(str(experiments[2].at("origin")) == "--experiment 1");
}

TEST_CASE("fail_open: the failure is listed in run.json, the experiment is not called again, the run exits 0") {
    TempDir dir;
    const auto run = ember_run(dir, stories("[hooks]\nfailure = \"fail_open\"\n\n" +
                                            experiment(test_plugin("failing"), kFailAtDecodeLayer1) + recorder("r")));
    CHECK(run.exit_code == 0);
    CHECK(str(run.report.at("outcome")) == "ok");
    CHECK(run.report.at("generated").at("tokens").as_array().size() == kTokens);
    CHECK(str(run.report.at("experiments").at("failure_policy")) == "fail_open");
    CHECK(run.report.at("experiments").at("failures") == boost::json::array{boost::json::value(kFailure)});
    const auto& failing = run.experiments().at(0);
    CHECK(str(failing.at("outcome")) == "disabled");
    CHECK(str(failing.at("failure")) == kFailure);
    // Prefill: every layer; decode step 1: layers 0 and 1, where it failed; then never again.
    CHECK(stage_calls(failing, "after_attention") == kLayers + 2);
    CHECK(stage_calls(failing, "after_mlp") == kLayers + 1);
    CHECK(stage_calls(failing, "on_generation_complete") == 0);
    CHECK(stage_calls(failing, "on_error") == 0);
    // The other experiment went on to the end.
    const auto& r = run.experiments().at(1);
    CHECK(str(r.at("outcome")) == "ok");
    CHECK(stage_calls(r, "after_attention") == kLayers * kTokens);
    CHECK(run.err_lines("[recorder] info: r on_generation_complete").size() == 1);
    CHECK(run.err_lines("[failing] warning: " + kFailure).size() == 1);
    CHECK(run.err_lines("error: ").empty());
}

TEST_CASE("strict: the run stops with exit 1, run.json says failed with the message, on_error is called once") {
    TempDir dir;
    const auto run = ember_run(dir, stories(experiment(test_plugin("failing"), kFailAtDecodeLayer1) + recorder("r")));
    CHECK(run.exit_code == 1);
    CHECK(run.err_lines("error: ") == std::vector<std::string>{"error: " + kFailure});
    REQUIRE(run.has_report);
    CHECK(str(run.report.at("outcome")) == "failed");
    CHECK(str(run.report.at("error")) == kFailure);
    CHECK(run.report.at("generated").at("stop_reason").is_null());
    CHECK(run.report.at("experiments").at("failures") == boost::json::array{boost::json::value(kFailure)});
    CHECK(str(run.experiments().at(0).at("outcome")) == "failed");
    CHECK(str(run.experiments().at(1).at("outcome")) == "ok");
    // on_error: once to each experiment still enabled, the failing one included; no completion.
    CHECK(run.err_lines("[recorder] info: r on_error ").size() == 1);
    CHECK(run.err_lines("[failing] info: failing on_error " + kFailure).size() == 1);
    CHECK(stage_calls(run.experiments().at(1), "on_error") == 1);
    CHECK(run.err_lines("[recorder] info: r on_generation_complete").empty());
    CHECK(run.err_lines("ember: run ").empty());  // no completion summary
    // Nothing half-written beside run.json.
    for (const auto& entry : fs::directory_iterator(run.output_dir))
        CHECK_MESSAGE(entry.path().filename() == "run.json", entry.path().string());
}

TEST_CASE("a slow experiment trips timeout_ms, the same experiment passes under a generous timeout") {
    TempDir slow_dir, generous_dir;
    const std::string slow = experiment(test_plugin("slow"), "sleep_ms = 30");
    const auto tripped = ember_run(slow_dir, stories("[hooks]\ntimeout_ms = 10\n\n" + slow));
    CHECK(tripped.exit_code == 1);
    const auto errors = tripped.err_lines("error: ");
    REQUIRE(errors.size() == 1);
    CHECK(std::regex_match(errors[0], std::regex(R"(error: experiment 'slow' failed in after_mlp \(phase=prefill, layer=0\): )"
                                                 R"(returned after [0-9.]+ ms, over the 10 ms timeout \(hooks\.timeout_ms\))")));
    CHECK(str(tripped.report.at("outcome")) == "failed");

    const auto generous = ember_run(generous_dir, stories("[hooks]\ntimeout_ms = 5000\n\n" + slow));
    CHECK_MESSAGE(generous.exit_code == 0, generous.err);
}

TEST_CASE("a strict failure in create stops the run, run.json lists the experiments that never ran") {
    TempDir dir;
    const auto run = ember_run(dir, stories(recorder("r") + experiment(test_plugin("failing"), "stage = \"constructor\"") +
                                            recorder("after")));
    const std::string message = "experiment 'failing' failed in create: planned failure";
    CHECK(run.exit_code == 1);
    CHECK(run.err_lines("error: ") == std::vector<std::string>{"error: " + message});
    REQUIRE(run.has_report);
    CHECK(str(run.report.at("error")) == message);
    REQUIRE(run.experiments().size() == 3);
    CHECK(str(run.experiments().at(0).at("outcome")) == "ok");
    CHECK(str(run.experiments().at(1).at("outcome")) == "failed");
    CHECK(str(run.experiments().at(2).at("outcome")) == "not_run");
    CHECK(run.err_lines("[recorder] info: r on_error ").size() == 1);
    CHECK(run.err_lines("[recorder] info: r on_model_loaded").empty());
}

TEST_CASE("a missing plugin, a missing entry symbol and a wrong ABI major are refused by name before the run") {
    const struct {
        fs::path plugin;
        std::string says;
    } cases[] = {
        {fs::path(EMBER_TEST_PLUGIN_DIR) / "libno-such-plugin.so", "no such file"},
        {test_plugin("abi-no-entry"), "does not export ember_plugin_entry"},
        {test_plugin("abi-wrong-major"), "was built for plugin ABI 2.0, but this ember implements ABI 1.5"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.plugin);
        for (const bool from_config : {true, false}) {
            CAPTURE(from_config);
            TempDir dir;
            const auto run = from_config ? ember_run(dir, stories(experiment(c.plugin)))
                                         : ember_run(dir, stories(), "--experiment " + shell_quote(c.plugin.string()));
            CHECK(run.exit_code == 1);
            const auto errors = run.err_lines("error: ");
            REQUIRE(errors.size() == 1);
            CHECK(errors[0].starts_with(fmt::format("error: plugin '{}'", c.plugin.string())));
            CHECK(errors[0].find(c.says) != std::string::npos);
            CHECK_FALSE(run.has_report);  // nothing started
            CHECK(run.out.empty());
        }
    }
}

}  // namespace ember::test
